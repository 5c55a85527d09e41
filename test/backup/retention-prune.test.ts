import { spawnSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/core/errors.js';
import { BackupHome } from '../../src/backup/backup-home.js';
import { pruneBackups, pruneReportSchema, parseOlderThan, type PruneOptions, type PruneReport } from '../../src/backup/retention.js';
import { SessionBackupStore } from '../../src/backup/session-store.js';
import { closeLater } from '../helpers/close-opened.js';
import {
  A1,
  A2,
  A3,
  S,
  SESSION,
  T1,
  T2,
  T3,
  T4,
  ageBlobs,
  blobShas,
  buildStore,
  dayIso,
  hoursAgo,
  openAt,
  sha,
  treeState,
  turn,
  type Built,
} from './retention-fixture.js';

/** Prune with the report checked against its schema (the CLI prints it as JSON). */
async function prune(built: Built, options: Omit<PruneOptions, 'home'>): Promise<PruneReport> {
  return pruneReportSchema.parse(await pruneBackups({ home: built.home, ...options }));
}

async function turnIds(home: string, sessionId = SESSION): Promise<string[]> {
  return (await new BackupHome({ home }).listTurns({ sessionId })).map((t) => t.id);
}

const ids = (report: PruneReport) => report.pruned.map((t) => t.turnId);

describe('prune by count', () => {
  it('--keep-last 2 keeps the two newest turns; GC keeps A1, which a pruned and a kept turn share', async () => {
    const built = await buildStore();
    const report = await prune(built, { keepLast: 2 });
    expect(ids(report)).toEqual([T1, T2]);
    expect(report.pruned.every((t) => t.reasons.join() === 'keep-last')).toBe(true);
    expect(report.pruned[0]).toMatchObject({ sessionId: SESSION, kind: 'turn', open: false, files: 2, committedAt: dayIso(1) });
    expect(await turnIds(built.home)).toEqual([T3, T4]);
    // T1 and T4 both hold A1 (dedup): T1's pruning must not take it.
    expect(await blobShas(built.root)).toEqual([sha(A1), sha(A3)].sort());
    expect(report.gc).toEqual({ blobsRemoved: 2, bytesFreed: 1200, blobsKeptRecent: 0, bytesKeptRecent: 0, tempsRemoved: 0 });
    expect(report.storedBytes).toEqual({ before: 1700, after: 500 });
    expect(report.keptTurns).toBe(2);
    expect(report.held).toEqual([]);
    // Manifests went through pruned/, which is empty again.
    expect(await fs.readdir(path.join(built.root, 'pruned'))).toEqual([]);
    expect(await fs.readdir(path.join(built.root, 'turns'))).toEqual([`${T3}.json`, `${T4}.json`]);
  });

  it('--keep-last 0 still keeps the newest turn of the session unless --include-newest', async () => {
    const built = await buildStore();
    const report = await prune(built, { keepLast: 0 });
    expect(ids(report)).toEqual([T1, T2, T3]);
    expect(report.held).toEqual([{ sessionId: SESSION, turnId: T4, why: 'newest', flag: '--include-newest' }]);
    expect(await turnIds(built.home)).toEqual([T4]);
    expect(await blobShas(built.root)).toEqual([sha(A1)]);

    const all = await prune(built, { keepLast: 0, includeNewest: true });
    expect(ids(all)).toEqual([T4]);
    expect(await turnIds(built.home)).toEqual([]);
    expect(await blobShas(built.root)).toEqual([]);
  });

  it('counts per session', async () => {
    const built = await buildStore();
    const other = path.join(built.work, 'other.txt');
    await fs.writeFile(other, 'other session\n');
    await turn(built.home, 'sess-o', '20251201-000000-bbbbb1', '2025-12-01T00:00:00.000Z', [other], () => fs.writeFile(other, 'x'));
    await turn(built.home, 'sess-o', '20251202-000000-bbbbb2', '2025-12-02T00:00:00.000Z', [other], () => fs.writeFile(other, 'y'));
    const report = await prune(built, { keepLast: 1 });
    expect(report.sessions).toEqual(['sess-o', SESSION]);
    expect(ids(report)).toEqual(['20251201-000000-bbbbb1', T1, T2, T3]);
    expect(await turnIds(built.home, 'sess-o')).toEqual(['20251202-000000-bbbbb2']);
    expect(await turnIds(built.home)).toEqual([T4]);
  });

  it('--session limits the prune to one session', async () => {
    const built = await buildStore();
    const other = path.join(built.work, 'other.txt');
    await fs.writeFile(other, 'other session\n');
    await turn(built.home, 'sess-o', '20251201-000000-bbbbb1', '2025-12-01T00:00:00.000Z', [other], () => fs.writeFile(other, 'x'));
    await turn(built.home, 'sess-o', '20251202-000000-bbbbb2', '2025-12-02T00:00:00.000Z', [other], () => fs.writeFile(other, 'y'));
    const report = await prune(built, { keepLast: 1, sessionId: 'sess-o' });
    expect(report.sessions).toEqual(['sess-o']);
    expect(ids(report)).toEqual(['20251201-000000-bbbbb1']);
    expect(await turnIds(built.home)).toEqual([T1, T2, T3, T4]);
    await expect(prune(built, { keepLast: 1, sessionId: 'nope' })).rejects.toMatchObject({ code: ErrorCodes.TURN_NOT_FOUND });
  });
});

describe('prune by age', () => {
  it('--older-than DATE prunes turns committed before midnight UTC of that day', async () => {
    const built = await buildStore();
    const report = await prune(built, { olderThan: parseOlderThan('2026-01-03') });
    expect(report.criteria.olderThan).toBe('2026-01-03T00:00:00.000Z');
    // T3 was committed exactly at the cutoff: not older than it.
    expect(ids(report)).toEqual([T1, T2]);
    expect(report.pruned.every((t) => t.reasons.join() === 'older-than')).toBe(true);
    expect(await turnIds(built.home)).toEqual([T3, T4]);
  });

  it('--older-than DURATION counts back from now', async () => {
    const built = await buildStore();
    const report = await prune(built, { olderThan: parseOlderThan('8d'), now: () => new Date('2026-01-10T00:00:00.000Z') });
    expect(report.criteria.olderThan).toBe('2026-01-02T00:00:00.000Z');
    expect(ids(report)).toEqual([T1]);
  });

  it('keeps the newest turn even when it is old, and says which flag lets it go', async () => {
    const built = await buildStore();
    const report = await prune(built, { olderThan: parseOlderThan('2027-01-01') });
    expect(ids(report)).toEqual([T1, T2, T3]);
    expect(report.held).toEqual([{ sessionId: SESSION, turnId: T4, why: 'newest', flag: '--include-newest' }]);
  });

  it('with --keep-last too, a turn goes only when both let it go', async () => {
    const built = await buildStore();
    const report = await prune(built, { keepLast: 1, olderThan: parseOlderThan('2026-01-02T12:00:00Z') });
    expect(ids(report)).toEqual([T1, T2]);
    expect(report.pruned[0]?.reasons).toEqual(['keep-last', 'older-than']);
  });
});

describe('prune by size budget', () => {
  it('drops the oldest turns until the blobs that stay fit, counting shared blobs once', async () => {
    const built = await buildStore();
    // Dropping T1 frees nothing (A1 and S are still needed by T4 and T2); dropping T2 frees A2 and S.
    const report = await prune(built, { maxSizeBytes: 600 });
    expect(ids(report)).toEqual([T1, T2]);
    expect(report.pruned.every((t) => t.reasons.join() === 'max-size')).toBe(true);
    expect(report.budget).toEqual({ maxBytes: 600, met: true });
    expect(report.storedBytes).toEqual({ before: 1700, after: 500 });
    expect(await blobShas(built.root)).toEqual([sha(A1), sha(A3)].sort());
  });

  it('a budget already met prunes nothing', async () => {
    const built = await buildStore();
    const report = await prune(built, { maxSizeBytes: 1700 });
    expect(ids(report)).toEqual([]);
    expect(report.budget).toEqual({ maxBytes: 1700, met: true });
  });

  it('never drops the newest turn for a budget: reports the budget as not met', async () => {
    const built = await buildStore();
    const report = await prune(built, { maxSizeBytes: 50 });
    expect(ids(report)).toEqual([T1, T2, T3]);
    expect(report.budget).toEqual({ maxBytes: 50, met: false });
    expect(report.storedBytes.after).toBe(100);
    expect(report.held).toEqual([{ sessionId: SESSION, turnId: T4, why: 'newest', flag: '--include-newest' }]);
    const all = await prune(built, { maxSizeBytes: 50, includeNewest: true });
    expect(ids(all)).toEqual([T4]);
    expect(all.budget?.met).toBe(true);
    expect(all.storedBytes.after).toBe(0);
  });

  it('drops no turn that would free nothing: blobs written within the grace period stay anyway', async () => {
    const built = await buildStore();
    await ageBlobs(built.root, new Date());
    const report = await prune(built, { maxSizeBytes: 0 });
    expect(ids(report)).toEqual([]);
    expect(report.budget).toEqual({ maxBytes: 0, met: false });
    expect(await turnIds(built.home)).toEqual([T1, T2, T3, T4]);
    // Only the last turn that still frees something goes: T1 frees nothing alone, T2 (with it) frees A2 and S.
    await ageBlobs(built.root);
    await fs.utimes(path.join(built.root, 'blobs', sha(A3).slice(0, 2), sha(A3)), new Date(), new Date());
    const partly = await prune(built, { maxSizeBytes: 0 });
    expect(ids(partly)).toEqual([T1, T2]);
    expect(partly.storedBytes.after).toBe(500);
  });

  it('--keep-last holds against the budget too', async () => {
    const built = await buildStore();
    const report = await prune(built, { maxSizeBytes: 0, keepLast: 2, includeNewest: true });
    expect(ids(report)).toEqual([T1, T2]);
    expect(report.budget?.met).toBe(false);
    expect(report.held).toEqual([]);
  });

  it('spans sessions: the oldest turn goes first, whichever session holds it', async () => {
    const built = await buildStore();
    const other = path.join(built.work, 'other.txt');
    await fs.writeFile(other, 'o'.repeat(49) + '\n');
    await turn(built.home, 'sess-o', '20251201-000000-bbbbb1', '2025-12-01T00:00:00.000Z', [other], () => fs.writeFile(other, 'x'));
    await turn(built.home, 'sess-o', '20251202-000000-bbbbb2', '2025-12-02T00:00:00.000Z', [other], () => fs.writeFile(other, 'y'));
    await ageBlobs(path.join(built.home, 'workspace', 'sessions', 'sess-o', 'modify_backup'));
    const report = await prune(built, { maxSizeBytes: 1701 });
    // 1700 + 50 (the first sess-o turn) + 1 ('x') = 1751: the oldest turn of all (sess-o's) goes first.
    expect(report.storedBytes.before).toBe(1751);
    expect(ids(report)).toEqual(['20251201-000000-bbbbb1']);
    expect(report.storedBytes.after).toBe(1701);
  });
});

describe('dry run', () => {
  it('changes nothing, and reports what the real prune then does', async () => {
    const built = await buildStore();
    const before = await treeState(built.home);
    const dry = await prune(built, { keepLast: 1, dryRun: true });
    expect(await treeState(built.home)).toEqual(before);
    expect(dry.dryRun).toBe(true);
    const real = await prune(built, { keepLast: 1 });
    expect(real.dryRun).toBe(false);
    expect({ ...dry, dryRun: false }).toEqual(real);
  });

  it('changes nothing with a budget, stale temps and garbage either', async () => {
    const built = await buildStore();
    const stale = path.join(built.root, 'tmp', 'b-1-dead.tmp');
    await fs.writeFile(stale, 'left by a crash');
    await fs.utimes(stale, hoursAgo(2), hoursAgo(2));
    const before = await treeState(built.home);
    const dry = await prune(built, { maxSizeBytes: 600, dryRun: true });
    expect(await treeState(built.home)).toEqual(before);
    expect(ids(dry)).toEqual([T1, T2]);
    expect(dry.gc).toMatchObject({ blobsRemoved: 2, bytesFreed: 1200, tempsRemoved: 1 });
  });
});

describe('open turns', () => {
  /** T5: begun on Jan 5 with one backup of a.txt (A4 by then), never committed. */
  async function withOpenTurn(built: Built): Promise<{ store: SessionBackupStore; turnId: string }> {
    const store = await openAt(built.home, SESSION, dayIso(5));
    const turnId = '20260105-000000-aaaaa5';
    await store.beginTurn(turnId, { startedAt: dayIso(5) });
    await store.backup(built.a, { turnId, operation: 'open' });
    await ageBlobs(built.root);
    return { store, turnId };
  }

  it('are never pruned, and their blobs are kept even when old', async () => {
    const built = await buildStore();
    const { turnId } = await withOpenTurn(built);
    const journal = path.join(built.root, 'turns', `${turnId}.journal`);
    const report = await prune(built, { keepLast: 0, includeNewest: true, olderThan: parseOlderThan('2030-01-01') });
    expect(ids(report)).toEqual([T1, T2, T3, T4]);
    // Written to just now: nothing lets it go.
    expect(report.held).toEqual([{ sessionId: SESSION, turnId, why: 'open-active', flag: null }]);
    expect(await turnIds(built.home)).toEqual([turnId]);
    expect(await fs.readFile(journal, 'utf8')).toContain(sha('4'.repeat(799) + '\n'));
    expect(await blobShas(built.root)).toEqual([sha('4'.repeat(799) + '\n')]);
  });

  it('--include-open lets an idle one go (a crashed broker\'s); without it, it is held', async () => {
    const built = await buildStore();
    const { turnId } = await withOpenTurn(built);
    const journal = path.join(built.root, 'turns', `${turnId}.journal`);
    await fs.utimes(journal, hoursAgo(2), hoursAgo(2));
    const held = await prune(built, { keepLast: 0, includeNewest: true });
    expect(held.held).toEqual([{ sessionId: SESSION, turnId, why: 'open', flag: '--include-open' }]);
    expect(await turnIds(built.home)).toEqual([turnId]);

    const report = await prune(built, { keepLast: 0, includeNewest: true, includeOpen: true });
    expect(report.pruned).toEqual([
      expect.objectContaining({ turnId, open: true, committedAt: null, startedAt: dayIso(5), reasons: ['keep-last'] }),
    ]);
    expect(await turnIds(built.home)).toEqual([]);
    expect(await fs.readdir(path.join(built.root, 'turns'))).toEqual([]);
    expect(await blobShas(built.root)).toEqual([]);
  });

  it('do not count against --keep-last', async () => {
    const built = await buildStore();
    const { turnId } = await withOpenTurn(built);
    const report = await prune(built, { keepLast: 1 });
    expect(ids(report)).toEqual([T1, T2, T3]);
    expect(await turnIds(built.home)).toEqual([T4, turnId]);
  });
});

describe('crash consistency', () => {
  it('a journal left beside a committed manifest does not bring a pruned turn back as an open one', async () => {
    const built = await buildStore();
    // What a crash between the commit's rename and the journal's removal leaves.
    const store = await openAt(built.home, SESSION, dayIso(6));
    const turnId = '20260106-000000-aaaaa6';
    await store.backup(built.a, { turnId, operation: 'open' });
    const journal = path.join(built.root, 'turns', `${turnId}.journal`);
    const saved = await fs.readFile(journal);
    await store.commitTurn(turnId, 'committed');
    await fs.writeFile(journal, saved);
    const report = await prune(built, { keepLast: 0, includeNewest: true });
    expect(ids(report)).toContain(turnId);
    expect(await turnIds(built.home)).toEqual([]);
    expect(await fs.readdir(path.join(built.root, 'turns'))).toEqual([]);
  });

  it('a damaged turn stops the prune before anything changes', async () => {
    const built = await buildStore();
    await fs.writeFile(path.join(built.root, 'turns', '20260107-000000-dddddd.json'), '{"not":"a manifest"}\n');
    const turns = path.join(built.root, 'turns');
    const blobs = path.join(built.root, 'blobs');
    const before = [await treeState(turns), await treeState(blobs)];
    await expect(prune(built, { keepLast: 0 })).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED });
    expect([await treeState(turns), await treeState(blobs)]).toEqual(before);
    await expect(fs.access(path.join(built.root, 'gc.lock'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('another prune of the session holding the lock makes this one fail without changing anything', async () => {
    const built = await buildStore();
    const lock = path.join(built.root, 'gc.lock');
    await fs.writeFile(lock, JSON.stringify({ pid: process.pid, host: os.hostname(), startedAt: new Date().toISOString() }));
    const before = await treeState(built.home);
    await expect(prune(built, { keepLast: 0 })).rejects.toMatchObject({ code: ErrorCodes.STORE_UNAVAILABLE });
    expect(await treeState(built.home)).toEqual(before);
  });

  it('a lock left by a process that is gone is taken over, and released after', async () => {
    const built = await buildStore();
    const gone = spawnSync(process.execPath, ['-e', ''], { encoding: 'utf8' }).pid;
    expect(gone).toBeGreaterThan(0);
    const lock = path.join(built.root, 'gc.lock');
    await fs.writeFile(lock, JSON.stringify({ pid: gone, host: os.hostname(), startedAt: '2026-01-01T00:00:00.000Z' }));
    const report = await prune(built, { keepLast: 3 });
    expect(ids(report)).toEqual([T1]);
    await expect(fs.access(lock)).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

describe('content survives', () => {
  it('prune keeps blobs of the turns it keeps: their files still read back byte for byte', async () => {
    const built = await buildStore();
    await prune(built, { keepLast: 2 });
    const store = closeLater(await SessionBackupStore.open({ home: built.home, sessionId: SESSION }));
    expect((await store.readBlob(sha(A3))).toString()).toBe(A3);
    expect((await store.readBlob(sha(A1))).toString()).toBe(A1);
    await expect(store.readBlob(sha(A2))).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED });
    await expect(store.readBlob(sha(S))).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED });
  });
});
