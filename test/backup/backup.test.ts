import fs from 'node:fs/promises';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/core/errors.js';
import { isNormalAbsolute } from '../../src/backup/entry-builder.js';
import { newTurnId, sessionBackupDir } from '../../src/backup/layout.js';
import { SessionBackupStore } from '../../src/backup/session-store.js';
import type { XattrAccess } from '../../src/backup/metadata-ops.js';
import { filesUnder, fixture, lstatNs, openTurnOnDisk, stampTimes, tempDir, tempsLeft } from './helpers.js';
import { closeLater } from '../helpers/close-opened.js';

const sha = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');


describe('SessionBackupStore.open', () => {
  it('creates the contract layout with private directories', async () => {
    const home = await tempDir();
    const store = closeLater(await SessionBackupStore.open({ home, sessionId: 'abc-123' }));
    expect(store.root).toBe(path.join(home, 'workspace', 'sessions', 'abc-123', 'modify_backup'));
    for (const dir of ['', 'blobs', 'turns', 'tmp']) {
      const stats = await fs.stat(path.join(store.root, dir));
      expect(stats.isDirectory()).toBe(true);
      expect(stats.mode & 0o777).toBe(0o700);
    }
  });

  it.each(['', '.', '..', 'a/b', 'a\0b', '../escape', 'x'.repeat(129), 'a..b', 'tab\there'])('rejects session id %j', async (sessionId) => {
    const home = await tempDir();
    await expect(SessionBackupStore.open({ home, sessionId })).rejects.toMatchObject({ code: ErrorCodes.INVALID_OPTIONS });
    expect(await filesUnder(home)).toEqual([]);
  });

  it('reports an unusable home as STORE_UNAVAILABLE', async () => {
    const home = await tempDir();
    await fs.writeFile(path.join(home, 'workspace'), 'a file where a directory should be');
    await expect(SessionBackupStore.open({ home, sessionId: 's' })).rejects.toMatchObject({ code: ErrorCodes.STORE_UNAVAILABLE });
  });

  it('applies initial settings through the normaliser', async () => {
    const home = await tempDir();
    const store = closeLater(await SessionBackupStore.open({ home, sessionId: 's', settings: { fileBackupMaxSizeMB: 5000, oversize: 'skip' } }));
    expect(store.settings).toEqual({ enabled: true, fileBackupMaxSizeMB: 1024, oversize: 'skip' });
    expect(sessionBackupDir(home, 's')).toBe(store.root);
  });
});

