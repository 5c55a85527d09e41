import fs from 'node:fs/promises';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { BlobStore } from '../../src/backup/blob-store.js';
import { storeLayout } from '../../src/backup/layout.js';
import { SPARE_PREFIX, SpareTemps } from '../../src/backup/spare-temps.js';
import { tempDir } from './helpers.js';
import { waitFor } from '../helpers/wait-for.js';

const sha = (data: string) => createHash('sha256').update(data).digest('hex');

async function storeIn(spareTemps?: number) {
  const root = await tempDir('bsh-spares-');
  const layout = storeLayout(root);
  for (const dir of [layout.blobs, layout.tmp]) await fs.mkdir(dir, { recursive: true });
  const blobs = new BlobStore(layout, { reflink: false, ...(spareTemps === undefined ? {} : { spareTemps }) });
  const source = path.join(root, 'source.txt');
  return { root, layout, blobs, source };
}

async function sparesIn(tmp: string): Promise<string[]> {
  return (await fs.readdir(tmp)).filter((name) => name.startsWith(SPARE_PREFIX)).sort();
}

/** The spares the pool has made, once there are `count` (it works on the thread pool, in the background). */
function untilSpares(tmp: string, count: number): Promise<string[]> {
  return waitFor(`${count} spares in ${tmp}`, async () => {
    const spares = await sparesIn(tmp);
    return spares.length >= count ? spares : undefined;
  });
}

async function snapshotOf(blobs: BlobStore, source: string, content: string) {
  await fs.writeFile(source, content);
  return blobs.snapshot(source, await fs.lstat(source, { bigint: true }), 1 << 20);
}

describe('spare temp files', () => {
  it('a small backup is written into a spare made ahead: the blob is that very inode, with the right bytes', async () => {
    const { layout, blobs, source } = await storeIn(2);
    await snapshotOf(blobs, source, 'first'); // starts the pool
    const spares = await untilSpares(layout.tmp, 2);
    const inodes = new Set(await Promise.all(spares.map(async (name) => (await fs.lstat(path.join(layout.tmp, name))).ino)));
    const stored = await snapshotOf(blobs, source, 'second');
    expect(stored.sha256).toBe(sha('second'));
    const blob = path.join(layout.root, stored.blob);
    expect(inodes.has((await fs.lstat(blob)).ino)).toBe(true);
    expect(await fs.readFile(blob, 'utf8')).toBe('second');
    expect(((await fs.lstat(blob)).mode & 0o777).toString(8)).toBe('600');
  });

  it('never uses a spare that is not an empty regular file of its own, and never trusts one that vanished', async () => {
    const { layout, blobs, source } = await storeIn(3);
    await snapshotOf(blobs, source, 'warm-up');
    const spares = await untilSpares(layout.tmp, 3);
    const [grown, linked, gone] = spares.map((name) => path.join(layout.tmp, name)) as [string, string, string];
    await fs.writeFile(grown, 'someone wrote here');
    await fs.link(linked, path.join(layout.tmp, 'second-name'));
    await fs.rm(gone);
    for (const content of ['one', 'two', 'three', 'four']) {
      const stored = await snapshotOf(blobs, source, content);
      expect(await fs.readFile(path.join(layout.root, stored.blob), 'utf8')).toBe(content);
    }
    // The doubtful ones were passed over, not written into.
    expect(await fs.readFile(grown, 'utf8')).toBe('someone wrote here');
    expect((await fs.lstat(linked)).size).toBe(0);
  });

  it('removes a spare of its own that waited too long instead of using it', async () => {
    const tmp = await tempDir('bsh-spares-old-');
    const spares = new SpareTemps(tmp, 1);
    spares.take(); // starts the refill
    const [made] = await untilSpares(tmp, 1);
    const old = path.join(tmp, made as string);
    const elevenMinutesAgo = new Date(Date.now() - 11 * 60 * 1000);
    await fs.utimes(old, elevenMinutesAgo, elevenMinutesAgo);
    const taken = await waitFor('a spare', () => spares.take());
    expect(taken).toBeDefined();
    expect(taken).not.toBe(old);
    await expect(fs.lstat(old)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('makes none when turned off, and large files never use them', async () => {
    const off = await storeIn(0);
    await snapshotOf(off.blobs, off.source, 'small');
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await sparesIn(off.layout.tmp)).toEqual([]);

    const on = await storeIn(1);
    await snapshotOf(on.blobs, on.source, 'small');
    const [spare] = await untilSpares(on.layout.tmp, 1);
    const large = 'x'.repeat(300 * 1024);
    const stored = await snapshotOf(on.blobs, on.source, large);
    expect(stored.sha256).toBe(sha(large));
    expect(await sparesIn(on.layout.tmp)).toEqual([spare]);
  });

  it('take() hands out nothing before a refill has made something, then an empty file of its own', async () => {
    const tmp = await tempDir('bsh-spares-unit-');
    const spares = new SpareTemps(tmp, 1);
    expect(spares.take()).toBeUndefined();
    const taken = await waitFor('a spare', () => spares.take());
    expect(path.dirname(taken)).toBe(tmp);
    expect(path.basename(taken).startsWith(SPARE_PREFIX)).toBe(true);
    const stats = await fs.lstat(taken);
    expect([stats.isFile(), stats.size, stats.mode & 0o777]).toEqual([true, 0, 0o600]);
  });

  it('stop() resolves once no spare is being made: the directory is empty then and stays so', async () => {
    for (let round = 0; round < 20; round++) {
      const tmp = await tempDir('bsh-spares-stop-');
      const spares = new SpareTemps(tmp, 4);
      spares.refill();
      await new Promise((resolve) => setImmediate(resolve)); // a create is on the thread pool now
      await spares.stop();
      expect(await sparesIn(tmp)).toEqual([]);
      spares.refill();
      await new Promise((resolve) => setTimeout(resolve, 5));
      expect(await sparesIn(tmp)).toEqual([]);
    }
  });
});
