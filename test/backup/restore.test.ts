import fs from 'node:fs/promises';
import { constants as fsConstants } from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/core/errors.js';
import { newTurnId } from '../../src/backup/layout.js';
import type { XattrAccess } from '../../src/backup/metadata-ops.js';
import type { SessionBackupStore } from '../../src/backup/session-store.js';
import { filesUnder, fixture, lstatNs, stampTimes } from './helpers.js';
import { closeLater } from '../helpers/close-opened.js';

const sha = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');

interface Snapshot {
  kind: 'file' | 'symlink';
  bytes?: Buffer;
  target?: string;
  mode: number;
  uid: bigint;
  gid: bigint;
  mtimeNs: bigint;
  atimeNs: bigint;
}

/**
 * Everything a restore promises to bring back, read from the file system without
 * disturbing it: files are read with O_NOATIME, and a symlink's times (readlink moves
 * its atime) are put back after reading its target.
 */
async function snapshot(file: string): Promise<Snapshot> {
  const stats = await lstatNs(file);
  const common = { mode: Number(stats.mode & 0o7777n), uid: stats.uid, gid: stats.gid, mtimeNs: stats.mtimeNs, atimeNs: stats.atimeNs };
  if (stats.isSymbolicLink()) {
    const target = await fs.readlink(file);
    await stampTimes(file, stats.atimeNs, stats.mtimeNs);
    return { kind: 'symlink', target, ...common, mode: 0 };
  }
  const handle = await fs.open(file, fsConstants.O_RDONLY | fsConstants.O_NOATIME);
  try {
    return { kind: 'file', bytes: await handle.readFile(), ...common };
  } finally {
    await handle.close();
  }
}

async function snapshots(files: string[]): Promise<Map<string, Snapshot>> {
  const out = new Map<string, Snapshot>();
  for (const file of files) out.set(file, await snapshot(file));
  return out;
}

interface Scenario {
  work: string;
  store: SessionBackupStore;
  turnId: string;
  files: Record<'modified' | 'truncated' | 'deleted' | 'chmodded' | 'link' | 'renamedOver', string>;
  before: Map<string, Snapshot>;
}

/** A turn that modifies, truncates, deletes, chmods, relinks and renames over, backed up like the broker does. */
async function runTurn(options: Parameters<typeof fixture>[0] = {}): Promise<Scenario> {
  const { work, store } = await fixture(options);
  const files = {
    modified: path.join(work, 'modified.txt'),
    truncated: path.join(work, 'truncated.bin'),
    deleted: path.join(work, 'sub', 'deleted.txt'),
    chmodded: path.join(work, 'script.sh'),
    link: path.join(work, 'current'),
    renamedOver: path.join(work, 'config.json'),
  };
  await fs.mkdir(path.join(work, 'sub'));
  await fs.writeFile(files.modified, 'line 1\nline 2\n');
  await fs.writeFile(files.truncated, Buffer.from([0, 1, 2, 3, 254, 255]));
  await fs.writeFile(files.deleted, 'delete me not');
  await fs.writeFile(files.chmodded, '#!/bin/sh\necho hi\n');
  await fs.writeFile(files.renamedOver, '{"a":1}');
  await fs.symlink('releases/v1', files.link);
  await fs.chmod(files.modified, 0o640);
  await fs.chmod(files.truncated, 0o600);
  await fs.chmod(files.chmodded, 0o755);
  let t = 1_650_000_000_000_000_001n;
  for (const file of Object.values(files)) {
    await stampTimes(file, t + 111_111_111n, t);
    t += 86_400_123_456_789n;
  }
  const before = await snapshots(Object.values(files));

  const turnId = newTurnId();
  const backup = (file: string, operation: string) => store.backup(file, { turnId, operation });
  await backup(files.modified, 'open');
  await fs.appendFile(files.modified, 'line 3 by the model\n');
  await backup(files.truncated, 'truncate');
  await fs.truncate(files.truncated, 0);
  await backup(files.deleted, 'delete');
  await fs.rm(files.deleted);
  await fs.rmdir(path.join(work, 'sub'));
  await backup(files.chmodded, 'chmod');
  await fs.chmod(files.chmodded, 0o600);
  await backup(files.link, 'rename');
  await fs.rm(files.link);
  await fs.symlink('releases/v2', files.link);
  const incoming = path.join(work, 'config.json.new');
  await fs.writeFile(incoming, '{"a":2}');
  await backup(files.renamedOver, 'rename');
  await fs.rename(incoming, files.renamedOver);
  await store.commitTurn(turnId, 'edit things');
  return { work, store, turnId, files, before };
}

