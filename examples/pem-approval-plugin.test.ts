import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { ApprovalPlugin, Broker, ErrorCodes, openTargets, standardPlugins } from 'brokered-shell';
import { tempDir } from '../test/helpers/serve-process.js';
import { PemApprovalPlugin } from './pem-approval-plugin.js';
import { closeLater, closeOpened } from '../test/helpers/close-opened.js';

let base: string;
let ws: string;
beforeEach(() => {
  base = tempDir('bsh-example-pem-');
  ws = path.join(base, 'ws');
  mkdirSync(ws);
});
afterEach(async () => {
  await closeOpened();
  rmSync(base, { recursive: true, force: true });
});

function broker() {
  return closeLater(new Broker({ sessionId: 's1' })).use(
    ...standardPlugins({ home: path.join(base, 'home'), writableRoots: [ws], trashEnv: { XDG_DATA_HOME: base, HOME: base } }),
    new PemApprovalPlugin(),
  );
}
const write = (p: string) => ({ origin: 'text-token' as const, action: 'token' as const, operation: 'open' as const, targets: openTargets(p, true), sessionId: 's1' });

it('asks for approval before a key changes, and changes nothing meanwhile', async () => {
  const b = broker();
  const key = path.join(ws, 'server.pem');
  writeFileSync(key, 'secret');
  const outcome = await b.handle(write(key));
  expect(outcome).toMatchObject({ ok: false, wireDecision: 'deny', error: { code: ErrorCodes.APPROVAL_REQUIRED } });
  expect(b.plugin<ApprovalPlugin>(ApprovalPlugin.PLUGIN_NAME)?.blocks()).toEqual([
    expect.objectContaining({ path: key, access: 'write', reason: 'private keys change only with approval' }),
  ]);
  expect(readFileSync(key, 'utf8')).toBe('secret');
});

it('leaves reads and other files to the standard policy', async () => {
  const b = broker();
  expect(await b.handle({ ...write(path.join(ws, 'server.pem')), targets: openTargets(path.join(ws, 'server.pem'), false) })).toMatchObject({ ok: true });
  expect(await b.handle(write(path.join(ws, 'notes.txt')))).toMatchObject({ ok: true, wireDecision: 'sandbox' });
});

it('never loosens the standard policy: a key outside the roots stays denied, not prompted', async () => {
  const outcome = await broker().handle(write(path.join(base, 'elsewhere.pem')));
  expect(outcome).toMatchObject({ ok: false, decision: { verdict: 'deny' }, error: { code: ErrorCodes.POLICY_DENIED } });
});
