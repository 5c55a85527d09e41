import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BackupHome } from '../../src/backup/index.js';
import { Broker, ErrorCodes, Stage, type BrokerRequestInput } from '../../src/core/index.js';
import { ApprovalPlugin, type PromptApprover } from '../../src/plugins/approval/index.js';
import { standardPlugins } from '../../src/plugins/standard.js';
import { operationTargets, openTargets } from '../../src/requests/targets.js';
import { closeLater, closeOpened } from '../helpers/close-opened.js';
import { tempDir } from '../helpers/serve-process.js';

let base: string;
let ws: string;
let home: string;

beforeEach(() => {
  base = tempDir('bsh-invariants-');
  ws = path.join(base, 'ws');
  home = path.join(base, 'home');
  mkdirSync(ws);
});
afterEach(async () => {
  await closeOpened();
  rmSync(base, { recursive: true, force: true });
});

function broker(options: { maxMB?: number; approver?: PromptApprover; approvalTimeoutMs?: number } = {}) {
  const b = closeLater(new Broker({ sessionId: 's1' })).use(
    ...standardPlugins({
      home,
      writableRoots: [ws],
      rules: [{ pattern: '*.pem', access: ['write', 'delete'], decision: 'prompt' }],
      trashEnv: { XDG_DATA_HOME: path.join(base, 'xdg'), HOME: base },
      backup: options.maxMB === undefined ? {} : { fileBackupMaxSizeMB: options.maxMB },
      ...(options.approvalTimeoutMs === undefined ? {} : { approval: { timeoutMs: options.approvalTimeoutMs } }),
    }),
  );
  b.plugin<ApprovalPlugin>(ApprovalPlugin.PLUGIN_NAME)?.setApprover(options.approver);
  return b;
}

const hostOp = (operation: 'rename' | 'delete', paths: { path?: string; from?: string; to?: string }): BrokerRequestInput => ({
  origin: 'host-op',
  action: 'host-op',
  operation,
  targets: operationTargets(operation, paths),
  sessionId: 's1',
});
const writeToken = (p: string): BrokerRequestInput => ({ origin: 'text-token', action: 'token', operation: 'open', targets: openTargets(p, true), sessionId: 's1' });

async function backedUp(b: Broker): Promise<Map<string, Buffer>> {
  const turn = await b.commitTurn('check');
  const { store, manifest } = await new BackupHome({ home }).findTurn(turn.id);
  const out = new Map<string, Buffer>();
  for (const file of manifest.files) out.set(file.path, file.sha256 ? await store.readBlob(file.sha256) : Buffer.alloc(0));
  return out;
}

