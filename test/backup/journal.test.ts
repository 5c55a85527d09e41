import fs from 'node:fs/promises';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { countSyncs, type SyncCounts } from '../../bench/lib/sync-counter.js';
import { ErrorCodes } from '../../src/core/errors.js';
import { BackupHome } from '../../src/backup/backup-home.js';
import { parseJournal } from '../../src/backup/journal.js';
import { newTurnId } from '../../src/backup/layout.js';
import { turnManifestSchema, type AfterState, type BackupEntry, type TurnManifest } from '../../src/backup/manifest-schema.js';
import { SessionBackupStore } from '../../src/backup/session-store.js';
import type { XattrAccess } from '../../src/backup/metadata-ops.js';
import { capturingLogger, filesUnder, fixture, journalOnDisk, lstatNs, openTurnOnDisk, stampTimes, tempsLeft } from './helpers.js';
import { closeLater } from '../helpers/close-opened.js';

const sha = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');
const turnsDir = (root: string) => path.join(root, 'turns');
const journalFile = (root: string, turnId: string) => path.join(root, 'turns', `${turnId}.journal`);
const manifestFile = (root: string, turnId: string) => path.join(root, 'turns', `${turnId}.json`);

/** Files a..n with distinct content, backed up in one turn. */
async function backedUp(names: string[]) {
  const fx = await fixture();
  const turnId = newTurnId();
  const entries: BackupEntry[] = [];
  for (const name of names) {
    const file = path.join(fx.work, name);
    await fs.writeFile(file, `original ${name}\n`);
    const entry = await fx.store.backup(file, { turnId, operation: 'open' });
    if (!entry) throw new Error(`no entry for ${name}`);
    entries.push(entry);
  }
  return { ...fx, turnId, entries, file: (name: string) => path.join(fx.work, name) };
}

describe('open turns on disk', () => {
  it('the first backup writes the journal with the header beginTurn recorded; each backup adds one line; no manifest until the commit', async () => {
    const { work, store } = await fixture();
    const turnId = newTurnId();
    await store.beginTurn(turnId, { startedAt: '2026-05-06T07:08:09.000Z' });
    // Before its first backup a turn has nothing to recover, and nothing of it is on disk.
    await expect(openTurnOnDisk(store.root, turnId)).rejects.toThrow();
    await fs.writeFile(path.join(work, 'a'), 'A');
    await fs.writeFile(path.join(work, 'b'), 'B');
    const a = await store.backup(path.join(work, 'a'), { turnId, operation: 'open' });
    const b = await store.backup(path.join(work, 'b'), { turnId, operation: 'delete', toolCallId: 'call-7' });
    const journal = await openTurnOnDisk(store.root, turnId);
    expect(journal.header).toEqual({ journal: 1, id: turnId, sessionId: 'session-1', kind: 'turn', startedAt: '2026-05-06T07:08:09.000Z' });
    expect(journal.lines).toHaveLength(3);
    expect(journal.files).toEqual([a, b]);
    await expect(fs.access(path.join(store.root, 'turns', `${turnId}.json`))).rejects.toThrow();
  });

  it('lists an open turn with committedAt null and its files, from another process’s view', async () => {
    const { home, store, turnId, entries } = await backedUp(['a', 'b', 'c']);
    const expected = { id: turnId, sessionId: 'session-1', kind: 'turn', message: null, committedAt: null, files: entries };
    expect(await store.listTurns()).toMatchObject([expected]);
    expect(await store.readTurn(turnId)).toMatchObject(expected);
    // A fresh BackupHome (what the CLI uses) reads the journal too.
    const backups = new BackupHome({ home });
    expect(await backups.listTurns()).toMatchObject([expected]);
    expect((await backups.findTurn(turnId.slice(0, 12))).manifest).toMatchObject(expected);
    // Open turns are never 'latest'.
    await expect(backups.findTurn('latest')).rejects.toMatchObject({ code: ErrorCodes.TURN_NOT_FOUND });
    // Their blobs count as referenced.
    expect([...(await store.referencedBlobs())].sort()).toEqual(entries.map((e) => e.sha256).sort());
  });

  it('keeps the first version of a path across concurrent calls and a restart', async () => {
    const { home, work, store } = await fixture();
    const turnId = newTurnId();
    const names = ['p0', 'p1', 'p2', 'p3', 'p4', 'p5'];
    for (const name of names) await fs.writeFile(path.join(work, name), `first ${name}`);
    // Every path asked for three times at once.
    const results = await Promise.all(names.flatMap((name) => [1, 2, 3].map(() => store.backup(path.join(work, name), { turnId, operation: 'open' }))));
    expect(results.filter((r) => r !== undefined)).toHaveLength(names.length);
    for (const name of names) await fs.writeFile(path.join(work, name), `second ${name}`);
    expect(await store.backup(path.join(work, 'p0'), { turnId, operation: 'truncate' })).toBeUndefined();

    const reopened = closeLater(await SessionBackupStore.open({ home, sessionId: 'session-1' }));
    expect(await reopened.backup(path.join(work, 'p1'), { turnId, operation: 'truncate' })).toBeUndefined();
    const committed = await reopened.commitTurn(turnId, 'm');
    expect(committed.files.map((f) => path.basename(f.path)).sort()).toEqual(names);
    for (const entry of committed.files) {
      expect((await reopened.readBlob(entry.sha256!)).toString()).toBe(`first ${path.basename(entry.path)}`);
    }
  });

  it('close writes the journal lines still waiting for their batch before it resolves', async () => {
    const { work, store } = await fixture();
    const turnId = newTurnId();
    await store.beginTurn(turnId);
    // The first entry writes the journal; the second waits for a batch.
    const created = ['first', 'second'].map((name) => path.join(work, name));
    for (const file of created) await store.recordCreated(file, { turnId, operation: 'open' });
    await store.close();
    const journal = await fs.readFile(path.join(store.root, 'turns', `${turnId}.journal`), 'utf8');
    const entries = journal.trimEnd().split('\n').slice(1);
    expect(entries.map((line) => (JSON.parse(line) as { path: string }).path)).toEqual(created);
  });
});

