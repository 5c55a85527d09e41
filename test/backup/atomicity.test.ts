import fs from 'node:fs/promises';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/core/errors.js';
import { newTurnId } from '../../src/backup/layout.js';
import { filesUnder, fixture } from './helpers.js';

const sha = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');

/** Every blob's name must be the hash of its bytes: that is what a reader trusts. */
async function expectEveryBlobMatchesItsName(root: string): Promise<number> {
  const blobs = await filesUnder(path.join(root, 'blobs'));
  for (const relative of blobs) {
    const name = path.basename(relative);
    expect(relative).toBe(`${name.slice(0, 2)}/${name}`);
    expect(sha(await fs.readFile(path.join(root, 'blobs', relative)))).toBe(name);
  }
  return blobs.length;
}

describe('blob writes', () => {
  it('leaves no blob and no temp file when the writer fails mid-write', async () => {
    const { work, store } = await fixture({
      faults: {
        afterCopy: async (tmp) => {
          await fs.truncate(tmp, 3); // a half-written copy
          throw new Error('disk gone');
        },
      },
    });
    const file = path.join(work, 'a');
    await fs.writeFile(file, 'precious content');
    const turnId = newTurnId();
    await expect(store.backup(file, { turnId, operation: 'open' })).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED });
    expect(await expectEveryBlobMatchesItsName(store.root)).toBe(0);
    expect(await filesUnder(path.join(store.root, 'tmp'))).toEqual([]);
    expect(await filesUnder(path.join(store.root, 'turns'))).toEqual([]);
    expect(await fs.readFile(file, 'utf8')).toBe('precious content');
  });

  it('refuses to name a copy whose bytes differ from what was read', async () => {
    const { work, store } = await fixture({
      faults: { afterCopy: (tmp) => fs.writeFile(tmp, 'precious contenX') }, // same size, other bytes
    });
    const file = path.join(work, 'a');
    await fs.writeFile(file, 'precious content');
    await expect(store.backup(file, { turnId: newTurnId(), operation: 'open' })).rejects.toMatchObject({
      code: ErrorCodes.BACKUP_FAILED,
    });
    expect(await expectEveryBlobMatchesItsName(store.root)).toBe(0);
    expect(await filesUnder(path.join(store.root, 'tmp'))).toEqual([]);
  });

  it('retries when the file changes during the copy, and keeps a consistent snapshot', async () => {
    let changes = 0;
    const { work, store } = await fixture({
      faults: {
        afterCopy: async () => {
          if (changes++ === 0) await fs.appendFile(path.join(work, 'moving'), ' and more');
        },
      },
    });
    const file = path.join(work, 'moving');
    await fs.writeFile(file, 'start');
    const entry = await store.backup(file, { turnId: newTurnId(), operation: 'open' });
    expect(changes).toBe(2);
    expect((await store.readBlob(entry!.sha256!)).toString()).toBe('start and more');
    expect(entry?.size).toBe('start and more'.length);
    expect(await filesUnder(path.join(store.root, 'tmp'))).toEqual([]);
  });

  it('gives up with BACKUP_FAILED on a file that never holds still', async () => {
    const { work, store } = await fixture({
      faults: { afterCopy: () => fs.appendFile(path.join(work, 'busy'), '.') },
    });
    const file = path.join(work, 'busy');
    await fs.writeFile(file, 'log');
    await expect(store.backup(file, { turnId: newTurnId(), operation: 'open' })).rejects.toMatchObject({
      code: ErrorCodes.BACKUP_FAILED,
    });
    expect(await expectEveryBlobMatchesItsName(store.root)).toBe(0);
    expect(await filesUnder(path.join(store.root, 'tmp'))).toEqual([]);
  });

  it('fails closed when the blobs directory is not usable (replaced by a file)', async () => {
    const { work, store } = await fixture();
    await fs.rm(path.join(store.root, 'blobs'), { recursive: true });
    await fs.writeFile(path.join(store.root, 'blobs'), 'not a directory');
    const file = path.join(work, 'a');
    await fs.writeFile(file, 'content');
    const turnId = newTurnId();
    await expect(store.backup(file, { turnId, operation: 'open' })).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED });
    expect(await filesUnder(path.join(store.root, 'tmp'))).toEqual([]);
    expect(await filesUnder(path.join(store.root, 'turns'))).toEqual([]);
    // The failed backup is not remembered: once the store is repaired the same turn backs the path up.
    await fs.rm(path.join(store.root, 'blobs'));
    await fs.mkdir(path.join(store.root, 'blobs'));
    const entry = await store.backup(file, { turnId, operation: 'open' });
    expect((await store.readBlob(entry!.sha256!)).toString()).toBe('content');
  });

  it('forgets an entry whose manifest could not be written, so the caller can deny and retry', async () => {
    const { work, store } = await fixture();
    const turnId = newTurnId();
    await fs.writeFile(path.join(work, 'first'), 'one');
    await store.backup(path.join(work, 'first'), { turnId, operation: 'open' });
    const saved = await fs.readFile(path.join(store.root, 'turns', `${turnId}.json`));
    await fs.rm(path.join(store.root, 'turns'), { recursive: true });
    await fs.writeFile(path.join(store.root, 'turns'), 'not a directory');
    const file = path.join(work, 'second');
    await fs.writeFile(file, 'two');
    await expect(store.backup(file, { turnId, operation: 'open' })).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED });
    expect(await filesUnder(path.join(store.root, 'tmp'))).toEqual([]);
    await fs.rm(path.join(store.root, 'turns'));
    await fs.mkdir(path.join(store.root, 'turns'));
    await fs.writeFile(path.join(store.root, 'turns', `${turnId}.json`), saved);
    expect(await store.backup(file, { turnId, operation: 'open' })).toBeDefined();
    const committed = await store.commitTurn(turnId, 'done');
    expect(committed.files.map((f) => path.basename(f.path))).toEqual(['first', 'second']);
  });

  it('reports an unreadable manifest directory as STORE_UNAVAILABLE', async () => {
    const { work, store } = await fixture();
    await fs.rm(path.join(store.root, 'turns'), { recursive: true });
    await fs.writeFile(path.join(store.root, 'turns'), 'not a directory');
    await fs.writeFile(path.join(work, 'a'), 'a');
    await expect(store.backup(path.join(work, 'a'), { turnId: newTurnId(), operation: 'open' })).rejects.toMatchObject({
      code: ErrorCodes.STORE_UNAVAILABLE,
    });
  });
});

