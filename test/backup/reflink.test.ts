/**
 * The backup store's clone path (FICLONE) on a real file system that clones: an XFS image
 * with reflink on a loop device (bench/lib/xfs-image.ts; needs root and xfsprogs, which CI
 * has). This machine's own disk (ext4) cannot clone, so without the image the path would
 * only ever meet its fallback.
 */
import fs from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { newTurnId } from '../../src/backup/layout.js';
import { SessionBackupStore } from '../../src/backup/session-store.js';
import { SMALL_FILE_BYTES } from '../../src/backup/blob-small.js';
import { mountReflinkImage, type ReflinkMount } from '../../bench/lib/xfs-image.js';

let mount: ReflinkMount;
const stores: SessionBackupStore[] = [];

beforeAll(() => {
  mount = mountReflinkImage(512);
});

afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
});

afterAll(() => {
  mount?.release();
});

async function setUp(name: string, reflink?: boolean) {
  const root = path.join(mount.dir, name);
  const work = path.join(root, 'work');
  await fs.mkdir(work, { recursive: true });
  const store = await SessionBackupStore.open({ home: path.join(root, 'home'), sessionId: 'session-1', ...(reflink === undefined ? {} : { reflink }) });
  stores.push(store);
  return { work, store };
}

/** Whether every extent of `file` is shared with another file (FIEMAP, through e2fsprogs' filefrag). */
function extentsShared(file: string): boolean {
  const lines = execFileSync('filefrag', ['-v', file], { encoding: 'utf8' }).split('\n');
  const extents = lines.filter((line) => /^\s*\d+:/.test(line));
  expect(extents.length).toBeGreaterThan(0);
  return extents.every((line) => /\bshared\b/.test(line));
}

const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');

describe('backups on a file system that clones', () => {
  it('clones a large file, keeps the old bytes when it changes in place, and restores them', async () => {
    const { work, store } = await setUp('clone');
    const file = path.join(work, 'big.bin');
    const small = path.join(work, 'small.bin');
    const original = randomBytes(4 * 1024 * 1024);
    await fs.writeFile(file, original);
    await fs.writeFile(small, randomBytes(SMALL_FILE_BYTES));
    const turnId = newTurnId();

    const entry = await store.backup(file, { turnId, operation: 'open' });
    const smallEntry = await store.backup(small, { turnId, operation: 'open' });

    expect(entry).toMatchObject({ kind: 'file', size: original.length, sha256: sha(original) });
    const blob = path.join(store.root, entry!.blob!);
    expect(extentsShared(blob)).toBe(true);
    expect((await fs.stat(blob)).mode & 0o777).toBe(0o600);
    // Files up to SMALL_FILE_BYTES take the synchronous copy, clones or not.
    expect(extentsShared(path.join(store.root, smallEntry!.blob!))).toBe(false);

    // Written over in place, as an editor or `dd conv=notrunc` would: the clone keeps its bytes.
    const handle = await fs.open(file, 'r+');
    await handle.write(Buffer.alloc(64 * 1024, 0x5a), 0, 64 * 1024, 0);
    await handle.close();
    expect(sha(await fs.readFile(blob))).toBe(sha(original));

    await store.commitTurn(turnId, 'overwrite');
    const report = await store.restore(turnId);
    expect(report.restored.map((item) => item.path)).toEqual([file]); // small.bin did not change
    expect(sha(await fs.readFile(file))).toBe(sha(original));
  });

  it('copies instead with reflink off', async () => {
    const { work, store } = await setUp('copy', false);
    const big = path.join(work, 'big.bin');
    await fs.writeFile(big, randomBytes(1024 * 1024));

    const entry = await store.backup(big, { turnId: newTurnId(), operation: 'open' });

    const blob = path.join(store.root, entry!.blob!);
    expect(extentsShared(blob)).toBe(false);
    expect(sha(await fs.readFile(blob))).toBe(sha(await fs.readFile(big)));
  });

  it('copies a file that lives on another file system (EXDEV), and still clones the next one that does not', async () => {
    const { work, store } = await setUp('cross-device');
    // The temp dir is on the machine's own disk, another file system than the image.
    const elsewhere = await fs.mkdtemp(path.join(os.tmpdir(), 'bsh-reflink-'));
    try {
      const outside = path.join(elsewhere, 'big.bin');
      const inside = path.join(work, 'big.bin');
      await fs.writeFile(outside, randomBytes(1024 * 1024));
      await fs.writeFile(inside, randomBytes(1024 * 1024));
      const turnId = newTurnId();

      const outsideEntry = await store.backup(outside, { turnId, operation: 'open' });
      const insideEntry = await store.backup(inside, { turnId, operation: 'open' });

      const outsideBlob = path.join(store.root, outsideEntry!.blob!);
      expect(extentsShared(outsideBlob)).toBe(false);
      expect(sha(await fs.readFile(outsideBlob))).toBe(sha(await fs.readFile(outside)));
      // A /tmp on tmpfs, say, says nothing about the workspace's own file system.
      expect(extentsShared(path.join(store.root, insideEntry!.blob!))).toBe(true);
    } finally {
      await fs.rm(elsewhere, { recursive: true, force: true });
    }
  });
});
