import { mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { applyPolicyFile, brokeredShellConfigSchema, defaultConfig, readPolicyFile } from '../../src/config/index.js';

let base: string;
beforeEach(() => {
  base = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'bsh-config-policy-')));
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

it('maps a --policy file onto the configuration: roots and rules added, the rest replaced', async () => {
  const file = path.join(base, 'policy.json');
  writeFileSync(
    file,
    JSON.stringify({
      writableRoots: ['build', '/opt/out'],
      rules: [{ pattern: '*.pem', decision: 'prompt' }],
      outsideRoots: 'prompt',
      backup: { enabled: false, fileBackupMaxSizeMB: 5000, oversize: 'skip' },
    }),
  );
  const policy = await readPolicyFile(file, '/w/ws');
  const config = brokeredShellConfigSchema.parse({ writableRoots: ['/srv/cache'], fileSafety: { rules: [{ pattern: '~/.cache', decision: 'grant-token' }] } });
  expect(applyPolicyFile(config, policy)).toEqual({
    sandbox: config.sandbox,
    writableRoots: ['/srv/cache', '/w/ws/build', '/opt/out'],
    fileBackup: { enabled: false, maxSizeMB: 1024, oversize: 'skip', durability: 'each' },
    fileSafety: {
      rules: [
        { pattern: '~/.cache', decision: 'grant-token' },
        { pattern: '*.pem', decision: 'prompt' },
      ],
      outsideRoots: 'prompt',
    },
    approvals: 'inline',
    approvalTimeoutSeconds: 300,
  });
  // The result is a valid configuration.
  expect(brokeredShellConfigSchema.safeParse(applyPolicyFile(config, policy)).success).toBe(true);
});

it('an empty policy file changes nothing', async () => {
  const file = path.join(base, 'policy.json');
  writeFileSync(file, '{}');
  expect(applyPolicyFile(defaultConfig(), await readPolicyFile(file, '/w/ws'))).toEqual(defaultConfig());
});
