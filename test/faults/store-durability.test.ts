/**
 * The store's durability option on real files: 'each' syncs every backup before it is
 * acknowledged; 'turn' only writes it (blob verified and renamed, journal line written)
 * and the commit syncs them all before the manifest. Syncs are counted by wrapping
 * FileHandle.prototype.sync/datasync and fs.fsync/fdatasync, through which the store issues every one. What a
 * kill -9 leaves under 'turn' is store-crash.test.ts's subject.
 */
import fs from 'node:fs/promises';
import nodeFs, { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BackupHome } from '../../src/backup/index.js';
import { SessionBackupStore } from '../../src/backup/session-store.js';
import { ErrorCodes } from '../../src/core/errors.js';
import { sha256 } from './fault-helpers.js';
import { countSyncs, type SyncCounts } from '../../bench/lib/sync-counter.js';

const SESSION = 'durability';
const TURN = '20261130-000000-d0d0d0';
const FILES = 20;

let counts: SyncCounts = { fsync: 0, fdatasync: 0 };
let restoreSyncs: (() => void) | undefined;

beforeAll(async () => {
  const counter = await countSyncs();
  counts = counter.counts;
  restoreSyncs = counter.stop;
});
afterAll(() => restoreSyncs?.());

let base: string | undefined;
const opened: SessionBackupStore[] = [];
afterEach(async () => {
  // A store may still be making fan-out directories ahead (fanout-dirs.ts): close it first.
  for (const store of opened.splice(0)) await store.close();
  if (base) await fs.rm(base, { recursive: true, force: true });
  base = undefined;
});

async function world(count = FILES): Promise<{ home: string; files: string[] }> {
  base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'bsh-durability-')));
  const files: string[] = [];
  for (let i = 0; i < count; i++) {
    const file = path.join(base, `f-${i}`);
    await fs.writeFile(file, `content of file ${i}\n`.repeat(50));
    files.push(file);
  }
  return { home: path.join(base, 'home'), files };
}

const open = async (home: string, durability?: 'each' | 'turn') => {
  const store = await SessionBackupStore.open({ home, sessionId: SESSION, reflink: false, ...(durability ? { durability } : {}) });
  opened.push(store);
  return store;
};

const backUpAll = async (store: SessionBackupStore, files: string[]) => {
  for (const file of files) await store.backup(file, { turnId: TURN, operation: 'open' });
};

/** Each fsync of a blob's fan-out directory while `task` runs: which one, and what the journal held then. */
async function blobDirSyncsDuring(store: SessionBackupStore, task: () => Promise<unknown>): Promise<Array<{ dir: string; journal: string }>> {
  const journal = path.join(store.layout.turns, `${TURN}.journal`);
  const seen: Array<{ dir: string; journal: string }> = [];
  const { fsync } = nodeFs;
  nodeFs.fsync = ((fd: number, done: (error: NodeJS.ErrnoException | null) => void) => {
    const target = readlinkSync(`/proc/self/fd/${fd}`);
    if (path.dirname(target) === store.layout.blobs) seen.push({ dir: path.basename(target), journal: readFileSync(journal, 'utf8') });
    fsync(fd, done);
  }) as typeof nodeFs.fsync;
  try {
    await task();
  } finally {
    nodeFs.fsync = fsync;
  }
  return seen;
}

/** Syncs issued while `task` runs. */
async function syncsDuring(task: () => Promise<unknown>): Promise<{ sync: number; datasync: number }> {
  const before = { ...counts };
  await task();
  return { sync: counts.fsync - before.fsync, datasync: counts.fdatasync - before.fdatasync };
}

