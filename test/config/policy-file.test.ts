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
      cacheRoots: ['.cache/tool', '~/.gradle/caches', '/var/cache/tool'],
      rules: [{ pattern: '*.pem', decision: 'prompt' }],
      outsideRoots: 'prompt',
      backup: { enabled: false, fileBackupMaxSizeMB: 5000, oversize: 'skip' },
      network: { mode: 'off', allow: ['127.0.0.1:8080'], deny: ['*.example.org'] },
    }),
  );
  const policy = await readPolicyFile(file, '/w/ws');
  const config = brokeredShellConfigSchema.parse({
    writableRoots: ['/srv/cache'],
    cacheRoots: { add: ['/srv/tool-cache'], remove: ['pip'] },
    fileSafety: { rules: [{ pattern: '~/.cache', decision: 'grant-token' }] },
    network: { allow: ['registry.example.com:443'] },
  });
  expect(applyPolicyFile(config, policy)).toEqual({
    sandbox: config.sandbox,
    writableRoots: ['/srv/cache', '/w/ws/build', '/opt/out'],
    cacheRoots: { defaults: true, add: ['/srv/tool-cache', '/w/ws/.cache/tool', '~/.gradle/caches', '/var/cache/tool'], remove: ['pip'] },
    fileBackup: { enabled: false, maxSizeMB: 1024, oversize: 'skip', durability: 'turn' },
    fileSafety: {
      rules: [
        { pattern: '~/.cache', decision: 'grant-token' },
        { pattern: '*.pem', decision: 'prompt' },
      ],
      outsideRoots: 'prompt',
    },
    secrets: { defaults: true, add: [], remove: [] },
    network: { mode: 'off', allow: ['registry.example.com:443', '127.0.0.1:8080'], deny: ['*.example.org'] },
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

it('checks its cache roots as the home config does, once relative ones have their base', async () => {
  const file = path.join(base, 'policy.json');
  writeFileSync(file, JSON.stringify({ cacheRoots: ['/', 'ok/cache', '~/x/../..'] }));
  await expect(readPolicyFile(file, '/w/ws')).rejects.toThrow(
    new RegExp(`policy file ${file} is invalid:\\n  - cacheRoots\\.0: / names / or the whole home.*\\n  - cacheRoots\\.2: ~/x/\\.\\./\\.\\. must not contain '\\.\\.'`),
  );
  writeFileSync(file, JSON.stringify({ cacheRoots: ['~user/x'] }));
  await expect(readPolicyFile(file, '/w/ws')).rejects.toThrow(/cacheRoots\.0: may start with ~ only as ~\//);
});