describe('readBlob', () => {
  it('throws BACKUP_FAILED for a damaged blob and for a missing one', async () => {
    const { work, store } = await fixture();
    const file = path.join(work, 'a');
    await fs.writeFile(file, 'good bytes');
    const entry = await store.backup(file, { turnId: newTurnId(), operation: 'open' });
    const blobPath = path.join(store.root, entry!.blob!);
    await fs.writeFile(blobPath, 'bad bytes!');
    await expect(store.readBlob(entry!.sha256!)).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED });
    await fs.rm(blobPath);
    await expect(store.readBlob(entry!.sha256!)).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED });
  });

  it('rejects a name that is not a sha256', async () => {
    const { store } = await fixture();
    await expect(store.readBlob('../../etc/passwd')).rejects.toThrow();
  });

  it('replaces a damaged blob when the same content is backed up again (dedup never reuses damage)', async () => {
    const { work, store } = await fixture();
    const file = path.join(work, 'a');
    await fs.writeFile(file, 'good bytes');
    const first = await store.backup(file, { turnId: newTurnId(), operation: 'open' });
    await fs.writeFile(path.join(store.root, first!.blob!), 'rotten');
    const second = await store.backup(file, { turnId: newTurnId(), operation: 'open' });
    expect(second?.blob).toBe(first?.blob);
    expect((await store.readBlob(second!.sha256!)).toString()).toBe('good bytes');
    expect(await expectEveryBlobMatchesItsName(store.root)).toBe(1);
  });

  it('lists blobs and the ones manifests refer to', async () => {
    const { work, store } = await fixture();
    await fs.writeFile(path.join(work, 'a'), 'A');
    await fs.writeFile(path.join(work, 'b'), 'B');
    await store.backup(path.join(work, 'a'), { turnId: newTurnId(), operation: 'open' });
    await store.backup(path.join(work, 'b'), { turnId: newTurnId(), operation: 'open' });
    expect([...(await store.referencedBlobs())].sort()).toEqual([sha('A'), sha('B')].sort());
    expect(await store.blobs.list()).toEqual([sha('A'), sha('B')].sort());
  });
});