describe('commit', () => {
  it('writes the manifest once (compact, with after-states), the same content as the entries taken, and removes the journal', async () => {
    const { work, store } = await fixture();
    const turnId = newTurnId();
    const files = {
      edited: path.join(work, 'edited.txt'),
      deleted: path.join(work, 'deleted.txt'),
      chmodded: path.join(work, 'run.sh'),
      untouched: path.join(work, 'untouched.txt'),
      link: path.join(work, 'link'),
    };
    await fs.writeFile(files.edited, 'before edit\n');
    await fs.writeFile(files.deleted, 'to be deleted');
    await fs.writeFile(files.chmodded, '#!/bin/sh\n');
    await fs.writeFile(files.untouched, 'same');
    await fs.symlink('target-1', files.link);
    await fs.chmod(files.edited, 0o640);
    await fs.chmod(files.chmodded, 0o700);
    await stampTimes(files.edited, 1_600_000_000_000_000_001n, 1_700_000_000_000_000_002n);
    const before = new Map<string, { size: number; mode: number; mtimeNs: string; content: string }>();
    for (const file of [files.edited, files.deleted, files.chmodded, files.untouched]) {
      const stats = await lstatNs(file);
      before.set(file, { size: Number(stats.size), mode: Number(stats.mode & 0o7777n), mtimeNs: stats.mtimeNs.toString(), content: await fs.readFile(file, 'utf8') });
    }

    await store.beginTurn(turnId);
    const taken: BackupEntry[] = [];
    const take = async (file: string, operation: string) => {
      const entry = await store.backup(file, { turnId, operation });
      if (!entry) throw new Error(`no entry for ${file}`);
      taken.push(entry);
    };
    await take(files.edited, 'open');
    await fs.appendFile(files.edited, 'after edit\n');
    await take(files.deleted, 'delete');
    await fs.rm(files.deleted);
    await take(files.chmodded, 'chmod');
    await fs.chmod(files.chmodded, 0o755);
    await take(files.untouched, 'open');
    await take(files.link, 'rename');
    await fs.rm(files.link);
    await fs.symlink('target-2', files.link);

    const committed = await store.commitTurn(turnId, 'a message');

    // What each entry says about the path before the turn: path, operation, size, sha256, mode, mtime, blob.
    for (const [file, was] of before) {
      const entry = committed.files.find((f) => f.path === file);
      expect(entry).toMatchObject({ kind: 'file', size: was.size, sha256: sha(was.content), mode: was.mode, mtimeNs: was.mtimeNs });
      expect(entry?.blob).toBe(`blobs/${sha(was.content).slice(0, 2)}/${sha(was.content)}`);
      expect(await fs.readFile(path.join(store.root, entry!.blob!), 'utf8')).toBe(was.content);
    }
    expect(committed.files.find((f) => f.path === files.edited)?.mtime).toBe('2023-11-14T22:13:20.000Z');
    expect(committed.files.find((f) => f.path === files.link)).toMatchObject({ kind: 'symlink', linkTarget: 'target-1', blob: null });

    // After-states, computed here from what is on disk now.
    const edited = await lstatNs(files.edited);
    const chmodded = await lstatNs(files.chmodded);
    const untouched = await lstatNs(files.untouched);
    // Owners are part of after-states (a chown after the turn is a change); xattrs only with xattr access.
    const owner = { uid: Number(edited.uid), gid: Number(edited.gid) };
    const inode = (stats: typeof edited) => ({ ino: stats.ino.toString(), btimeNs: stats.birthtimeNs.toString(), ctimeNs: stats.ctimeNs.toString() });
    const after: Record<string, AfterState> = {
      [files.edited]: { type: 'file', size: Number(edited.size), sha256: sha('before edit\nafter edit\n'), mode: 0o640, mtimeNs: edited.mtimeNs.toString(), ...inode(edited), ...owner },
      [files.deleted]: { type: 'absent' },
      [files.chmodded]: { type: 'file', size: 10, sha256: sha('#!/bin/sh\n'), mode: 0o755, mtimeNs: chmodded.mtimeNs.toString(), ...inode(chmodded), ...owner },
      [files.untouched]: { type: 'file', size: 4, sha256: sha('same'), mode: Number(untouched.mode & 0o7777n), mtimeNs: untouched.mtimeNs.toString(), ...inode(untouched), ...owner },
      [files.link]: { type: 'symlink', target: 'target-2', ...owner },
    };
    // The committed entries are exactly the entries taken, in order, plus their after-states.
    expect(committed.files).toEqual(taken.map((entry) => ({ ...entry, after: after[entry.path] })));
    expect(committed).toMatchObject({ version: 1, id: turnId, sessionId: 'session-1', kind: 'turn', message: 'a message', committedAt: expect.any(String) });

    // On disk: one compact manifest, valid as a whole, equal to what commitTurn returned; no journal.
    const text = await fs.readFile(manifestFile(store.root, turnId), 'utf8');
    expect(text.endsWith('}\n')).toBe(true);
    expect(text.slice(0, -1)).not.toContain('\n');
    expect(turnManifestSchema.parse(JSON.parse(text))).toEqual(committed);
    expect(await filesUnder(turnsDir(store.root))).toEqual([`${turnId}.json`]);
    expect(await store.readTurn(turnId)).toEqual(committed);
    expect(await tempsLeft(store.root)).toEqual([]);
  });

  it('leaves exactly 5,000 entries after 5,000 backups in one turn', { timeout: 300_000 }, async () => {
    const { work, store } = await fixture();
    const turnId = newTurnId();
    const count = 5000;
    const files: string[] = [];
    for (let dir = 0; dir < count / 100; dir++) await fs.mkdir(path.join(work, `d${dir}`));
    for (let i = 0; i < count; i++) {
      const file = path.join(work, `d${Math.floor(i / 100)}`, `f${i}`);
      await fs.writeFile(file, `content of file ${i}\n`);
      files.push(file);
    }
    await store.beginTurn(turnId);
    let stored = 0;
    let repeats = 0;
    // Eight at a time, with every 50th path asked for again in the same batch.
    for (let i = 0; i < count; i += 8) {
      const batch = files.slice(i, i + 8);
      const calls = batch.map((file) => store.backup(file, { turnId, operation: 'open' }));
      if (i % 50 < 8) calls.push(store.backup(batch[0]!, { turnId, operation: 'truncate' }));
      for (const result of await Promise.all(calls)) {
        if (result) stored++;
        else repeats++;
      }
    }
    expect([stored, repeats]).toEqual([count, 100]);

    const journal = await openTurnOnDisk(store.root, turnId);
    expect(journal.lines).toHaveLength(count + 1);
    expect(new Set(journal.files.map((f) => f.path)).size).toBe(count);
    const open = await store.readTurn(turnId);
    expect(open.committedAt).toBeNull();
    expect(open.files).toHaveLength(count);

    const committed = await store.commitTurn(turnId, 'big turn');
    expect(committed.files).toHaveLength(count);
    expect(new Set(committed.files.map((f) => f.path))).toEqual(new Set(files));
    const onDisk = turnManifestSchema.parse(JSON.parse(await fs.readFile(manifestFile(store.root, turnId), 'utf8')));
    expect(onDisk.files).toHaveLength(count);
    expect(onDisk.files.every((f) => f.after?.type === 'file')).toBe(true);
    expect(await filesUnder(turnsDir(store.root))).toEqual([`${turnId}.json`]);
    // Spot-check content: the blob of file i holds file i's bytes.
    for (const i of [0, 1234, 4999]) {
      const entry = onDisk.files.find((f) => f.path === files[i]);
      expect((await store.readBlob(entry!.sha256!)).toString()).toBe(`content of file ${i}\n`);
    }
  });

  it('lets the event loop run while it reads the after-states of a big turn', async () => {
    // The xattr list is read once per after-state: counting it shows how far the commit got.
    let observed = 0;
    const xattrs: XattrAccess = {
      list: () => {
        observed += 1;
        return [];
      },
      get: () => Buffer.alloc(0),
      set: () => undefined,
    };
    const { work, store } = await fixture({ metadata: { xattrs } });
    const turnId = newTurnId();
    await store.beginTurn(turnId);
    const created: string[] = [];
    for (let i = 0; i < 1000; i++) {
      const file = path.join(work, `new-${i}`);
      await store.recordCreated(file, { turnId, operation: 'open' });
      await fs.writeFile(file, `${i}`);
      created.push(file);
    }
    observed = 0;
    // After-states are read synchronously; a broker client waiting meanwhile is served long before the last.
    const commit = store.commitTurn(turnId, 'created 1,000 files');
    let observedWhenServed: number | undefined;
    setImmediate(() => {
      observedWhenServed = observed;
    });
    const committed = await commit;
    expect(observed).toBe(1000);
    expect(observedWhenServed).toBeLessThan(500);
    const structure = committed.structure ?? [];
    expect(structure.map((entry) => entry.path)).toEqual(created);
    expect(structure.every((entry) => entry.kind === 'absent' && entry.after?.type === 'file' && entry.after.size > 0)).toBe(true);
  });
});

