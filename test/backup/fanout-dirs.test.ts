import fs from 'node:fs/promises';
import nodeFs, { readdirSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { BlobStore } from '../../src/backup/blob-store.js';
import { FanoutDirs } from '../../src/backup/fanout-dirs.js';
import { storeLayout } from '../../src/backup/layout.js';
import { tempDir } from './helpers.js';

const ALL_NAMES = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

type SyncFdFn = (fd: number, done: (error: NodeJS.ErrnoException | null) => void) => void;

/**
 * Watch every fsync of `blobs`: the names it covers are those present when it began, and
 * they count as durable once it has finished. `hold` keeps the next N syncs of `blobs`
 * from finishing until `release` (or, when the disk is slower than the test, until both
 * the disk and the release are done).
 */
function watchBlobSyncs(blobs: string) {
  const { fsync } = nodeFs;
  const durable = new Set<string>();
  const held: Array<() => void> = [];
  let toHold = 0;
  let released = false;
  let syncs = 0;
  nodeFs.fsync = ((fd, done) => {
    if (readlinkSync(`/proc/self/fd/${fd}`) !== blobs) return fsync(fd, done);
    syncs += 1;
    const covered = readdirSync(blobs);
    const finish = (error: NodeJS.ErrnoException | null) => {
      if (!error) for (const name of covered) durable.add(name);
      done(error);
    };
    if (toHold > 0) {
      toHold -= 1;
      // A held sync the disk finishes only after the release goes straight through.
      fsync(fd, (error) => (released ? finish(error) : held.push(() => finish(error))));
    } else fsync(fd, finish);
  }) as SyncFdFn as typeof nodeFs.fsync;
  restores.push(() => Object.assign(nodeFs, { fsync }));
  return {
    durable,
    get syncs() {
      return syncs;
    },
    hold(count: number) {
      toHold = count;
    },
    release() {
      released = true;
      for (const go of held.splice(0)) go();
    },
  };
}

const restores: Array<() => void> = [];
afterEach(() => {
  for (const restore of restores.splice(0)) restore();
});

async function blobsDir(): Promise<string> {
  const root = await tempDir('bsh-fanout-');
  const blobs = path.join(root, 'blobs');
  await fs.mkdir(blobs);
  return blobs;
}

async function fanoutNames(blobs: string): Promise<string[]> {
  return (await fs.readdir(blobs)).sort();
}

/**
 * Each test makes up to 256 directories and syncs blobs/ up to nine times in a row. On a
 * disk busy with other writeback one directory sync has taken seconds (a run started
 * right after a large removal went past 30 s), so these get more than the default.
 */
const SYNC_HEAVY = { timeout: 120_000 };

describe('fan-out directories made ahead', SYNC_HEAVY, () => {
  it('after a few made by backups, the other 253 are made and synced in the background', async () => {
    const blobs = await blobsDir();
    const watch = watchBlobSyncs(blobs);
    const fanouts = new FanoutDirs(blobs, { prepareAfter: 3 });
    for (const name of ['a0', 'b1', 'c2']) await fanouts.ensure(path.join(blobs, name), true);
    expect(fanouts.preparing).toBeDefined();
    await fanouts.preparing;
    expect(await fanoutNames(blobs)).toEqual(ALL_NAMES);
    expect(fanouts.prepared).toBe(true);
    expect([...watch.durable].sort()).toEqual(ALL_NAMES);
    // 3 syncs by the backups' own makes, 8 chunks of at most 32 for the rest.
    expect(watch.syncs).toBe(3 + Math.ceil(253 / 32));

    // A prepared directory costs a backup nothing: no mkdir, no sync.
    const before = watch.syncs;
    await fanouts.ensure(path.join(blobs, '7f'), true);
    expect(watch.syncs).toBe(before);
  });

  it('a backup that finds a directory the preparation made but has not synced yet syncs blobs/ itself', async () => {
    const blobs = await blobsDir();
    const watch = watchBlobSyncs(blobs);
    const fanouts = new FanoutDirs(blobs, { prepareAfter: 1 });
    await fanouts.ensure(path.join(blobs, 'ff'), true);
    // Hold the preparation's first sync (its first chunk: 00 to 1f) until the backup is done.
    watch.hold(1);
    const first = path.join(blobs, '1f');
    while (!nodeFs.existsSync(first) || watch.syncs < 2) await new Promise((resolve) => setImmediate(resolve));
    expect(watch.durable.has('1f')).toBe(false);
    await fanouts.ensure(first, true);
    expect(watch.durable.has('1f')).toBe(true);
    watch.release();
    await fanouts.preparing;
    expect(fanouts.prepared).toBe(true);
  });

  it('every directory a backup was told exists is durable by then, with backups and the preparation interleaved', async () => {
    const blobs = await blobsDir();
    const watch = watchBlobSyncs(blobs);
    const fanouts = new FanoutDirs(blobs, { prepareAfter: 2 });
    const order = [...ALL_NAMES].reverse();
    for (const name of order) {
      await fanouts.ensure(path.join(blobs, name), true);
      expect(watch.durable.has(name), name).toBe(true);
    }
    await fanouts.preparing;
    expect(await fanoutNames(blobs)).toEqual(ALL_NAMES);
  });

  it('a store that already has its directories makes nothing new and still knows them durable', async () => {
    const blobs = await blobsDir();
    for (const name of ALL_NAMES.slice(0, 100)) await fs.mkdir(path.join(blobs, name));
    const inodes = new Map(await Promise.all(ALL_NAMES.slice(0, 100).map(async (name) => [name, (await fs.stat(path.join(blobs, name))).ino] as const)));
    const fanouts = new FanoutDirs(blobs, { prepareAfter: 1 });
    await fanouts.ensure(path.join(blobs, '00'), true);
    await fanouts.preparing;
    expect(await fanoutNames(blobs)).toEqual(ALL_NAMES);
    for (const [name, ino] of inodes) expect((await fs.stat(path.join(blobs, name))).ino).toBe(ino);
  });

  it('stops making directories when stopped, and only then resolves', async () => {
    const blobs = await blobsDir();
    const fanouts = new FanoutDirs(blobs, { prepareAfter: 1 });
    await fanouts.ensure(path.join(blobs, 'ff'), true);
    await fanouts.stop();
    const left = await fanoutNames(blobs);
    expect(left.length).toBeLessThan(256);
    // Nothing is in flight any more: the directory can go at once, and nothing reappears.
    await fs.rm(path.dirname(blobs), { recursive: true });
    await new Promise((resolve) => setImmediate(resolve));
    expect(nodeFs.existsSync(blobs)).toBe(false);
  });

  it('unsynced makes (durability turn) leave blobs/ to the caller, and count towards preparing the rest', async () => {
    const blobs = await blobsDir();
    const watch = watchBlobSyncs(blobs);
    const fanouts = new FanoutDirs(blobs, { prepareAfter: 2 });
    await fanouts.ensure(path.join(blobs, '01'), false);
    expect(watch.syncs).toBe(0);
    expect(fanouts.preparing).toBeUndefined();
    await fanouts.ensure(path.join(blobs, '02'), false);
    await fanouts.preparing;
    expect(await fanoutNames(blobs)).toEqual(ALL_NAMES);
    expect(fanouts.prepared).toBe(true);
  });

  it('never prepares with prepareAfter 0, and unsynced makes leave blobs/ to the caller', async () => {
    const blobs = await blobsDir();
    const watch = watchBlobSyncs(blobs);
    const fanouts = new FanoutDirs(blobs, { prepareAfter: 0 });
    for (const name of ['01', '02']) await fanouts.ensure(path.join(blobs, name), true);
    await fanouts.ensure(path.join(blobs, '03'), false);
    expect(fanouts.preparing).toBeUndefined();
    expect(await fanoutNames(blobs)).toEqual(['01', '02', '03']);
    expect(watch.syncs).toBe(2);
  });
});

describe('blob store with fan-out directories made ahead', SYNC_HEAVY, () => {
  it('a blob whose known directory was removed is still stored: the directory is made again', async () => {
    const root = await tempDir('bsh-fanout-store-');
    const layout = storeLayout(root);
    for (const dir of [layout.blobs, layout.tmp]) await fs.mkdir(dir, { recursive: true });
    const store = new BlobStore(layout, { reflink: false, prepareFanoutsAfter: 1 });
    const source = path.join(root, 'source.txt');
    await fs.writeFile(source, 'first version\n');
    const first = await store.snapshot(source, await fs.lstat(source, { bigint: true }), 1 << 20);
    await store.fanouts.preparing;
    expect(store.fanouts.prepared).toBe(true);

    const content = 'second version\n';
    const sha = createHash('sha256').update(content).digest('hex');
    await fs.rm(path.join(layout.blobs, sha.slice(0, 2)), { recursive: true });
    await fs.writeFile(source, content);
    const second = await store.snapshot(source, await fs.lstat(source, { bigint: true }), 1 << 20);
    expect(second.sha256).toBe(sha);
    expect(await fs.readFile(path.join(root, second.blob), 'utf8')).toBe(content);
    expect(first.sha256).not.toBe(sha);
    await store.close();
  });
});
