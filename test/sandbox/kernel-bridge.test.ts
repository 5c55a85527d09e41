import { mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Broker, type Outcome } from '../../src/core/index.js';
import { standardPlugins } from '../../src/plugins/standard.js';
import { kernelBridge, kernelToBrokerRequest, outcomeToKernelAnswer } from '../../src/sandbox/kernel-bridge.js';
import type { KernelOp, KernelRequest } from '../../src/sandbox/protocol.js';
import { closeLater, closeOpened } from '../helpers/close-opened.js';
import { tempDir } from '../helpers/serve-process.js';

const broker = new Broker({ sessionId: 's1' });
const kernel = (op: KernelOp, extra: Partial<KernelRequest> = {}): KernelRequest => ({
  id: 1,
  op,
  pid: 10,
  tgid: 10,
  flags: 0,
  mode: 0,
  follow: true,
  path: '/w/a',
  ...extra,
});

describe('kernelToBrokerRequest', () => {
  it.each<[KernelOp, Partial<KernelRequest>, string, Array<[string, string, string]>]>([
    ['open', { flags: 0o1101 }, 'open', [['path', '/w/a', 'write']]],
    ['truncate', {}, 'truncate', [['path', '/w/a', 'write']]],
    ['unlink', { follow: false }, 'delete', [['path', '/w/a', 'delete']]],
    ['rmdir', { follow: false }, 'delete', [['path', '/w/a', 'delete']]],
    ['rename', { to: '/w/b' }, 'rename', [['from', '/w/a', 'delete'], ['to', '/w/b', 'write']]],
    ['link', { to: '/w/b' }, 'link', [['from', '/w/a', 'read'], ['to', '/w/b', 'write']]],
    ['link', { to: '/w/b', flags: 0x1000, path: '/w/#123 (deleted)' }, 'link', [['from', '/w', 'write'], ['to', '/w/b', 'write']]],
    ['symlink', { linkTarget: '/etc/passwd' }, 'link', [['to', '/w/a', 'write']]],
    ['mkdir', { mode: 0o755 }, 'mkdir', [['path', '/w/a', 'write']]],
    ['mknod', {}, 'mknod', [['path', '/w/a', 'write']]],
    ['chmod', { mode: 0o600 }, 'chmod', [['path', '/w/a', 'write']]],
    ['chown', {}, 'chown', [['path', '/w/a', 'write']]],
    ['utimes', {}, 'touch', [['path', '/w/a', 'write']]],
    ['setxattr', {}, 'xattr', [['path', '/w/a', 'write']]],
    ['removexattr', {}, 'xattr', [['path', '/w/a', 'write']]],
    ['fileSetattr', {}, 'xattr', [['path', '/w/a', 'write']]],
  ])('%s %j → %s', (op, extra, operation, targets) => {
    const request = kernelToBrokerRequest(broker, kernel(op, extra), { toolCallId: 't1' });
    expect(request).toMatchObject({ origin: 'kernel', action: 'check', operation, sessionId: 's1', toolCallId: 't1' });
    expect(request.targets.map((t) => [t.role, t.path, t.access])).toEqual(targets);
  });

  it('passes the follow flag, open flags, mode and link content', () => {
    expect(kernelToBrokerRequest(broker, kernel('open', { flags: 0o101, follow: false })).options).toMatchObject({ followSymlinks: false, openFlags: 0o101 });
    expect(kernelToBrokerRequest(broker, kernel('chmod', { mode: 0o100644 })).options).toMatchObject({ mode: 0o644 });
    expect(kernelToBrokerRequest(broker, kernel('symlink', { linkTarget: 'x' })).options).toMatchObject({ symbolic: true, linkTarget: 'x' });
  });
});

describe('outcomeToKernelAnswer', () => {
  const outcome = (ok: boolean, extra: Partial<Outcome> = {}): Outcome =>
    ({ ok, requestId: 'r', request: undefined, decision: { verdict: ok ? 'sandbox' : 'deny' }, wireDecision: ok ? 'sandbox' : 'deny', targets: [], durationMs: 0, ...extra }) as Outcome;
  const target = (role: 'path' | 'from' | 'to', resolved: string) => ({ role, path: resolved, access: 'write' as const, lexical: resolved, resolved, ruleForm: resolved, kind: 'file' as const });

  it.each<[string, Outcome, number]>([
    ['a policy denial', outcome(false, { error: { code: 'BSH_POLICY_DENIED', message: 'no' } }), 13],
    ['an approval prompt', outcome(false, { error: { code: 'BSH_APPROVAL_REQUIRED', message: 'ask' } }), 13],
    ['a failed backup', outcome(false, { error: { code: 'BSH_BACKUP_FAILED', message: 'disk', errno: 'ENOSPC' } }), 13],
    ['a missing path', outcome(false, { error: { code: 'BSH_PATH_NOT_FOUND', message: 'gone', errno: 'ENOENT' } }), 2],
    ['a file where a directory was expected', outcome(false, { error: { code: 'BSH_PATH_NOT_FOUND', message: 'x', errno: 'ENOTDIR' } }), 20],
    ['a symlink loop', outcome(false, { error: { code: 'BSH_PATH_UNRESOLVED', message: 'x', errno: 'ELOOP' } }), 40],
  ])('%s → errno %i', (_label, result, errno) => {
    expect(outcomeToKernelAnswer(kernel('open'), result)).toEqual({ errno });
  });

  it('answers the resolved paths the broker checked', () => {
    expect(outcomeToKernelAnswer(kernel('open'), outcome(true, { targets: [target('path', '/real/a')] }))).toEqual({ errno: 0, path: '/real/a' });
    expect(outcomeToKernelAnswer(kernel('rename', { to: '/w/b' }), outcome(true, { targets: [target('from', '/real/a'), target('to', '/real/b')] }))).toEqual({
      errno: 0,
      path: '/real/a',
      to: '/real/b',
    });
    expect(outcomeToKernelAnswer(kernel('symlink'), outcome(true, { targets: [target('to', '/real/link')] }))).toEqual({ errno: 0, path: '/real/link' });
  });

  it('fails closed when an allowed outcome lacks a path', () => {
    expect(outcomeToKernelAnswer(kernel('rename'), outcome(true, { targets: [target('from', '/real/a')] }))).toEqual({ errno: 13 });
  });
});

describe('kernelBridge through the standard plugins', () => {
  let base: string;
  let ws: string;
  beforeAll(() => {
    base = tempDir('bsh-bridge-');
    ws = path.join(base, 'ws');
    mkdirSync(ws);
    writeFileSync(path.join(base, 'outside'), 'x');
    symlinkSync(path.join(base, 'outside'), path.join(ws, 'out-link'));
  });
  afterAll(async () => {
    await closeOpened();
    rmSync(base, { recursive: true, force: true });
  });

  it('allows a workspace write with its real path and refuses an escape through a link', async () => {
    const b = closeLater(new Broker({ sessionId: 's1' })).use(...standardPlugins({ home: path.join(base, 'home'), writableRoots: [ws] }));
    const bridge = kernelBridge(b);
    expect(await bridge(kernel('open', { flags: 0o1101, path: path.join(ws, 'new.txt') }))).toEqual({ errno: 0, path: path.join(ws, 'new.txt') });
    expect(await bridge(kernel('open', { flags: 0o1101, path: path.join(ws, 'out-link') }))).toEqual({ errno: 13 });
    expect(await bridge(kernel('unlink', { follow: false, path: path.join(ws, 'missing-dir', 'x') }))).toEqual({ errno: 2 });
  });
});
