import fs from 'node:fs/promises';
import nodeFs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/core/errors.js';
import { newTurnId } from '../../src/backup/layout.js';
import { SMALL_FILE_BYTES } from '../../src/backup/blob-small.js';
import { filesUnder, fixture, journalOnDisk, openTurnOnDisk, tempsLeft } from './helpers.js';

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

// Small files are copied with synchronous calls, larger ones streamed (blob-store.ts): both keep these promises.
describe.each([
  ['small', ''],
  ['streamed', '.'.repeat(SMALL_FILE_BYTES)],
] as const)('blob copy (%s)', (_kind, pad) => {
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
    await fs.writeFile(file, `precious content${pad}`);
    const turnId = newTurnId();
    await expect(store.backup(file, { turnId, operation: 'open' })).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED });
    expect(await expectEveryBlobMatchesItsName(store.root)).toBe(0);
    expect(await tempsLeft(store.root)).toEqual([]);
    expect(await filesUnder(path.join(store.root, 'turns'))).toEqual([]);
    expect(await fs.readFile(file, 'utf8')).toBe(`precious content${pad}`);
  });

  it('refuses to name a copy whose bytes differ from what was read', async () => {
    const { work, store } = await fixture({
      faults: { afterCopy: (tmp) => fs.writeFile(tmp, `precious contenX${pad}`) }, // same size, other bytes
    });
    const file = path.join(work, 'a');
    await fs.writeFile(file, `precious content${pad}`);
    await expect(store.backup(file, { turnId: newTurnId(), operation: 'open' })).rejects.toMatchObject({
      code: ErrorCodes.BACKUP_FAILED,
    });
    expect(await expectEveryBlobMatchesItsName(store.root)).toBe(0);
    expect(await tempsLeft(store.root)).toEqual([]);
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
    await fs.writeFile(file, `start${pad}`);
    const entry = await store.backup(file, { turnId: newTurnId(), operation: 'open' });
    expect(changes).toBe(2);
    expect((await store.readBlob(entry!.sha256!)).toString()).toBe(`start${pad} and more`);
    expect(entry?.size).toBe(`start${pad} and more`.length);
    expect(await tempsLeft(store.root)).toEqual([]);
  });

  it('gives up with BACKUP_FAILED on a file that never holds still', async () => {
    const { work, store } = await fixture({
      faults: { afterCopy: () => fs.appendFile(path.join(work, 'busy'), '.') },
    });
    const file = path.join(work, 'busy');
    await fs.writeFile(file, `log${pad}`);
    await expect(store.backup(file, { turnId: newTurnId(), operation: 'open' })).rejects.toMatchObject({
      code: ErrorCodes.BACKUP_FAILED,
    });
    expect(await expectEveryBlobMatchesItsName(store.root)).toBe(0);
    expect(await tempsLeft(store.root)).toEqual([]);
  });
});