describe('a crash in the middle of an append', () => {
  /** Backups of a, b, c acknowledged, the files then changed; a fourth append torn by the crash. */
  async function crashed() {
    const fx = await backedUp(['a', 'b', 'c']);
    for (const name of ['a', 'b', 'c']) await fs.writeFile(fx.file(name), `changed ${name}\n`);
    await fs.writeFile(fx.file('d'), 'original d\n');
    // What the append of d would have written, cut off part way.
    const line = JSON.stringify({ ...fx.entries[0], path: fx.file('d') });
    await fs.appendFile(journalFile(fx.store.root, fx.turnId), line.slice(0, Math.floor(line.length / 2)));
    return fx;
  }

  it('reads the turn back up to the last complete line, with a warning, and lists it as open', async () => {
    const { home, file, turnId, entries } = await crashed();
    const { logger, warnings } = capturingLogger();
    const store = closeLater(await SessionBackupStore.open({ home, sessionId: 'session-1', logger }));
    const turn = await store.readTurn(turnId);
    expect(turn).toMatchObject({ committedAt: null, message: null });
    expect(turn.files).toEqual(entries);
    expect(turn.files.map((f) => f.path)).not.toContain(file('d'));
    expect(warnings()).toEqual([expect.objectContaining({ level: 40, turnId, msg: expect.stringContaining('torn last line') })]);
    expect((await new BackupHome({ home }).listTurns()).map((t) => [t.id, t.committedAt, t.files.length])).toEqual([[turnId, null, 3]]);
  });

  it('restores what the complete lines recorded (forced: the turn was never committed)', async () => {
    const { home, file, turnId } = await crashed();
    const { store, manifest } = await new BackupHome({ home }).findTurn(turnId);
    const refused = await store.restore(manifest);
    expect(refused.conflicts.map((c) => [path.basename(c.path), c.reason])).toEqual([
      ['a', 'not-committed'],
      ['b', 'not-committed'],
      ['c', 'not-committed'],
    ]);
    const report = await store.restore(manifest, { force: true });
    expect(report.failed).toEqual([]);
    expect(report.restored.map((r) => path.basename(r.path))).toEqual(['a', 'b', 'c']);
    for (const name of ['a', 'b', 'c']) expect(await fs.readFile(file(name), 'utf8')).toBe(`original ${name}\n`);
    expect(await fs.readFile(file('d'), 'utf8')).toBe('original d\n');
  });

  it('continues the turn after a restart: the torn line is dropped, not glued to the next one', async () => {
    const { home, file, turnId, entries } = await crashed();
    const store = closeLater(await SessionBackupStore.open({ home, sessionId: 'session-1' }));
    expect(await store.backup(file('a'), { turnId, operation: 'open' })).toBeUndefined();
    const d = await store.backup(file('d'), { turnId, operation: 'open' });
    await fs.writeFile(file('e'), 'original e\n');
    const e = await store.backup(file('e'), { turnId, operation: 'open' });
    const journal = await journalOnDisk(store.root, turnId);
    expect(journal.files).toEqual([...entries, d, e]);
    const committed = await store.commitTurn(turnId, 'after the crash');
    expect(committed.files.map((f) => path.basename(f.path))).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect((await store.readBlob(d!.sha256!)).toString()).toBe('original d\n');
    expect(await filesUnder(turnsDir(store.root))).toEqual([`${turnId}.json`]);
  });

  it('ignores a complete last line that is not a valid entry, but not an earlier one', async () => {
    const { home, store, turnId, entries } = await backedUp(['a', 'b', 'c']);
    const journal = journalFile(store.root, turnId);
    const intact = await fs.readFile(journal, 'utf8');
    await fs.appendFile(journal, '{"path":"/x","operation":"open"}\n');
    const { logger, warnings } = capturingLogger();
    const reader = closeLater(await SessionBackupStore.open({ home, sessionId: 'session-1', logger }));
    expect((await reader.readTurn(turnId)).files).toEqual(entries);
    expect(warnings()).toHaveLength(1);

    // The same bad line with a good one after it: the turn is damaged.
    await fs.writeFile(journal, `${intact}{"path":"/x","operation":"open"}\n${intact.split('\n')[1]}\n`);
    await expect(reader.readTurn(turnId)).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED });
  });
});

