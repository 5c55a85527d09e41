import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readFileSync, readlinkSync, readdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BackupHome } from '../../src/backup/index.js';
import { CLI, ask, askJson, startServe, type ServeHandle } from '../helpers/serve-process.js';

let serve: ServeHandle;
let ws: string;
const file = (name: string, content?: string, mode?: number) => {
  const p = path.join(ws, name);
  if (content !== undefined) writeFileSync(p, content, mode === undefined ? {} : { mode });
  return p;
};
const token = (access: 'read' | 'read-write', p: string, session = 's1') => ask(serve.socket, `dev.brokered-shell.${access}\t${p}\t${session}\ttool-1`);

/** Commit the open turn and return the files its manifest recorded, by path. */
async function commit(message: string) {
  const answer = await serve.control({ command: 'CommitModifyBackup', commitMsg: message });
  expect(answer).toMatchObject({ ok: true });
  const { manifest } = await new BackupHome({ home: serve.home }).findTurn(String(answer.turnId));
  expect(manifest.message).toBe(message);
  // A file whose metadata alone changed has that kept, not its bytes: an entry of the turn all the same.
  const metadataOnly = (manifest.structure ?? []).filter((e) => e.kind === 'metadata');
  return new Map<string, { operation: string; mode: number; size: number }>([...metadataOnly, ...manifest.files].map((f) => [f.path, f]));
}

beforeAll(async () => {
  serve = await startServe();
  ws = serve.workspace;
});
afterAll(() => serve.cleanup());