describe('commitTurn', () => {
  it('records the message and each path’s after-state', async () => {
    const { store, turnId, files } = await runTurn();
    const manifest = await store.readTurn(turnId);
    expect(manifest.message).toBe('edit things');
    expect(manifest.committedAt).not.toBeNull();
    const after = Object.fromEntries(manifest.files.map((f) => [f.path, f.after]));
    const modifiedNow = await lstatNs(files.modified);
    expect(after[files.modified]).toEqual({
      type: 'file',
      size: 'line 1\nline 2\nline 3 by the model\n'.length,
      sha256: sha('line 1\nline 2\nline 3 by the model\n'),
      mode: 0o640,
      mtimeNs: modifiedNow.mtimeNs.toString(),
      ino: modifiedNow.ino.toString(),
      btimeNs: modifiedNow.birthtimeNs.toString(),
      ctimeNs: modifiedNow.ctimeNs.toString(),
      uid: Number(modifiedNow.uid),
      gid: Number(modifiedNow.gid),
    });
    expect(after[files.deleted]).toEqual({ type: 'absent' });
    expect(after[files.link]).toEqual({ type: 'symlink', target: 'releases/v2', uid: Number(modifiedNow.uid), gid: Number(modifiedNow.gid) });
    expect(after[files.chmodded]).toMatchObject({ type: 'file', mode: 0o600 });
  });

  it('records a turn without backups, and refuses backups into a committed turn', async () => {
    const { work, store } = await fixture();
    const turnId = newTurnId();
    const manifest = await store.commitTurn(turnId, 'read-only turn');
    expect(manifest).toMatchObject({ id: turnId, files: [], message: 'read-only turn', kind: 'turn' });
    expect((await store.listTurns()).map((t) => t.id)).toEqual([turnId]);
    await fs.writeFile(path.join(work, 'late'), 'x');
    await expect(store.backup(path.join(work, 'late'), { turnId, operation: 'open' })).rejects.toMatchObject({
      code: ErrorCodes.BACKUP_FAILED,
    });
    await expect(store.commitTurn(turnId, 'again')).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED });
  });

  it('takes the broker’s start time and reports open turns', async () => {
    const { store } = await fixture();
    const turnId = newTurnId();
    expect(store.hasTurn(turnId)).toBe(false);
    await store.beginTurn(turnId, { startedAt: '2026-01-02T03:04:05.000Z' });
    expect(store.hasTurn(turnId)).toBe(true);
    const manifest = await store.commitTurn(turnId, 'm');
    expect(manifest.startedAt).toBe('2026-01-02T03:04:05.000Z');
    expect(store.hasTurn(turnId)).toBe(false);
  });

  it('continues an uncommitted turn after the store is reopened (crash recovery)', async () => {
    const { home, work, store } = await fixture();
    const turnId = newTurnId();
    await fs.writeFile(path.join(work, 'a'), 'a');
    await fs.writeFile(path.join(work, 'b'), 'b');
    await store.backup(path.join(work, 'a'), { turnId, operation: 'open' });
    const { SessionBackupStore } = await import('../../src/backup/session-store.js');
    const reopened = closeLater(await SessionBackupStore.open({ home, sessionId: 'session-1' }));
    expect(await reopened.backup(path.join(work, 'a'), { turnId, operation: 'open' })).toBeUndefined();
    await reopened.backup(path.join(work, 'b'), { turnId, operation: 'open' });
    const manifest = await reopened.commitTurn(turnId, 'after restart');
    expect(manifest.files.map((f) => path.basename(f.path))).toEqual(['a', 'b']);
  });
});