describe('blob writes', () => {
  it('fails closed when the blobs directory is not usable (replaced by a file)', async () => {
    const { work, store } = await fixture();
    await fs.rm(path.join(store.root, 'blobs'), { recursive: true });
    await fs.writeFile(path.join(store.root, 'blobs'), 'not a directory');
    const file = path.join(work, 'a');
    await fs.writeFile(file, 'content');
    const turnId = newTurnId();
    await expect(store.backup(file, { turnId, operation: 'open' })).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED });
    expect(await tempsLeft(store.root)).toEqual([]);
    expect(await filesUnder(path.join(store.root, 'turns'))).toEqual([]);
    // The failed backup is not remembered: once the store is repaired the same turn backs the path up.
    await fs.rm(path.join(store.root, 'blobs'));
    await fs.mkdir(path.join(store.root, 'blobs'));
    const entry = await store.backup(file, { turnId, operation: 'open' });
    expect((await store.readBlob(entry!.sha256!)).toString()).toBe('content');
  });

  it('forgets an entry whose journal line could not be written, so the caller can deny and retry', async () => {
    const { work, store } = await fixture();
    const turnId = newTurnId();
    await fs.writeFile(path.join(work, 'first'), 'one');
    const first = await store.backup(path.join(work, 'first'), { turnId, operation: 'open' });
    const journal = path.join(store.root, 'turns', `${turnId}.journal`);
    // A directory where the journal should be: the append cannot open it.
    await fs.rename(journal, `${journal}.saved`);
    await fs.mkdir(journal);
    const file = path.join(work, 'second');
    await fs.writeFile(file, 'two');
    await expect(store.backup(file, { turnId, operation: 'open' })).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED });
    expect(await tempsLeft(store.root)).toEqual([]);
    await fs.rmdir(journal);
    await fs.rename(`${journal}.saved`, journal);
    // Not remembered as backed up: the retry stores it.
    const second = await store.backup(file, { turnId, operation: 'open' });
    expect(second).toBeDefined();
    expect((await journalOnDisk(store.root, turnId)).files).toEqual([first, second]);
    const committed = await store.commitTurn(turnId, 'done');
    expect(committed.files.map((f) => path.basename(f.path))).toEqual(['first', 'second']);
  });

  it('fails the backup and forgets it when the blob name cannot be made durable (that sync overlaps the journal’s)', async () => {
    const { work, store } = await fixture();
    const turnId = newTurnId();
    await fs.writeFile(path.join(work, 'first'), 'one');
    const first = await store.backup(path.join(work, 'first'), { turnId, operation: 'open' });
    const file = path.join(work, 'second');
    await fs.writeFile(file, 'two');
    const { fsync } = nodeFs;
    let refused = 0;
    // Only the fsync of a blob directory fails; everything else syncs for real.
    nodeFs.fsync = ((fd: number, done: (error: NodeJS.ErrnoException | null) => void) => {
      if (nodeFs.fstatSync(fd).isDirectory()) {
        refused++;
        done(Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' }));
        return;
      }
      fsync(fd, done);
    }) as typeof nodeFs.fsync;
    try {
      await expect(store.backup(file, { turnId, operation: 'open' })).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED });
    } finally {
      nodeFs.fsync = fsync;
    }
    expect(refused).toBe(1);
    // Not remembered as backed up: the retry stores it, and the journal holds each entry once.
    const second = await store.backup(file, { turnId, operation: 'open' });
    expect(second?.sha256).toBe(sha('two'));
    expect((await journalOnDisk(store.root, turnId)).files).toEqual([first, second]);
  });

  it('rewrites a lost journal whole from what it acknowledged, after a failed append', async () => {
    const { work, store } = await fixture();
    const turnId = newTurnId();
    await fs.writeFile(path.join(work, 'first'), 'one');
    const first = await store.backup(path.join(work, 'first'), { turnId, operation: 'open' });
    // The whole turns directory is replaced by a file, then comes back empty.
    await fs.rm(path.join(store.root, 'turns'), { recursive: true });
    await fs.writeFile(path.join(store.root, 'turns'), 'not a directory');
    const file = path.join(work, 'second');
    await fs.writeFile(file, 'two');
    await expect(store.backup(file, { turnId, operation: 'open' })).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED });
    await fs.rm(path.join(store.root, 'turns'));
    await fs.mkdir(path.join(store.root, 'turns'));
    const second = await store.backup(file, { turnId, operation: 'open' });
    const journal = await journalOnDisk(store.root, turnId);
    expect(journal.header).toMatchObject({ journal: 1, id: turnId });
    expect(journal.files).toEqual([first, second]);
  });

  it('writes nothing when a turn begins; its first backup writes the journal, each later one appends a line to that file', async () => {
    const { work, store } = await fixture();
    const turnId = newTurnId();
    await store.beginTurn(turnId);
    expect(await filesUnder(path.join(store.root, 'turns'))).toEqual([]);
    const journal = path.join(store.root, 'turns', `${turnId}.journal`);
    let expected = '';
    let ino: number | undefined;
    for (const name of ['a', 'b', 'c']) {
      await fs.writeFile(path.join(work, name), name);
      const entry = await store.backup(path.join(work, name), { turnId, operation: 'open' });
      if (ino === undefined) {
        // The header and the first entry.
        expected = await fs.readFile(journal, 'utf8');
        expect(expected.split('\n')).toEqual([expect.any(String), JSON.stringify(entry), '']);
        ino = (await fs.stat(journal)).ino;
      } else {
        expected += `${JSON.stringify(entry)}\n`;
        expect(await fs.readFile(journal, 'utf8')).toBe(expected);
      }
    }
    // The same file all along (appended to, not replaced by a rename).
    expect((await fs.stat(journal)).ino).toBe(ino);
  });

  it('a turn start writes nothing, so a broken tmp/ cannot fail it; the first backup writes the journal', async () => {
    const { work, store } = await fixture();
    const turnId = newTurnId();
    await fs.rm(path.join(store.root, 'tmp'), { recursive: true });
    await fs.writeFile(path.join(store.root, 'tmp'), 'not a directory');
    await store.beginTurn(turnId, { startedAt: '2026-01-02T03:04:05.000Z' });
    expect(await filesUnder(path.join(store.root, 'turns'))).toEqual([]);
    await fs.rm(path.join(store.root, 'tmp'));
    await fs.mkdir(path.join(store.root, 'tmp'));
    await fs.writeFile(path.join(work, 'a'), 'a');
    const entry = await store.backup(path.join(work, 'a'), { turnId, operation: 'open' });
    const journal = await openTurnOnDisk(store.root, turnId);
    expect(journal.header).toMatchObject({ startedAt: '2026-01-02T03:04:05.000Z' });
    expect(journal.files).toEqual([entry]);
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