describe('a damaged journal', () => {
  it('is reported like a damaged manifest: left out of lists, refused by readTurn, GC references and backups', async () => {
    const { home, work, store, turnId, file } = await backedUp(['a', 'b', 'c']);
    const committedId = newTurnId(new Date(Date.now() - 60_000));
    await store.commitTurn(committedId, 'an earlier turn');
    const journal = journalFile(store.root, turnId);
    const lines = (await fs.readFile(journal, 'utf8')).split('\n');
    lines[2] = lines[2]!.slice(0, 40); // the entry of b, cut short, with lines after it
    await fs.writeFile(journal, lines.join('\n'));

    const { logger, warnings } = capturingLogger();
    const reader = closeLater(await SessionBackupStore.open({ home, sessionId: 'session-1', logger }));
    expect((await reader.listTurns()).map((t) => t.id)).toEqual([committedId]);
    expect(warnings()).toEqual([expect.objectContaining({ msg: 'skipping a damaged turn' })]);
    expect((await new BackupHome({ home }).listTurns()).map((t) => t.id)).toEqual([committedId]);
    await expect(reader.readTurn(turnId)).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED, message: expect.stringContaining('line 3') });
    await expect(reader.referencedBlobs()).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED });
    // Fail closed: nothing is backed up into a turn whose record cannot be trusted.
    await fs.writeFile(path.join(work, 'late'), 'late');
    await expect(reader.backup(file('late'), { turnId, operation: 'open' })).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED });
  });

  it.each([
    ['an empty file', () => ''],
    ['a header without its end of line', (header: string) => header],
    ['a header of another turn', (header: string) => `${header.replace(/"id":"[^"]+"/, '"id":"20000101-000000-000000"')}\n`],
    ['a header of another session', (header: string) => `${header.replace('"sessionId":"session-1"', '"sessionId":"other"')}\n`],
    ['a path recorded twice', (header: string, entry: string) => `${header}\n${entry}\n${entry}\n`],
  ])('is damaged with %s', async (_what, make) => {
    const { store, turnId } = await backedUp(['a']);
    const [header, entry] = (await fs.readFile(journalFile(store.root, turnId), 'utf8')).split('\n');
    await fs.writeFile(journalFile(store.root, turnId), make(header!, entry!));
    await expect(store.readTurn(turnId)).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED });
  });

  it('parses header-only and torn journals without a store', () => {
    const header = JSON.stringify({ journal: 1, id: 't1', sessionId: 's', kind: 'restore', restoreOf: 't0', startedAt: '2026-01-01T00:00:00.000Z' });
    const onlyHeader = parseJournal(Buffer.from(`${header}\n`), { turnId: 't1', sessionId: 's' });
    expect(onlyHeader).toEqual({
      manifest: {
        version: 1,
        id: 't1',
        sessionId: 's',
        kind: 'restore',
        restoreOf: 't0',
        message: null,
        startedAt: '2026-01-01T00:00:00.000Z',
        committedAt: null,
        files: [],
      },
      entries: [],
      wholeBytes: header.length + 1,
    });
    const torn = parseJournal(Buffer.from(`${header}\n{"path":"/a","oper`), { turnId: 't1', sessionId: 's' });
    expect(torn.manifest.files).toEqual([]);
    expect(torn.wholeBytes).toBe(header.length + 1);
    expect(torn.ignored).toMatchObject({ line: 2, bytes: '{"path":"/a","oper'.length });
  });
});