describe('serve: every operation of the reference over the real socket', () => {
  it('text read: SANDBOX, nothing backed up', async () => {
    const p = file('read.txt', 'r');
    expect(await token('read', p)).toBe('SANDBOX');
    expect((await commit('read')).size).toBe(0);
  });

  it('text read-write on an existing file: SANDBOX after a backup of its bytes and mode', async () => {
    const p = file('existing.txt', 'before\n', 0o640);
    expect(await token('read-write', p)).toBe('SANDBOX');
    const files = await commit('rw existing');
    expect(files.get(p)).toMatchObject({ operation: 'open', size: 7, mode: 0o640 });
  });

  it('text read-write on a new file: SANDBOX, nothing to back up', async () => {
    expect(await token('read-write', path.join(ws, 'new.txt'))).toBe('SANDBOX');
    expect((await commit('rw new')).size).toBe(0);
  });

  it('text request for another session: DENY', async () => {
    expect(await token('read-write', file('other-session.txt', 'x'), 'intruder')).toBe('DENY');
  });

  it('rename: both ends backed up, then moved by the host', async () => {
    const from = file('from.txt', 'source');
    const to = file('to.txt', 'overwritten');
    const answer = await askJson(serve.socket, { id: 'r1', operation: 'rename', from, to });
    expect(answer).toEqual({ id: 'r1', ok: true, operation: 'rename', path: from, normalisedPath: from, decision: 'host-op', to, normalisedTo: to });
    expect(existsSync(from)).toBe(false);
    expect(readFileSync(to, 'utf8')).toBe('source');
    const files = await commit('rename');
    expect(files.get(from)).toMatchObject({ operation: 'rename', size: 6 });
    expect(files.get(to)).toMatchObject({ operation: 'rename', size: 11 });
  });

  it('delete: backed up, then moved to the trash', async () => {
    const p = file('gone.txt', 'bye');
    const answer = await askJson(serve.socket, { id: 'd1', operation: 'delete', path: p });
    expect(answer).toMatchObject({ id: 'd1', ok: true, decision: 'host-op', normalisedPath: p });
    expect(existsSync(p)).toBe(false);
    const trashed = String(answer.trashedTo);
    expect(trashed.startsWith(path.join(serve.trashHome, 'Trash', 'files'))).toBe(true);
    expect(readFileSync(trashed, 'utf8')).toBe('bye');
    expect((await commit('delete')).get(p)).toMatchObject({ operation: 'delete', size: 3 });
  });

  it('delete with deleteMode unlink of a directory tree: every file backed up, tree gone', async () => {
    const dir = path.join(ws, 'tree');
    mkdirSync(path.join(dir, 'sub'), { recursive: true });
    writeFileSync(path.join(dir, 'a.txt'), 'a');
    writeFileSync(path.join(dir, 'sub', 'b.txt'), 'bb');
    const answer = await askJson(serve.socket, { operation: 'delete', path: dir, recursive: true, deleteMode: 'unlink' });
    expect(answer).toMatchObject({ ok: true });
    expect(existsSync(dir)).toBe(false);
    const files = await commit('rm -r');
    expect([...files.keys()].sort()).toEqual([path.join(dir, 'a.txt'), path.join(dir, 'sub', 'b.txt')]);
  });

  it('mkdir: created; nothing to back up', async () => {
    const dir = path.join(ws, 'made');
    expect(await askJson(serve.socket, { operation: 'mkdir', path: dir, mode: '0750' })).toMatchObject({ ok: true });
    expect(statSync(dir).isDirectory()).toBe(true);
    expect(statSync(dir).mode & 0o777).toBe(0o750 & ~process.umask());
    expect((await commit('mkdir')).size).toBe(0);
  });

  it('mkdir recursive: missing parents are created too', async () => {
    const dir = path.join(ws, 'p', 'q', 'r');
    expect(await askJson(serve.socket, { operation: 'mkdir', path: dir, recursive: true })).toMatchObject({ ok: true, normalisedPath: dir });
    expect(statSync(dir).isDirectory()).toBe(true);
    expect(await askJson(serve.socket, { operation: 'mkdir', path: dir, recursive: true })).toMatchObject({ ok: true });
  });

  it('copy: the overwritten target is backed up first', async () => {
    const from = file('copy-src.txt', 'copied');
    const to = file('copy-dst.txt', 'old target');
    expect(await askJson(serve.socket, { operation: 'copy', from, to })).toMatchObject({ ok: true, normalisedTo: to });
    expect(readFileSync(to, 'utf8')).toBe('copied');
    const files = await commit('copy');
    expect(files.get(to)).toMatchObject({ operation: 'copy', size: 10 });
    expect(files.has(from)).toBe(false);
  });

  it('chmod: mode changed, previous mode recorded', async () => {
    const p = file('mode.txt', 'm', 0o644);
    expect(await askJson(serve.socket, { operation: 'chmod', path: p, mode: 0o600 })).toMatchObject({ ok: true });
    expect(statSync(p).mode & 0o7777).toBe(0o600);
    expect((await commit('chmod')).get(p)).toMatchObject({ operation: 'chmod', mode: 0o644 });
  });

  it('link: hard and symbolic', async () => {
    const source = file('link-src.txt', 'linked');
    const hard = path.join(ws, 'hard.txt');
    const soft = path.join(ws, 'soft.txt');
    expect(await askJson(serve.socket, { operation: 'link', from: source, to: hard })).toMatchObject({ ok: true });
    expect(statSync(hard).ino).toBe(statSync(source).ino);
    expect(await askJson(serve.socket, { operation: 'link', from: 'link-src.txt', to: soft, symbolic: true })).toMatchObject({ ok: true });
    expect(readlinkSync(soft)).toBe('link-src.txt');
    expect((await commit('link')).size).toBe(0);
  });

  it('touch: creates a new file; on an existing one backs it up and sets the time', async () => {
    const fresh = path.join(ws, 'touched-new.txt');
    expect(await askJson(serve.socket, { operation: 'touch', path: fresh })).toMatchObject({ ok: true });
    expect(lstatSync(fresh).isFile()).toBe(true);
    const existing = file('touched-old.txt', 'old');
    const before = statSync(existing).mtimeMs;
    expect(await askJson(serve.socket, { operation: 'touch', path: existing })).toMatchObject({ ok: true });
    expect(statSync(existing).mtimeMs).toBeGreaterThanOrEqual(before);
    expect((await commit('touch')).get(existing)).toMatchObject({ operation: 'touch', size: 3 });
  });

  it('writes outside the workspace are denied and leave the target alone', async () => {
    const outside = path.join(path.dirname(ws), 'outside.txt');
    writeFileSync(outside, 'keep');
    expect(await token('read-write', outside)).toBe('DENY');
    expect(await askJson(serve.socket, { operation: 'delete', path: outside })).toMatchObject({ ok: false, decision: 'deny', errorCode: 'BSH_POLICY_DENIED' });
    expect(readFileSync(outside, 'utf8')).toBe('keep');
  });

  it('a symlink in the workspace that points out is denied', async () => {
    const outside = path.join(path.dirname(ws), 'target-outside.txt');
    writeFileSync(outside, 'keep');
    symlinkSync(outside, path.join(ws, 'escape'));
    expect(await token('read-write', path.join(ws, 'escape'))).toBe('DENY');
    expect(readFileSync(outside, 'utf8')).toBe('keep');
  });

  it('backups restore brings every touched file back, byte and mode identical', async () => {
    const a = file('restore-a.txt', 'alpha\n', 0o640);
    const b = file('restore-b.bin', '\u0000\u0001binary', 0o755);
    await token('read-write', a);
    writeFileSync(a, 'changed by the client');
    await askJson(serve.socket, { operation: 'chmod', path: b, mode: 0o600 });
    await askJson(serve.socket, { operation: 'delete', path: b });
    const answer = await serve.control({ command: 'CommitModifyBackup', commitMsg: 'to undo' });
    const out = execFileSync(process.execPath, [CLI, 'backups', 'restore', String(answer.turnId)], { env: serve.env, encoding: 'utf8' });
    expect(out).toContain('restored');
    expect(readFileSync(a, 'utf8')).toBe('alpha\n');
    expect(statSync(a).mode & 0o7777).toBe(0o640);
    expect(readFileSync(b)).toEqual(Buffer.from('\u0000\u0001binary'));
    expect(statSync(b).mode & 0o7777).toBe(0o755);
    expect(readdirSync(ws)).toContain('restore-b.bin');
  });
});
