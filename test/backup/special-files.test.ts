/**
 * FIFOs, sockets and device nodes hold no content, but a turn that deletes, replaces,
 * renames or chmods one must be undoable: the store records the node's type, device
 * number, mode, owner and times (a `special` structure entry), and a restore makes it
 * again with the native addon, keeping whatever stands in its way in the rescue turn.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { describe, expect, it, vi } from 'vitest';
import { newTurnId } from '../../src/backup/layout.js';
import type { SessionBackupStore } from '../../src/backup/session-store.js';
import { native } from '../../src/native/loader.js';
import { nativeMetadataOps } from '../../src/native/metadata-ops.js';
import { fixture, lstatNs, stampTimes } from './helpers.js';

const isRoot = process.geteuid?.() === 0;

async function mkfifo(file: string, mode: number): Promise<void> {
  execFileSync('mkfifo', [file]);
  await fs.chmod(file, mode);
  await stampTimes(file, 1_200_000_000_123_456_789n, 1_100_000_000_987_654_321n);
}

/** What a rewind must bring back of a special file. */
async function nodeState(file: string) {
  const stats = await lstatNs(file);
  return { fifo: stats.isFIFO(), socket: stats.isSocket(), char: stats.isCharacterDevice(), mode: Number(stats.mode & 0o7777n), uid: stats.uid, gid: stats.gid, rdev: stats.rdev, mtimeNs: stats.mtimeNs, atimeNs: stats.atimeNs };
}

/** One committed turn that removes the special file `node` and rewrites `file` ('old' → 'new'). */
async function removeNodeAndEdit(store: SessionBackupStore, node: string, file: string): Promise<string> {
  await fs.writeFile(file, 'old\n');
  const turnId = newTurnId();
  await store.backup(node, { turnId, operation: 'delete' });
  await store.backup(file, { turnId, operation: 'open' });
  await fs.rm(node);
  await fs.writeFile(file, 'new\n');
  await store.commitTurn(turnId, 'rm node; edit file');
  return turnId;
}

describe('recording a special file', () => {
  it('records a FIFO about to be deleted as a synced special entry, with no blob', async () => {
    const { work, store } = await fixture();
    const fifo = path.join(work, 'pipe');
    await mkfifo(fifo, 0o640);
    const turnId = newTurnId();
    // Not a content backup: backup() answers undefined, but the turn holds the node.
    expect(await store.backup(fifo, { turnId, operation: 'delete' })).toBeUndefined();
    const manifest = await store.commitTurn(turnId, 'rm pipe');
    expect(manifest.files).toEqual([]);
    expect(manifest.structure).toMatchObject([
      { path: fifo, operation: 'delete', kind: 'special', fileType: 'fifo', rdev: 0, mode: 0o640, mtimeNs: '1100000000987654321', atimeNs: '1200000000123456789' },
    ]);
    expect(await fs.readdir(path.join(store.root, 'blobs'))).toEqual([]);
  });

  it('records a device node with its device number (root)', async () => {
    expect(isRoot, 'making a device node needs root, as sessions here run').toBe(true);
    const { work, store } = await fixture();
    const device = path.join(work, 'null');
    execFileSync('mknod', ['-m', '0620', device, 'c', '1', '3']);
    const turnId = newTurnId();
    await store.backup(device, { turnId, operation: 'rename' });
    const manifest = await store.commitTurn(turnId, 'mv null');
    expect(manifest.structure).toMatchObject([{ kind: 'special', fileType: 'char-device', rdev: Number((await lstatNs('/dev/null')).rdev), mode: 0o620 }]);
  });
});