describe('manifests written before the journal', () => {
  /** A turn as the earlier store left it: pretty-printed JSON, rewritten whole per backup. */
  async function legacy(open: boolean) {
    const { home, work, store, turnId, entries, file } = await backedUp(['a', 'b']);
    const committed = await store.commitTurn(turnId, 'old');
    const old: TurnManifest = open ? { ...committed, message: null, committedAt: null, files: entries } : committed;
    await fs.writeFile(manifestFile(store.root, turnId), `${JSON.stringify(old, null, 2)}\n`);
    return { home, work, turnId, old, file };
  }

  it('still reads committed ones', async () => {
    const { home, turnId, old } = await legacy(false);
    const store = closeLater(await SessionBackupStore.open({ home, sessionId: 'session-1' }));
    expect(await store.readTurn(turnId)).toEqual(old);
    expect(await new BackupHome({ home }).listTurns()).toEqual([old]);
  });

  it('still reads open ones, and continues them into a journal', async () => {
    const { home, turnId, old, file } = await legacy(true);
    const store = closeLater(await SessionBackupStore.open({ home, sessionId: 'session-1' }));
    expect(await store.listTurns()).toEqual([old]);
    expect(await store.backup(file('a'), { turnId, operation: 'open' })).toBeUndefined();
    await fs.writeFile(file('c'), 'original c\n');
    const c = await store.backup(file('c'), { turnId, operation: 'open' });
    // The journal takes over (old entries first); the old manifest stays until the commit replaces it.
    expect((await journalOnDisk(store.root, turnId)).files).toEqual([...old.files, c]);
    expect((await store.readTurn(turnId)).files).toEqual([...old.files, c]);
    const committed = await store.commitTurn(turnId, 'continued');
    expect(committed.files.map((f) => path.basename(f.path))).toEqual(['a', 'b', 'c']);
    expect(await filesUnder(turnsDir(store.root))).toEqual([`${turnId}.json`]);
  });
});