describe('backup durability', () => {
  it("'each' (the default) syncs every backup before it returns and leaves nothing for the commit", async () => {
    const { home, files } = await world();
    const store = await open(home);
    expect(store.durability).toBe('each');
    await store.beginTurn(TURN);
    const during = await syncsDuring(async () => {
      for (const file of files) await store.backup(file, { turnId: TURN, operation: 'open' });
    });
    // Per backup: the blob (fsync), its directory (fsync), the journal line (fdatasync); the
    // first writes the journal whole instead of a line (the journal's fsync and turns/').
    expect(during.sync).toBeGreaterThanOrEqual(2 * FILES + 2);
    expect(during.datasync).toBeGreaterThanOrEqual(FILES - 1);
    expect(store.blobs.pendingSyncs).toBe(0);
  });

  it("'each' syncs a blob's directory once the journal line naming the blob is written, with that line's sync", async () => {
    const { home, files } = await world(5);
    const store = await open(home);
    await store.beginTurn(TURN);
    const seen = await blobDirSyncsDuring(store, () => backUpAll(store, files));
    // Each blob's directory was synced when the journal already named the blob.
    for (const file of files) {
      const digest = sha256(await fs.readFile(file));
      expect(seen.some(({ dir, journal }) => dir === digest.slice(0, 2) && journal.includes(digest))).toBe(true);
    }
  });

  it("'each' syncs a reused blob's directory too: the backup that made the blob may not have", async () => {
    const { home, files } = await world(2);
    await fs.copyFile(files[0]!, files[1]!);
    const store = await open(home);
    await store.beginTurn(TURN);
    const seen = await blobDirSyncsDuring(store, () => backUpAll(store, files));
    const fanOut = sha256(await fs.readFile(files[0]!)).slice(0, 2);
    expect(seen.filter(({ dir }) => dir === fanOut)).toHaveLength(2);
  });

  it("'turn' syncs nothing per backup; the commit syncs every blob before the manifest", async () => {
    const { home, files } = await world();
    const store = await open(home, 'turn');
    await store.beginTurn(TURN);
    const during = await syncsDuring(async () => {
      for (const file of files) await store.backup(file, { turnId: TURN, operation: 'open' });
    });
    expect(during).toEqual({ sync: 0, datasync: 0 });
    expect(store.blobs.pendingSyncs).toBe(FILES);
    const commit = await syncsDuring(() => store.commitTurn(TURN, 'done'));
    expect(commit.datasync).toBeGreaterThanOrEqual(FILES);
    expect(store.blobs.pendingSyncs).toBe(0);
    const manifest = await (await open(home)).readTurn(TURN);
    expect(manifest.files.map((f) => f.path)).toEqual(files);
    for (const entry of manifest.files) {
      expect(sha256(await store.readBlob(entry.sha256 ?? ''))).toBe(entry.sha256);
      expect((await store.readBlob(entry.sha256 ?? '')).equals(await fs.readFile(entry.path))).toBe(true);
    }
  });

  it("'turn': a reused blob is synced at the commit too", async () => {
    const { home, files } = await world(2);
    const [a, b] = files as [string, string];
    await fs.writeFile(b, await fs.readFile(a));
    const store = await open(home, 'turn');
    await store.backup(a, { turnId: TURN, operation: 'open' });
    await store.blobs.syncPending();
    const second = await store.backup(b, { turnId: TURN, operation: 'open' });
    expect(second?.sha256).toBe(sha256(await fs.readFile(a)));
    expect(store.blobs.pendingSyncs).toBe(1);
    await store.commitTurn(TURN, 'done');
    expect(store.blobs.pendingSyncs).toBe(0);
  });

  it("'turn': another reader sees every acknowledged backup of the open turn before any sync", async () => {
    const { home, files } = await world();
    const store = await open(home, 'turn');
    for (const file of files) await store.backup(file, { turnId: TURN, operation: 'open' });
    // A separate BackupHome reads from the file system, as `backups list` in another process does.
    const turns = await new BackupHome({ home }).listTurns({ sessionId: SESSION });
    expect(turns.map((t) => [t.id, t.committedAt])).toEqual([[TURN, null]]);
    expect(turns[0]?.files.map((f) => f.path)).toEqual(files);
    const reader = await new BackupHome({ home }).session(SESSION);
    for (const entry of turns[0]?.files ?? []) expect((await reader.readBlob(entry.sha256 ?? '')).equals(await fs.readFile(entry.path))).toBe(true);
  });

  it('an enable command leaves the durability the store was opened with', async () => {
    const { home } = await world(0);
    const store = await open(home, 'turn');
    store.configure({ enabled: true, fileBackupMaxSizeMB: 5, durability: 'each' });
    expect(store.durability).toBe('turn');
    expect(store.settings).toEqual({ enabled: true, fileBackupMaxSizeMB: 5, oversize: 'deny' });
  });

  it("a new store's directories are durable when it opens: its root's three with one sync of the root", async () => {
    const { home } = await world(0);
    const seen: Array<{ dir: string; names: string[] }> = [];
    const { fsync } = nodeFs;
    nodeFs.fsync = ((fd: number, done: (error: NodeJS.ErrnoException | null) => void) => {
      const dir = readlinkSync(`/proc/self/fd/${fd}`);
      let names: string[] = [];
      try {
        names = readdirSync(dir);
      } catch {
        // A file's sync, not a directory's.
      }
      seen.push({ dir, names });
      fsync(fd, done);
    }) as typeof nodeFs.fsync;
    let store: SessionBackupStore;
    try {
      store = await open(home);
    } finally {
      nodeFs.fsync = fsync;
    }
    const { root, blobs, turns, tmp } = store.layout;
    const rootSyncs = seen.filter((sync) => sync.dir === root);
    expect(rootSyncs).toHaveLength(1);
    expect(rootSyncs[0]?.names.sort()).toEqual(['blobs', 'tmp', 'turns']);
    // Every directory made on the way, from the home down, was named in a sync of its parent.
    for (let dir = root; dir !== path.dirname(home); dir = path.dirname(dir)) {
      expect(seen.some((sync) => sync.dir === path.dirname(dir) && sync.names.includes(path.basename(dir))), dir).toBe(true);
    }
    for (const dir of [root, blobs, turns, tmp]) expect((await fs.stat(dir)).mode & 0o777).toBe(0o700);

    await store.close();
    opened.splice(opened.indexOf(store), 1);
    expect(await syncsDuring(() => open(home))).toEqual({ sync: 0, datasync: 0 });
  });

  it('an unknown durability refuses to open the store', async () => {
    const { home } = await world(0);
    await expect(SessionBackupStore.open({ home, sessionId: SESSION, durability: 'never' as 'each' })).rejects.toMatchObject({
      code: ErrorCodes.INVALID_OPTIONS,
    });
  });
});
