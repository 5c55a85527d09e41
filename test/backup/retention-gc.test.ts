import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/core/errors.js';
import { tempDir, tempsLeft } from './helpers.js';
import { BackupHome } from '../../src/backup/backup-home.js';
import { collectGarbage, gcReportSchema, type GcOptions } from '../../src/backup/gc.js';
import { pruneBackups } from '../../src/backup/retention.js';
import { SessionBackupStore } from '../../src/backup/session-store.js';
import { closeLater } from '../helpers/close-opened.js';
import {
  A1,
  A2,
  A3,
  A4,
  S,
  SESSION,
  T3,
  T4,
  ageBlobs,
  blobShas,
  buildStore,
  dayIso,
  hoursAgo,
  openAt,
  sha,
  type Built,
} from './retention-fixture.js';

const ALL = [A1, A2, A3, S].map((c) => sha(c)).sort();
const blobPath = (built: Built, content: string) => path.join(built.root, 'blobs', sha(content).slice(0, 2), sha(content));

async function gc(built: Built, options: Partial<GcOptions> = {}) {
  return gcReportSchema.parse(await collectGarbage({ home: built.home, sessionId: SESSION, ...options }));
}

/** A blob put in the store the way a backup puts it, but with no turn naming it (yet). */
async function strayBlob(built: Built, content: string): Promise<string> {
  const file = path.join(built.work, `stray-${sha(content).slice(0, 8)}`);
  await fs.writeFile(file, content);
  const store = closeLater(await SessionBackupStore.open({ home: built.home, sessionId: SESSION, reflink: false }));
  const stored = await store.blobs.snapshot(file, await fs.lstat(file, { bigint: true }), 1 << 20);
  expect(stored.sha256).toBe(sha(content));
  return stored.sha256;
}