describe('restore', () => {
  it('brings back content, mode, owner and times to the nanosecond, for every kind of change', async () => {
    const { store, turnId, files, before } = await runTurn();
    const report = await store.restore(turnId);

    expect(report.conflicts).toEqual([]);
    expect(report.failed).toEqual([]);
    expect(report.skipped).toEqual([]);
    expect(report.restored.map((r) => r.path).sort()).toEqual(Object.values(files).sort());
    expect(report.restored.every((r) => r.timesExact === true)).toBe(true);
    expect(report.restored.find((r) => r.path === files.deleted)).toMatchObject({ action: 'recreate', createdParents: true });
    for (const file of Object.values(files)) {
      expect({ file, ...(await snapshot(file)) }).toEqual({ file, ...before.get(file) });
    }
    // No temp files left next to the restored ones.
    expect((await fs.readdir(path.dirname(files.modified))).filter((n) => n.includes('bsh-restore'))).toEqual([]);
  });

  it('restores only the requested paths and reports the ones the turn did not touch', async () => {
    const { work, store, turnId, files, before } = await runTurn();
    const stranger = path.join(work, 'never-touched');
    const report = await store.restore(turnId, { paths: [files.truncated, stranger] });
    expect(report.restored.map((r) => r.path)).toEqual([files.truncated]);
    expect(report.notInTurn).toEqual([stranger]);
    expect(await fs.readFile(files.truncated)).toEqual(before.get(files.truncated)?.bytes);
    expect(await fs.readFile(files.modified, 'utf8')).toBe('line 1\nline 2\nline 3 by the model\n');
  });

  it('matches a requested path named through a symlinked directory', async () => {
    const { work, store, turnId, files, before } = await runTurn();
    await fs.symlink(work, path.join(work, 'alias'));
    const report = await store.restore(turnId, { paths: [path.join(work, 'alias', 'truncated.bin')] });
    expect(report.notInTurn).toEqual([]);
    expect(report.restored.map((r) => r.path)).toEqual([files.truncated]);
    expect(await fs.readFile(files.truncated)).toEqual(before.get(files.truncated)?.bytes);
  });

  it('names the rescue turn from the given clock', async () => {
    const { store, turnId } = await runTurn();
    const report = await store.restore(turnId, { now: () => new Date('2030-01-02T03:04:05.000Z') });
    expect(report.rescueTurnId).toMatch(/^20300102-030405-[0-9a-f]{6}$/);
    expect((await store.readTurn(report.rescueTurnId!)).startedAt).toBe('2030-01-02T03:04:05.000Z');
  });

  it('changes nothing in a dry run', async () => {
    const { work, store, turnId } = await runTurn();
    const listing = async () => {
      const names = await filesUnder(work);
      return Promise.all(names.map(async (n) => ({ n, ...(await snapshot(path.join(work, n))) })));
    };
    const beforeRun = await listing();
    const turnsBefore = await store.listTurns();
    const report = await store.restore(turnId, { dryRun: true });
    expect(report.dryRun).toBe(true);
    expect(report.restored).toHaveLength(6);
    expect(report.rescueTurnId).toBeUndefined();
    expect(await listing()).toEqual(beforeRun);
    expect(await store.listTurns()).toEqual(turnsBefore);
  });

  it('leaves a file changed after the turn alone, reports the conflict, and restores it with force', async () => {
    const { store, turnId, files, before } = await runTurn();
    await fs.writeFile(files.modified, 'a person edited this after the turn\n');
    const report = await store.restore(turnId, { paths: [files.modified] });
    expect(report.restored).toEqual([]);
    expect(report.conflicts).toEqual([{ path: files.modified, reason: 'changed-since-turn', detail: expect.any(String) }]);
    expect(await fs.readFile(files.modified, 'utf8')).toBe('a person edited this after the turn\n');

    const forced = await store.restore(turnId, { paths: [files.modified], force: true });
    expect(forced.restored).toMatchObject([{ path: files.modified, forced: true }]);
    expect(await snapshot(files.modified)).toEqual(before.get(files.modified));
    // The person's edit is not lost: the rescue turn holds it.
    const rescue = await store.readTurn(forced.rescueTurnId!);
    expect((await store.readBlob(rescue.files[0]!.sha256!)).toString()).toBe('a person edited this after the turn\n');
  });

  it('can be undone by restoring its rescue turn', async () => {
    const { store, turnId, files } = await runTurn();
    const afterTurn = await snapshots(Object.values(files).filter((f) => f !== files.deleted));
    const report = await store.restore(turnId);
    expect(report.rescueTurnId).toMatch(/^\d{8}-\d{6}-[0-9a-f]{6}$/);
    const rescue = await store.readTurn(report.rescueTurnId!);
    expect(rescue).toMatchObject({ kind: 'restore', restoreOf: turnId, message: `restore of ${turnId}` });
    expect(rescue.committedAt).not.toBeNull();
    // Everything that existed was rescued (the deleted file did not exist, so nothing to rescue).
    expect(rescue.files.map((f) => f.path).sort()).toEqual([...afterTurn.keys()].sort());

    const undo = await store.restore(rescue);
    expect(undo.conflicts).toEqual([]);
    expect(undo.failed).toEqual([]);
    for (const [file, snap] of afterTurn) expect({ file, ...(await snapshot(file)) }).toEqual({ file, ...snap });
  });

  it('is idempotent: a second restore finds everything as it was', async () => {
    const { store, turnId } = await runTurn();
    await store.restore(turnId);
    const again = await store.restore(turnId);
    expect(again.restored).toEqual([]);
    expect(again.conflicts).toEqual([]);
    expect(again.skipped.map((s) => s.reason)).toEqual(Array(6).fill('unchanged'));
  });

  it('never trusts a damaged blob: the path is reported as failed and left untouched', async () => {
    const { store, turnId, files } = await runTurn();
    const manifest = await store.readTurn(turnId);
    const entry = manifest.files.find((f) => f.path === files.modified)!;
    await fs.writeFile(path.join(store.root, entry.blob!), 'line 1\nline X\n');
    const report = await store.restore(turnId, { paths: [files.modified] });
    expect(report.failed).toMatchObject([{ path: files.modified, code: ErrorCodes.BACKUP_FAILED }]);
    expect(await fs.readFile(files.modified, 'utf8')).toBe('line 1\nline 2\nline 3 by the model\n');
    expect((await fs.readdir(path.dirname(files.modified))).filter((n) => n.includes('bsh-restore'))).toEqual([]);
  });

  it('treats an uncommitted turn as a conflict unless forced', async () => {
    const { work, store } = await fixture();
    const file = path.join(work, 'f');
    await fs.writeFile(file, 'old');
    const turnId = newTurnId();
    await store.backup(file, { turnId, operation: 'open' });
    await fs.writeFile(file, 'new');
    const report = await store.restore(turnId);
    expect(report.conflicts).toMatchObject([{ path: file, reason: 'not-committed' }]);
    expect(await fs.readFile(file, 'utf8')).toBe('new');
    await store.restore(turnId, { force: true });
    expect(await fs.readFile(file, 'utf8')).toBe('old');
  });

  it('refuses to write through a parent directory that became a symlink, even with force', async () => {
    const { work, store, turnId, files } = await runTurn();
    const elsewhere = path.join(work, 'elsewhere');
    await fs.mkdir(elsewhere);
    await fs.symlink(elsewhere, path.join(work, 'sub'));
    const report = await store.restore(turnId, { paths: [files.deleted], force: true });
    expect(report.conflicts).toMatchObject([{ path: files.deleted, reason: 'parent-changed' }]);
    expect(await fs.readdir(elsewhere)).toEqual([]);
  });

  it('never replaces a directory', async () => {
    const { store, turnId, files } = await runTurn();
    await fs.mkdir(files.deleted, { recursive: true });
    const report = await store.restore(turnId, { paths: [files.deleted], force: true });
    expect(report.conflicts).toMatchObject([{ path: files.deleted, reason: 'occupied-by-directory' }]);
    expect((await fs.stat(files.deleted)).isDirectory()).toBe(true);
  });

  it('puts back owner, group and setuid bits (as root)', async () => {
    const { work, store } = await fixture();
    const file = path.join(work, 'tool');
    await fs.writeFile(file, '#!/bin/sh\n');
    await fs.chown(file, 1234, 5678);
    await fs.chmod(file, 0o4750);
    const before = await snapshot(file);
    const turnId = newTurnId();
    await store.backup(file, { turnId, operation: 'chown' });
    await fs.chown(file, 0, 0); // also clears the setuid bit
    await store.commitTurn(turnId, 'm');
    expect(Number((await lstatNs(file)).mode & 0o7777n)).toBe(0o750);
    await store.restore(turnId);
    const after = await snapshot(file);
    expect(after).toEqual(before);
    expect([after.uid, after.gid, after.mode]).toEqual([1234n, 5678n, 0o4750]);
  });

  it('leaves a path alone when what is there cannot be rescued first', async () => {
    const { store, turnId, files } = await runTurn();
    // Sparse, so it costs no disk: over the largest cap, so the rescue refuses it.
    await fs.rm(files.modified);
    const handle = await fs.open(files.modified, 'w');
    await handle.truncate(1024 * 1024 * 1024 + 1);
    await handle.close();
    const report = await store.restore(turnId, { paths: [files.modified], force: true });
    expect(report.failed).toMatchObject([{ path: files.modified, code: ErrorCodes.BACKUP_TOO_LARGE }]);
    expect(report.restored).toEqual([]);
    expect((await fs.stat(files.modified)).size).toBe(1024 * 1024 * 1024 + 1);
  });

  it('replaces a FIFO standing in the way only with force', async () => {
    const { store, turnId, files, before } = await runTurn();
    await fs.rm(files.modified);
    execFileSync('mkfifo', [files.modified]);
    const report = await store.restore(turnId, { paths: [files.modified] });
    expect(report.conflicts).toMatchObject([{ path: files.modified, reason: 'changed-since-turn' }]);
    const forced = await store.restore(turnId, { paths: [files.modified], force: true });
    expect(forced.restored).toMatchObject([{ path: files.modified, forced: true, action: 'replace' }]);
    expect(await snapshot(files.modified)).toEqual(before.get(files.modified));
  });

  it('skips files that were too large to keep', async () => {
    const { work, store } = await fixture({ settings: { fileBackupMaxSizeMB: 1, oversize: 'skip' } });
    const file = path.join(work, 'huge');
    await fs.writeFile(file, Buffer.alloc(1024 * 1024 + 1));
    const turnId = newTurnId();
    await store.backup(file, { turnId, operation: 'truncate' });
    await fs.truncate(file, 0);
    await store.commitTurn(turnId, 'm');
    const report = await store.restore(turnId);
    expect(report.skipped).toMatchObject([{ path: file, reason: 'too-large' }]);
    expect((await fs.stat(file)).size).toBe(0);
  });

  it('puts xattrs back through the injected interface', async () => {
    const attrs = new Map<string, Map<string, Buffer>>();
    const of = (p: string) => attrs.get(p) ?? attrs.set(p, new Map()).get(p)!;
    const xattrs: XattrAccess = {
      list: (p) => [...of(p).keys()],
      get: (p, name) => of(p).get(name) ?? Buffer.alloc(0),
      set: (p, name, value) => void of(p).set(name, value),
    };
    const { work, store } = await fixture({ metadata: { xattrs } });
    const file = path.join(work, 'tagged');
    await fs.writeFile(file, 'v1');
    of(file).set('user.tag', Buffer.from('blue'));
    const turnId = newTurnId();
    await store.backup(file, { turnId, operation: 'open' });
    await fs.writeFile(file, 'v2');
    await store.commitTurn(turnId, 'm');
    const report = await store.restore(turnId);
    expect(report.restored).toMatchObject([{ path: file, xattrs: 'restored' }]);
    // The attributes were set on the temp file that was renamed into place.
    const written = [...attrs.entries()].filter(([p]) => p.includes('.bsh-restore-'));
    expect(written.map(([, m]) => m.get('user.tag')?.toString())).toEqual(['blue']);
  });
});