describe('a journal left beside its committed manifest', () => {
  it('is ignored by readers and removed when a store opens', async () => {
    const { home, store, turnId, entries } = await backedUp(['a']);
    const leftover = await fs.readFile(journalFile(store.root, turnId));
    const committed = await store.commitTurn(turnId, 'done');
    await fs.writeFile(journalFile(store.root, turnId), leftover); // as if the crash came before its removal
    expect(await store.listTurns()).toEqual([committed]);
    expect(await store.readTurn(turnId)).toEqual(committed);
    expect(committed.files.map((f) => f.sha256)).toEqual(entries.map((e) => e.sha256));
    closeLater(await SessionBackupStore.open({ home, sessionId: 'session-1' }));
    expect(await filesUnder(turnsDir(store.root))).toEqual([`${turnId}.json`]);
  });
});

describe('fsyncs per backup', () => {
  /** Count fsync/fdatasync calls while `run` runs. */
  async function syncsDuring(run: () => Promise<unknown>): Promise<SyncCounts> {
    const { counts, stop } = await countSyncs();
    try {
      await run();
    } finally {
      stop();
    }
    return counts;
  }

  it('are the blob’s, its directory’s, and one for the journal line, however big the turn', async () => {
    const { work, store } = await fixture();
    const turnId = newTurnId();
    await store.beginTurn(turnId);
    const newFile = async (name: string, content: string) => {
      const file = path.join(work, name);
      await fs.writeFile(file, content);
      await fs.mkdir(path.join(store.root, 'blobs', sha(content).slice(0, 2)), { recursive: true }); // fan-out directory exists
      return file;
    };
    const first = await newFile('first', 'first content');
    // The turn's first backup writes its journal whole: the journal's fsync and turns/' instead of a line's fdatasync.
    expect(await syncsDuring(() => store.backup(first, { turnId, operation: 'open' }))).toEqual({ fsync: 4, fdatasync: 0 });
    const second = await newFile('second', 'second content');
    expect(await syncsDuring(() => store.backup(second, { turnId, operation: 'open' }))).toEqual({ fsync: 2, fdatasync: 1 });
    const same = await newFile('same', 'first content');
    // A reused blob gets an fdatasync and its directory an fsync (the blob may have been written unsynced under
    // durability 'turn', or its name left unsynced by a backup that failed; on disk already, they wait for nothing).
    expect(await syncsDuring(() => store.backup(same, { turnId, operation: 'open' }))).toEqual({ fsync: 1, fdatasync: 2 });
    for (let i = 0; i < 200; i++) await store.backup(await newFile(`n${i}`, `content ${i}`), { turnId, operation: 'open' });
    // The fan-out directories made ahead meanwhile (fanout-dirs.ts) sync blobs/: let that finish first.
    await store.blobs.fanouts.preparing;
    const late = await newFile('late', 'late content');
    expect(await syncsDuring(() => store.backup(late, { turnId, operation: 'open' }))).toEqual({ fsync: 2, fdatasync: 1 });
    expect((await store.readTurn(turnId)).files).toHaveLength(204);
  });
});