describe('pipeline invariants with the standard plugins', () => {
  it('nothing is modified before the policy said yes and the backup succeeded', async () => {
    const b = broker();
    const file = path.join(ws, 'a.txt');
    writeFileSync(file, 'original');
    const seenAtExecution: string[] = [];
    b.use({
      name: 'spy-before-execution',
      apply(inner) {
        inner.hooks.executeHostOp.for('delete').tapPromise({ name: 'spy-before-execution', stage: Stage.FIRST }, async (_r, decision) => {
          // At this point the backup must already be in the store, and the file still intact.
          const manifests = await new BackupHome({ home }).listTurns({ sessionId: 's1' });
          seenAtExecution.push(`${decision.verdict} ${readFileSync(file, 'utf8')} ${manifests[0]?.files.map((f) => f.path).join(',')}`);
          return undefined;
        });
      },
    });
    const home0 = new BackupHome({ home });
    const outcome = await b.handle(hostOp('delete', { path: file }));
    expect(outcome).toMatchObject({ ok: true, wireDecision: 'host-op' });
    expect(seenAtExecution).toEqual([`sandbox original ${file}`]);
    expect(existsSync(file)).toBe(false);
    const turns = await home0.listTurns({ sessionId: 's1' });
    expect(turns[0]?.files.map((f) => f.path)).toEqual([file]);
  });

  it('SANDBOX does not skip the backup', async () => {
    const b = broker();
    const file = path.join(ws, 'b.txt');
    writeFileSync(file, 'keep me');
    const outcome = await b.handle(writeToken(file));
    expect(outcome).toMatchObject({ ok: true, wireDecision: 'sandbox', grant: { kind: 'sandbox' } });
    expect((await backedUp(b)).get(file)?.toString()).toBe('keep me');
  });

  it('a prompt records a block, answers deny, and neither backs up nor changes anything', async () => {
    const b = broker();
    const from = path.join(ws, 'c.txt');
    const to = path.join(ws, 'key.pem');
    writeFileSync(from, 'cert');
    writeFileSync(to, 'old key');
    const outcome = await b.handle(hostOp('rename', { from, to }));
    expect(outcome).toMatchObject({ ok: false, wireDecision: 'deny', error: { code: ErrorCodes.APPROVAL_REQUIRED } });
    expect(readFileSync(to, 'utf8')).toBe('old key');
    expect(readFileSync(from, 'utf8')).toBe('cert');
    expect((await backedUp(b)).size).toBe(0);
  });

  it('a prompt held inline: asked before anything changed; yes → the backup, then the operation', async () => {
    const from = path.join(ws, 'c2.txt');
    const to = path.join(ws, 'key2.pem');
    writeFileSync(from, 'new cert');
    writeFileSync(to, 'old key');
    const seen: string[] = [];
    const b = broker({
      approver: async ({ block }) => {
        // While the question is open the request waits: nothing moved, nothing backed up.
        const turns = await new BackupHome({ home }).listTurns({ sessionId: 's1' }).catch(() => []);
        seen.push(`${block.normalisedPath} ${readFileSync(to, 'utf8')} ${existsSync(from)} ${turns.flatMap((t) => t.files).length}`);
        return true;
      },
    });
    const outcome = await b.handle(hostOp('rename', { from, to }));
    expect(outcome).toMatchObject({ ok: true, wireDecision: 'host-op' });
    expect(seen).toEqual([`${to} old key true 0`]);
    expect(readFileSync(to, 'utf8')).toBe('new cert');
    expect((await backedUp(b)).get(to)?.toString()).toBe('old key');
  });

  it.each([
    ['a no', { approver: () => false }],
    ['a timeout', { approver: () => new Promise<boolean>(() => undefined), approvalTimeoutMs: 50 }],
    ['a failing approver', { approver: () => Promise.reject(new Error('dialog crashed')) }],
  ])('a prompt held inline and answered with %s: denied, nothing backed up or changed', async (_label, options) => {
    const b = broker(options);
    const file = path.join(ws, 'kept.pem');
    writeFileSync(file, 'old key');
    const outcome = await b.handle(hostOp('delete', { path: file }));
    expect(outcome).toMatchObject({ ok: false, wireDecision: 'deny', error: { code: ErrorCodes.APPROVAL_REQUIRED } });
    expect(readFileSync(file, 'utf8')).toBe('old key');
    expect((await backedUp(b)).size).toBe(0);
  });

  it('a backup over the size cap denies, and the file is untouched', async () => {
    const b = broker({ maxMB: 1 });
    const file = path.join(ws, 'big.bin');
    writeFileSync(file, Buffer.alloc(2 * 1024 * 1024, 7));
    const outcome = await b.handle(hostOp('delete', { path: file }));
    expect(outcome).toMatchObject({ ok: false, wireDecision: 'deny', error: { code: ErrorCodes.BACKUP_TOO_LARGE } });
    expect(readFileSync(file).length).toBe(2 * 1024 * 1024);
  });

  it('an unwritable store denies, and the file is untouched', async () => {
    const b = broker();
    const file = path.join(ws, 'd.txt');
    writeFileSync(file, 'precious');
    await b.handle(writeToken(path.join(ws, 'warm-up-new-file.txt')));
    // Break the store under the running broker: its blob directory becomes a plain file.
    const blobs = path.join(home, 'workspace', 'sessions', 's1', 'modify_backup', 'blobs');
    rmSync(blobs, { recursive: true, force: true });
    writeFileSync(blobs, 'not a directory');
    const outcome = await b.handle(hostOp('delete', { path: file }));
    expect(outcome).toMatchObject({ ok: false, wireDecision: 'deny', error: { code: ErrorCodes.BACKUP_FAILED } });
    expect(readFileSync(file, 'utf8')).toBe('precious');
  });

  it('a symlink whose own path is allowed but which resolves outside the roots is denied', async () => {
    const b = broker();
    const outside = path.join(base, 'outside.txt');
    writeFileSync(outside, 'outside');
    symlinkSync(outside, path.join(ws, 'link'));
    const token = await b.handle(writeToken(path.join(ws, 'link')));
    expect(token).toMatchObject({ ok: false, wireDecision: 'deny', error: { code: ErrorCodes.POLICY_DENIED } });
    expect(readFileSync(outside, 'utf8')).toBe('outside');
    expect((await backedUp(b)).size).toBe(0);
  });

  it('a session mismatch is denied before anything else', async () => {
    const b = broker();
    const file = path.join(ws, 'e.txt');
    writeFileSync(file, 'x');
    const outcome = await b.handle({ ...hostOp('delete', { path: file }), sessionId: 'other' });
    expect(outcome).toMatchObject({ ok: false, error: { code: ErrorCodes.SESSION_MISMATCH } });
    expect(existsSync(file)).toBe(true);
  });
});