describe('backup of a regular file', () => {
  it('stores the bytes in a blob named by their hash and records the metadata', async () => {
    const { work, store } = await fixture();
    const file = path.join(work, 'a.txt');
    await fs.writeFile(file, 'original content\n');
    await fs.chmod(file, 0o640);
    await stampTimes(file, 1_600_000_000_111_222_333n, 1_700_000_000_123_456_789n);
    const turnId = newTurnId();

    const entry = await store.backup(file, { turnId, operation: 'open', toolCallId: 'call-1', traceId: 'trace-1' });

    expect(entry).toBeDefined();
    const expectedSha = sha('original content\n');
    expect(entry).toMatchObject({
      path: file,
      operation: 'open',
      kind: 'file',
      size: 17,
      sha256: expectedSha,
      blob: `blobs/${expectedSha.slice(0, 2)}/${expectedSha}`,
      mode: 0o640,
      uid: process.getuid?.(),
      mtimeNs: '1700000000123456789',
      atimeNs: '1600000000111222333',
      mtime: '2023-11-14T22:13:20.123Z',
      xattrs: null,
      toolCallId: 'call-1',
      traceId: 'trace-1',
      after: null,
    });
    expect(await fs.readFile(path.join(store.root, entry!.blob!), 'utf8')).toBe('original content\n');
    expect((await store.readBlob(expectedSha)).toString()).toBe('original content\n');

    // The entry is on disk already (before any commit): the open turn's journal holds it.
    const journal = await openTurnOnDisk(store.root, turnId);
    expect(journal.header).toEqual({ journal: 1, id: turnId, sessionId: 'session-1', kind: 'turn', startedAt: expect.any(String) });
    expect(journal.files).toEqual([entry]);
    const manifest = await store.readTurn(turnId);
    expect(manifest).toMatchObject({ version: 1, id: turnId, sessionId: 'session-1', kind: 'turn', message: null, committedAt: null });
    expect(manifest.files).toEqual([entry]);

    // Backing up did not touch what it recorded: the original's atime is unchanged.
    expect((await lstatNs(file)).atimeNs).toBe(1_600_000_000_111_222_333n);
    expect(await tempsLeft(store.root)).toEqual([]);
  });

  it('deduplicates equal content into one blob', async () => {
    const { work, store } = await fixture();
    const turnId = newTurnId();
    await fs.writeFile(path.join(work, 'one'), 'same bytes');
    await fs.writeFile(path.join(work, 'two'), 'same bytes');
    const a = await store.backup(path.join(work, 'one'), { turnId, operation: 'open' });
    const b = await store.backup(path.join(work, 'two'), { turnId, operation: 'delete' });
    expect(a?.blob).toBe(b?.blob);
    expect(await filesUnder(path.join(store.root, 'blobs'))).toEqual([a!.blob!.slice('blobs/'.length)]);
    expect((await openTurnOnDisk(store.root, turnId)).files.map((f) => f.path)).toEqual([path.join(work, 'one'), path.join(work, 'two')]);
  });

  it('keeps the first version of a path in a turn and never replaces it', async () => {
    const { work, store } = await fixture();
    const file = path.join(work, 'f.txt');
    await fs.writeFile(file, 'first');
    const turnId = newTurnId();
    const first = await store.backup(file, { turnId, operation: 'open' });
    await fs.writeFile(file, 'second, changed by the command');
    const again = await store.backup(file, { turnId, operation: 'truncate' });

    expect(again).toBeUndefined();
    const manifest = await openTurnOnDisk(store.root, turnId);
    expect(manifest.files).toHaveLength(1);
    expect(manifest.files[0]).toEqual(first);
    expect((await store.readBlob(first!.sha256!)).toString()).toBe('first');
    expect(await filesUnder(path.join(store.root, 'blobs'))).toHaveLength(1);

    // A new turn backs up the current version.
    const next = await store.backup(file, { turnId: newTurnId(), operation: 'open' });
    expect((await store.readBlob(next!.sha256!)).toString()).toBe('second, changed by the command');
  });

  it('lets concurrent backups of one path store one entry', async () => {
    const { work, store } = await fixture();
    const file = path.join(work, 'race.bin');
    await fs.writeFile(file, Buffer.alloc(3 * 1024 * 1024, 7));
    const turnId = newTurnId();
    const results = await Promise.all([1, 2, 3, 4].map(() => store.backup(file, { turnId, operation: 'open' })));
    expect(results.filter((r) => r !== undefined)).toHaveLength(1);
    expect((await openTurnOnDisk(store.root, turnId)).files).toHaveLength(1);
  });

  it('copies a multi-chunk file exactly', async () => {
    const { work, store } = await fixture();
    const file = path.join(work, 'big.bin');
    const data = Buffer.alloc(2.5 * 1024 * 1024);
    for (let i = 0; i < data.length; i++) data[i] = (i * 31 + 7) & 0xff;
    await fs.writeFile(file, data);
    const entry = await store.backup(file, { turnId: newTurnId(), operation: 'open' });
    expect(entry?.sha256).toBe(sha(data));
    expect(Buffer.compare(await store.readBlob(entry!.sha256!), data)).toBe(0);
  });

  it('records xattrs through the injected interface', async () => {
    const values = new Map<string, Buffer>([
      ['user.origin', Buffer.from('model')],
      ['user.bin', Buffer.from([0, 1, 255])],
    ]);
    const xattrs: XattrAccess = {
      list: () => [...values.keys()],
      get: (_p, name) => values.get(name) ?? Buffer.alloc(0),
      set: (_p, name, value) => void values.set(name, value),
    };
    const { work, store } = await fixture({ metadata: { xattrs } });
    const file = path.join(work, 'x');
    await fs.writeFile(file, 'x');
    const entry = await store.backup(file, { turnId: newTurnId(), operation: 'open' });
    expect(entry?.xattrs).toEqual({ 'user.bin': 'AAH/', 'user.origin': Buffer.from('model').toString('base64') });
  });

  it('refuses relative or unnormalised paths and bad turn ids, storing nothing', async () => {
    const { work, store } = await fixture();
    await fs.writeFile(path.join(work, 'a'), 'a');
    const turnId = newTurnId();
    await expect(store.backup('a', { turnId, operation: 'open' })).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED });
    await expect(store.backup(`${work}/../${path.basename(work)}/a`, { turnId, operation: 'open' })).rejects.toMatchObject({
      code: ErrorCodes.BACKUP_FAILED,
    });
    await expect(store.backup(path.join(work, 'a'), { turnId: '../x', operation: 'open' })).rejects.toMatchObject({
      code: ErrorCodes.INVALID_OPTIONS,
    });
    expect(await filesUnder(store.root)).toEqual([]);
  });

  it('judges a path normalised exactly as path.resolve does, on every string of up to 7 characters over / . a', () => {
    let strings = [''];
    let checked = 0;
    for (let length = 1; length <= 7; length += 1) {
      strings = strings.flatMap((s) => ['/', '.', 'a'].map((c) => s + c));
      for (const s of strings) {
        expect([s, isNormalAbsolute(s)]).toEqual([s, s.startsWith('/') && path.resolve(s) === s]);
        checked += 1;
      }
    }
    expect(checked).toBe(3_279);
  });

  it('stores nothing while disabled', async () => {
    const { work, store } = await fixture();
    await fs.writeFile(path.join(work, 'a'), 'a');
    store.configure({ enabled: false });
    expect(store.enabled).toBe(false);
    expect(await store.backup(path.join(work, 'a'), { turnId: newTurnId(), operation: 'open' })).toBeUndefined();
    expect(await filesUnder(store.root)).toEqual([]);
  });
});

