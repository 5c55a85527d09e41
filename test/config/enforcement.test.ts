import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { PROJECT_CONFIG_FILE, loadConfig, sessionConfigOf, type BrokeredShellConfig } from '../../src/config/index.js';
import { ApprovalPlugin, Broker, ErrorCodes, openTargets, operationTargets, standardPlugins } from '../../src/index.js';
import { closeLater, closeOpened } from '../helpers/close-opened.js';

// The loaded configuration on a real broker with real files: what the loader promises is
// what file-safety then does.

let base: string;
let ws: string;
beforeEach(() => {
  base = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'bsh-config-enforce-')));
  ws = path.join(base, 'ws');
  mkdirSync(ws);
  mkdirSync(path.join(base, 'home'));
});
afterEach(async () => {
  await closeOpened();
  rmSync(base, { recursive: true, force: true });
});

function broker(config: BrokeredShellConfig) {
  return closeLater(new Broker({ sessionId: 's1' })).use(
    ...standardPlugins({
      home: path.join(base, 'store'),
      userHome: path.join(base, 'home'),
      writableRoots: [ws, ...config.writableRoots],
      rules: config.fileSafety.rules,
      outsideRoots: config.fileSafety.outsideRoots,
      backup: { enabled: config.fileBackup.enabled, fileBackupMaxSizeMB: config.fileBackup.maxSizeMB, oversize: config.fileBackup.oversize },
      trashEnv: { XDG_DATA_HOME: base, HOME: base },
    }),
  );
}
const write = (p: string) => ({ origin: 'api' as const, action: 'token' as const, operation: 'open' as const, targets: openTargets(p, true), sessionId: 's1' });
const remove = (p: string) => ({ origin: 'api' as const, action: 'host-op' as const, operation: 'delete' as const, targets: operationTargets('delete', { path: p }), sessionId: 's1', options: { deleteMode: 'unlink' as const } });

it('keeps the project file from the commands it restricts: changing or deleting it needs approval', async () => {
  const file = path.join(ws, PROJECT_CONFIG_FILE);
  writeFileSync(file, JSON.stringify({ fileSafety: { rules: [{ pattern: '*.pem', decision: 'deny' }] } }));
  const b = broker(sessionConfigOf(await loadConfig({ workspace: ws, home: path.join(base, 'store') })));
  expect(await b.handle(write(file))).toMatchObject({ ok: false, decision: { verdict: 'prompt' }, error: { code: ErrorCodes.APPROVAL_REQUIRED } });
  expect(await b.handle(remove(file))).toMatchObject({ ok: false, decision: { verdict: 'prompt' } });
  expect(b.plugin<ApprovalPlugin>(ApprovalPlugin.PLUGIN_NAME)?.blocks().map((x) => x.access)).toEqual(['write', 'delete']);
  expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ fileSafety: { rules: [{ pattern: '*.pem', decision: 'deny' }] } });
  // Reading it stays free, and the rest of the workspace is as before.
  expect(await b.handle({ ...write(file), targets: openTargets(file, false) })).toMatchObject({ ok: true });
  expect(await b.handle(write(path.join(ws, 'notes.txt')))).toMatchObject({ ok: true, wireDecision: 'sandbox' });
  expect(await b.handle(write(path.join(ws, 'server.pem')))).toMatchObject({ ok: false, decision: { verdict: 'deny' } });
});

it('also protects a project file that does not exist yet: a command cannot create one', async () => {
  const b = broker(sessionConfigOf(await loadConfig({ workspace: ws, home: path.join(base, 'store') })));
  expect(await b.handle(write(path.join(ws, PROJECT_CONFIG_FILE)))).toMatchObject({ ok: false, decision: { verdict: 'prompt' } });
});

it("a project's prompt rule asks inside the workspace and never turns a denial outside it into a question", async () => {
  writeFileSync(path.join(ws, PROJECT_CONFIG_FILE), JSON.stringify({ fileSafety: { rules: [{ pattern: 'package.json', decision: 'prompt' }] } }));
  const b = broker(sessionConfigOf(await loadConfig({ workspace: ws, home: path.join(base, 'store') })));
  mkdirSync(path.join(ws, 'pkg'));
  expect(await b.handle(write(path.join(ws, 'package.json')))).toMatchObject({ ok: false, decision: { verdict: 'prompt' } });
  expect(await b.handle(write(path.join(ws, 'pkg', 'package.json')))).toMatchObject({ ok: false, decision: { verdict: 'prompt' } });
  // Outside every root the answer stays deny (unconfined, "package.json" would match here too and ask).
  expect(await b.handle(write(path.join(base, 'package.json')))).toMatchObject({ ok: false, decision: { verdict: 'deny' }, error: { code: ErrorCodes.POLICY_DENIED } });
});