describe('restoring a special file', () => {
  it('makes a deleted FIFO again with its mode, owner and times', async () => {
    const { work, store } = await fixture({ metadata: nativeMetadataOps() });
    const fifo = path.join(work, 'pipe');
    await mkfifo(fifo, 0o604);
    if (isRoot) await fs.lchown(fifo, 1234, 5678);
    const before = await nodeState(fifo);
    const turnId = newTurnId();
    await store.backup(fifo, { turnId, operation: 'delete' });
    await fs.rm(fifo);
    await store.commitTurn(turnId, 'rm pipe');

    const report = await store.restore(turnId);
    expect(report.failed).toEqual([]);
    expect(report.restored).toMatchObject([{ path: fifo, kind: 'special', action: 'recreate', timesExact: true }]);
    expect(await nodeState(fifo)).toEqual(before);
  });

  it('puts a FIFO back over the file the turn renamed onto it; undoing the restore brings the file back', async () => {
    const { work, store } = await fixture({ metadata: nativeMetadataOps() });
    const fifo = path.join(work, 'pipe');
    const other = path.join(work, 'other');
    await mkfifo(fifo, 0o600);
    const before = await nodeState(fifo);
    await fs.writeFile(other, 'a regular file\n');
    const turnId = newTurnId();
    await store.backup(fifo, { turnId, operation: 'rename' });
    await store.recordCreated(other, { turnId, operation: 'rename' });
    await fs.rename(other, fifo);
    await store.commitTurn(turnId, 'mv other pipe');

    const report = await store.restore(turnId, { paths: [fifo] });
    expect(report.conflicts).toEqual([]);
    expect(report.restored).toMatchObject([{ path: fifo, kind: 'special', action: 'replace', forced: false }]);
    expect(await nodeState(fifo)).toEqual(before);

    const undo = await store.restore(report.rescueTurnId ?? '');
    expect(undo.failed).toEqual([]);
    expect(await fs.readFile(fifo, 'utf8')).toBe('a regular file\n');
  });

  it('a FIFO that stands where a file goes is kept in the rescue turn, so undoing the restore makes it again', async () => {
    const { work, store } = await fixture({ metadata: nativeMetadataOps() });
    const file = path.join(work, 'file');
    await fs.writeFile(file, 'before\n');
    const turnId = newTurnId();
    await store.backup(file, { turnId, operation: 'delete' });
    await fs.rm(file);
    await mkfifo(file, 0o620);
    const fifo = await nodeState(file);
    await store.commitTurn(turnId, 'rm file; mkfifo file');

    const report = await store.restore(turnId);
    expect(report.conflicts).toEqual([]);
    expect(await fs.readFile(file, 'utf8')).toBe('before\n');
    const undo = await store.restore(report.rescueTurnId ?? '');
    expect(undo.failed).toEqual([]);
    expect(await nodeState(file)).toEqual(fifo);
  });

  it('a device renamed over another comes back with its own device number, and so does the other', async () => {
    expect(isRoot, 'making a device node needs root, as sessions here run').toBe(true);
    const { work, store } = await fixture({ metadata: nativeMetadataOps() });
    const [a, b] = [path.join(work, 'zero'), path.join(work, 'full')];
    execFileSync('mknod', ['-m', '0600', a, 'c', '1', '5']);
    execFileSync('mknod', ['-m', '0600', b, 'c', '1', '7']);
    const before = { a: await nodeState(a), b: await nodeState(b) };
    const turnId = newTurnId();
    await store.backup(a, { turnId, operation: 'rename' });
    await store.backup(b, { turnId, operation: 'rename' });
    await fs.rename(a, b);
    await store.commitTurn(turnId, 'mv zero full');
    const report = await store.restore(turnId);
    expect(report.failed).toEqual([]);
    expect({ a: await nodeState(a), b: await nodeState(b) }).toEqual(before);
  });

  it('a touched FIFO gets its times back, and a later touch is a conflict', async () => {
    const { work, store } = await fixture({ metadata: nativeMetadataOps() });
    const fifo = path.join(work, 'pipe');
    await mkfifo(fifo, 0o600);
    const before = await nodeState(fifo);
    const turnId = newTurnId();
    await store.backup(fifo, { turnId, operation: 'touch' });
    await stampTimes(fifo, 1_700_000_000_000_000_000n, 1_700_000_000_000_000_000n);
    await store.commitTurn(turnId, 'touch pipe');
    await stampTimes(fifo, 1_700_000_001_000_000_000n, 1_700_000_001_000_000_000n);
    expect((await store.restore(turnId)).conflicts).toMatchObject([{ path: fifo, reason: 'changed-since-turn', detail: 'modification time differs' }]);
    const forced = await store.restore(turnId, { force: true });
    expect(forced.restored).toMatchObject([{ path: fifo, kind: 'special', action: 'replace', timesExact: true }]);
    expect(await nodeState(fifo)).toEqual(before);
  });

  it("a FIFO's trusted.* xattrs come back with it (root)", async () => {
    expect(isRoot, 'trusted.* xattrs need root, as sessions here run').toBe(true);
    const metadata = nativeMetadataOps();
    const { work, store } = await fixture({ metadata });
    const fifo = path.join(work, 'pipe');
    await mkfifo(fifo, 0o640);
    native().setXattr(fifo, 'trusted.note', Buffer.from('kept'));
    const turnId = newTurnId();
    await store.backup(fifo, { turnId, operation: 'delete' });
    await fs.rm(fifo);
    const manifest = await store.commitTurn(turnId, 'rm pipe');
    expect(manifest.structure).toMatchObject([{ kind: 'special', xattrs: { 'trusted.note': Buffer.from('kept').toString('base64') } }]);
    const report = await store.restore(turnId);
    expect(report.restored).toMatchObject([{ path: fifo, xattrs: 'restored' }]);
    expect(native().getXattr(fifo, 'trusted.note').toString()).toBe('kept');
    expect((await nodeState(fifo)).mode).toBe(0o640);
  });

  it('without root a device is not made again: the dry run and the restore both say so, and the rest is restored', async () => {
    expect(isRoot, 'making the device to record needs root, as sessions here run').toBe(true);
    const { work, store } = await fixture({ metadata: nativeMetadataOps() });
    const device = path.join(work, 'null');
    const file = path.join(work, 'file');
    execFileSync('mknod', ['-m', '0600', device, 'c', '1', '3']);
    const turnId = await removeNodeAndEdit(store, device, file);
    const asUser = vi.spyOn(process, 'geteuid').mockReturnValue(1000);
    try {
      const failure = { path: device, message: `making the char-device ${device} again needs root (CAP_MKNOD)` };
      expect((await store.restore(turnId, { dryRun: true })).failed).toMatchObject([failure]);
      const report = await store.restore(turnId);
      expect(report.failed).toMatchObject([failure]);
      expect(report.restored).toMatchObject([{ path: file }]);
    } finally {
      asUser.mockRestore();
    }
    expect(await fs.readFile(file, 'utf8')).toBe('old\n');
    expect(await fs.readdir(work)).toEqual(['file']);
  });

  it('without the native addon the path fails, named, and nothing else changes', async () => {
    const { work, store } = await fixture();
    const fifo = path.join(work, 'pipe');
    const kept = path.join(work, 'kept');
    await mkfifo(fifo, 0o600);
    const turnId = await removeNodeAndEdit(store, fifo, kept);

    const report = await store.restore(turnId);
    expect(report.failed).toMatchObject([{ path: fifo, message: `cannot make the fifo ${fifo} again: no native addon` }]);
    expect(await fs.readFile(kept, 'utf8')).toBe('old\n');
    expect(await fs.readdir(work)).toEqual(['kept']);
  });
});