describe('blob GC', () => {
  it('keeps every referenced blob and removes old unreferenced ones', async () => {
    const built = await buildStore();
    const orphanContent = 'orphan of a crashed backup\n';
    const orphan = await strayBlob(built, orphanContent);
    await ageBlobs(built.root);
    const report = await gc(built);
    expect(report).toEqual({
      sessionId: SESSION,
      blobsRemoved: 1,
      bytesFreed: Buffer.byteLength(orphanContent),
      blobsKeptRecent: 0,
      bytesKeptRecent: 0,
      tempsRemoved: 0,
    });
    expect(await blobShas(built.root)).toEqual(ALL);
    expect(await blobShas(built.root)).not.toContain(orphan);
    // Nothing left in the quarantine, the lock released.
    expect(await fs.readdir(path.join(built.root, 'gc'))).toEqual([]);
    await expect(fs.access(path.join(built.root, 'gc.lock'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('keeps a blob shared by a pruned and a kept turn (dedup) and drops those only pruned turns held', async () => {
    const built = await buildStore();
    // T1 and T2 go; A1 is T1's and T4's, S is T1's and T2's.
    await pruneBackups({ home: built.home, keepLast: 2 });
    expect(await blobShas(built.root)).toEqual([sha(A1), sha(A3)].sort());
  });

  it('keeps the blobs of an open turn, which only its journal names', async () => {
    const built = await buildStore();
    const store = await openAt(built.home, SESSION, dayIso(5));
    const turnId = '20260105-000000-aaaaa5';
    await store.backup(built.a, { turnId, operation: 'open' });
    await ageBlobs(built.root);
    await pruneBackups({ home: built.home, keepLast: 0, includeNewest: true });
    expect(await blobShas(built.root)).toEqual([sha(A4)]);
  });

  it('keeps the blobs of a restore\'s rescue turn, which a restore of it brings back', async () => {
    const built = await buildStore();
    const store = await openAt(built.home, SESSION, dayIso(8));
    const report = await store.restore(T4, { now: () => new Date(dayIso(8)) });
    expect(report.restored.map((r) => r.path)).toEqual([built.a]);
    expect(await fs.readFile(built.a, 'utf8')).toBe(A1);
    const rescue = report.rescueTurnId;
    if (rescue === undefined) throw new Error('no rescue turn');
    await ageBlobs(built.root);
    // Only the rescue turn stays; it alone names A4 (what the restore replaced).
    await pruneBackups({ home: built.home, keepLast: 1 });
    expect((await new BackupHome({ home: built.home }).listTurns()).map((t) => t.id)).toEqual([rescue]);
    expect(await blobShas(built.root)).toEqual([sha(A4)]);
    const undo = await (await openAt(built.home, SESSION, dayIso(9))).restore(rescue, { now: () => new Date(dayIso(9)) });
    expect(undo.failed).toEqual([]);
    expect(await fs.readFile(built.a, 'utf8')).toBe(A4);
  });

  it('refuses to collect when a turn cannot be read, and removes nothing', async () => {
    const built = await buildStore();
    await strayBlob(built, 'orphan\n');
    await ageBlobs(built.root);
    await fs.writeFile(path.join(built.root, 'turns', '20260107-000000-dddddd.journal'), 'not a journal\n');
    const before = await blobShas(built.root);
    await expect(gc(built)).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED });
    expect(await blobShas(built.root)).toEqual(before);
  });

  it('says so for a session without backups', async () => {
    const built = await buildStore();
    await expect(collectGarbage({ home: built.home, sessionId: 'nope' })).rejects.toMatchObject({ code: ErrorCodes.TURN_NOT_FOUND });
  });
});

describe('GC racing a backup (another process)', () => {
  it('a blob written just now, not yet named by any journal line, survives; once named it stays for good', async () => {
    const built = await buildStore();
    const fresh = 'a backup in flight: blob written, journal line not yet\n';
    const blob = await strayBlob(built, fresh);
    const report = await gc(built);
    expect(report).toMatchObject({ blobsRemoved: 0, blobsKeptRecent: 1, bytesKeptRecent: Buffer.byteLength(fresh) });
    expect(await blobShas(built.root)).toContain(blob);

    // The backup's journal line lands (same content: the blob is reused), and the blob ages.
    const file = path.join(built.work, 'fresh.txt');
    await fs.writeFile(file, fresh);
    const store = await openAt(built.home, SESSION, dayIso(5));
    const entry = await store.backup(file, { turnId: '20260105-000000-aaaaa5', operation: 'open' });
    expect(entry?.sha256).toBe(blob);
    await ageBlobs(built.root);
    expect((await gc(built)).blobsRemoved).toBe(0);
    expect((await store.readBlob(blob)).toString()).toBe(fresh);
  });

  it('an old blob refreshed between GC\'s first look and its move is put back', async () => {
    const built = await buildStore();
    const blob = await strayBlob(built, 'reused by a backup right now\n');
    await ageBlobs(built.root);
    const report = await gc(built, {
      faults: {
        // What a backup reusing the blob does: refresh its mtime before it checks it.
        beforeQuarantine: async (sha256, file) => {
          if (sha256 === blob) await fs.utimes(file, new Date(), new Date());
        },
      },
    });
    expect(report).toMatchObject({ blobsRemoved: 0, blobsKeptRecent: 1 });
    expect(await blobShas(built.root)).toContain(blob);
    expect(await fs.readdir(path.join(built.root, 'gc'))).toEqual([]);
  });

  it('a journal line naming an old blob that lands while GC runs keeps the blob (second read)', async () => {
    const built = await buildStore();
    const content = 'reused by a backup whose journal line lands mid-GC\n';
    const blob = await strayBlob(built, content);
    await ageBlobs(built.root);
    // The journal such a backup leaves: made by a twin store elsewhere, so no blob is written here.
    const twinHome = await tempDir('bsh-ret-twin-');
    const file = path.join(built.work, 'reused.txt');
    await fs.writeFile(file, content);
    const turnId = '20260105-000000-aaaaa5';
    await (await openAt(twinHome, SESSION, dayIso(5))).backup(file, { turnId, operation: 'open' });
    const journal = `${turnId}.journal`;
    const twinJournal = path.join(twinHome, 'workspace', 'sessions', SESSION, 'modify_backup', 'turns', journal);
    const report = await gc(built, {
      faults: {
        afterQuarantine: async (sha256) => {
          if (sha256 === blob) await fs.copyFile(twinJournal, path.join(built.root, 'turns', journal));
        },
      },
    });
    expect(report).toMatchObject({ blobsRemoved: 0, blobsKeptRecent: 1 });
    const store = closeLater(await SessionBackupStore.open({ home: built.home, sessionId: SESSION }));
    expect((await store.readBlob(blob)).toString()).toBe(content);
    expect((await store.readTurn(turnId)).files.map((f) => f.sha256)).toEqual([blob]);
  });

  it('a blob a backup writes anew while GC holds the old copy is not touched', async () => {
    const built = await buildStore();
    const content = 'written again while quarantined\n';
    const blob = await strayBlob(built, content);
    await ageBlobs(built.root);
    const report = await gc(built, {
      faults: {
        afterQuarantine: async (sha256, file) => {
          if (sha256 === blob) await fs.writeFile(file, content);
        },
      },
    });
    // The old copy went; the new one is there, whole.
    expect(report).toMatchObject({ blobsRemoved: 1, blobsKeptRecent: 0 });
    expect(await fs.readFile(path.join(built.root, 'blobs', blob.slice(0, 2), blob), 'utf8')).toBe(content);
  });

  it('a blob a crashed GC left in its quarantine goes back (and a referenced one stays readable)', async () => {
    const built = await buildStore();
    await fs.mkdir(path.join(built.root, 'gc'), { recursive: true });
    await fs.rename(blobPath(built, A3), path.join(built.root, 'gc', sha(A3)));
    const report = await gc(built);
    expect(report.blobsRemoved).toBe(0);
    expect(await blobShas(built.root)).toEqual(ALL);
    expect(await fs.readdir(path.join(built.root, 'gc'))).toEqual([]);
  });
});

describe('leftovers', () => {
  it('temp files older than an hour go, younger ones (a backup in progress) stay; pruned/ is swept', async () => {
    const built = await buildStore();
    const tmp = path.join(built.root, 'tmp');
    await fs.writeFile(path.join(tmp, 'b-1-old.tmp'), 'crash leftover');
    await fs.utimes(path.join(tmp, 'b-1-old.tmp'), hoursAgo(2), hoursAgo(2));
    await fs.writeFile(path.join(tmp, 'b-2-new.tmp'), 'being written');
    await fs.mkdir(path.join(built.root, 'pruned'), { recursive: true });
    await fs.writeFile(path.join(built.root, 'pruned', `${T3}.json`), '{}');
    const report = await gc(built);
    expect(report.tempsRemoved).toBe(1);
    expect(await tempsLeft(built.root)).toEqual(['b-2-new.tmp']);
    expect(await fs.readdir(path.join(built.root, 'pruned'))).toEqual([]);
  });
});

describe('restore after prune and GC', () => {
  it('every kept turn restores byte-identical', async () => {
    const built = await buildStore();
    const report = await pruneBackups({ home: built.home, keepLast: 2 });
    expect(report.gc.blobsRemoved).toBe(2);
    const kept = await new BackupHome({ home: built.home }).listTurns({ sessionId: SESSION });
    expect(kept.map((t) => t.id)).toEqual([T3, T4]);
    // What each kept turn backed up of a.txt.
    const expected: Record<string, string> = { [T3]: A3, [T4]: A1 };
    const store = await openAt(built.home, SESSION, dayIso(9));
    for (const manifest of kept) {
      for (const entry of manifest.files) {
        if (entry.sha256) expect((await store.readBlob(entry.sha256)).toString()).toBe(expected[manifest.id]);
      }
      // a.txt changed since (by later turns and restores): force.
      const restored = await store.restore(manifest.id, { force: true, now: () => new Date(dayIso(9)) });
      expect(restored.failed).toEqual([]);
      expect(restored.restored.map((r) => r.path)).toEqual([built.a]);
      expect((await fs.readFile(built.a)).equals(Buffer.from(expected[manifest.id] ?? ''))).toBe(true);
    }
  });
});