describe('backup of other kinds of path', () => {
  it('records a symlink by its target, without a blob', async () => {
    const { work, store } = await fixture();
    const link = path.join(work, 'link');
    await fs.symlink('../somewhere/else', link);
    const turnId = newTurnId();
    const entry = await store.backup(link, { turnId, operation: 'delete' });
    expect(entry).toMatchObject({ kind: 'symlink', linkTarget: '../somewhere/else', sha256: null, blob: null, size: 17 });
    expect(await filesUnder(path.join(store.root, 'blobs'))).toEqual([]);
    expect((await openTurnOnDisk(store.root, turnId)).files).toEqual([entry]);
  });

  it.each([
    ['an absent path', async (work: string) => path.join(work, 'missing')],
    ['a directory', async (work: string) => (await fs.mkdir(path.join(work, 'dir')), path.join(work, 'dir'))],
    ['a path under a missing directory', async (work: string) => path.join(work, 'no', 'such', 'file')],
  ])('returns undefined for %s and records nothing', async (_what, make) => {
    const { work, store } = await fixture();
    const turnId = newTurnId();
    expect(await store.backup(await make(work), { turnId, operation: 'open' })).toBeUndefined();
    expect(await filesUnder(store.root)).toEqual([]);
  });
});

describe('size cap', () => {
  it("denies a file over the cap with BACKUP_TOO_LARGE, leaving no blob and no temp file ('deny')", async () => {
    const { work, store } = await fixture({ settings: { fileBackupMaxSizeMB: 1 } });
    const file = path.join(work, 'large');
    await fs.writeFile(file, Buffer.alloc(1024 * 1024 + 1));
    const turnId = newTurnId();
    await expect(store.backup(file, { turnId, operation: 'open' })).rejects.toMatchObject({ code: ErrorCodes.BACKUP_TOO_LARGE });
    expect(await filesUnder(store.root)).toEqual([]);
  });

  it('accepts a file of exactly the cap', async () => {
    const { work, store } = await fixture({ settings: { fileBackupMaxSizeMB: 1 } });
    const file = path.join(work, 'exact');
    await fs.writeFile(file, Buffer.alloc(1024 * 1024, 1));
    const entry = await store.backup(file, { turnId: newTurnId(), operation: 'open' });
    expect(entry?.size).toBe(1024 * 1024);
  });

  it("records metadata only, flagged, for a file over the cap ('skip')", async () => {
    const { work, store } = await fixture({ settings: { fileBackupMaxSizeMB: 1, oversize: 'skip' } });
    const file = path.join(work, 'large');
    await fs.writeFile(file, Buffer.alloc(1024 * 1024 + 10));
    await fs.chmod(file, 0o600);
    const turnId = newTurnId();
    const entry = await store.backup(file, { turnId, operation: 'truncate' });
    expect(entry).toMatchObject({ kind: 'file', skipped: 'too-large', size: 1024 * 1024 + 10, sha256: null, blob: null, mode: 0o600 });
    expect(await filesUnder(path.join(store.root, 'blobs'))).toEqual([]);
    expect((await openTurnOnDisk(store.root, turnId)).files).toEqual([entry]);
  });
});

describe('a sparse file', () => {
  it('is kept and restored with its holes: the same bytes, not megabytes of zeros on disk', async () => {
    const { work, store } = await fixture({ settings: { fileBackupMaxSizeMB: 16 } });
    const file = path.join(work, 'sparse.db');
    const handle = await fs.open(file, 'w');
    await handle.write(Buffer.from('head'), 0, 4, 0);
    await handle.write(Buffer.from('tail'), 0, 4, 12 * 1024 * 1024);
    await handle.close();
    const bytes = await fs.readFile(file);
    const allocated = async (p: string) => (await fs.stat(p)).blocks * 512;
    expect(await allocated(file)).toBeLessThan(1024 * 1024);

    const turnId = newTurnId();
    const entry = await store.backup(file, { turnId, operation: 'open' });
    expect(entry).toMatchObject({ size: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') });
    const blob = path.join(store.root, entry?.blob ?? '');
    expect(await allocated(blob)).toBeLessThan(4 * 1024 * 1024);
    await fs.writeFile(file, 'rewritten');
    await store.commitTurn(turnId, 'overwrite');

    const report = await store.restore(turnId);
    expect(report.failed).toEqual([]);
    expect((await fs.readFile(file)).equals(bytes)).toBe(true);
    expect(await allocated(file)).toBeLessThan(4 * 1024 * 1024);
  });

  it('a file that ends in zeros keeps its full length', async () => {
    const { work, store } = await fixture({ settings: { fileBackupMaxSizeMB: 16 } });
    const file = path.join(work, 'padded');
    const bytes = Buffer.concat([Buffer.from('data'), Buffer.alloc(3 * 1024 * 1024 + 5)]);
    await fs.writeFile(file, bytes);
    const turnId = newTurnId();
    await store.backup(file, { turnId, operation: 'truncate' });
    await fs.truncate(file, 0);
    await store.commitTurn(turnId, 'truncate');
    expect((await store.restore(turnId)).failed).toEqual([]);
    expect((await fs.readFile(file)).equals(bytes)).toBe(true);
  });
});
