import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/core/errors.js';
import { pruneBackups } from '../../src/backup/retention.js';
import { SessionBackupStore } from '../../src/backup/session-store.js';
import { backupStats, statsReportSchema } from '../../src/backup/stats.js';
import { tempDir } from './helpers.js';
import { SESSION, buildStore, dayIso, openAt, treeState, turn, type Built } from './retention-fixture.js';
import { closeLater } from '../helpers/close-opened.js';

const C = 'c'.repeat(49) + '\n'; // 50 B
const ORPHAN = 'orphan\n'; // 7 B

/**
 * The fixture's session (4 turns, 6 entries, 1700 B stored, 2800 B logical) plus
 * `sess-l`: a committed turn that backed up a symlink (no content), an open turn that
 * backed up C, and an orphan blob no turn names.
 */
async function knownHome(): Promise<Built> {
  const built = await buildStore();
  const link = path.join(built.work, 'link');
  await fs.symlink('a.txt', link);
  await turn(built.home, 'sess-l', '20260201-000000-cccccc', dayIso(20), [link], () => fs.unlink(link));
  const c = path.join(built.work, 'c.txt');
  await fs.writeFile(c, C);
  const open = await openAt(built.home, 'sess-l', dayIso(21));
  await open.backup(c, { turnId: '20260202-000000-dddddd', operation: 'truncate' });
  const orphan = path.join(built.work, 'orphan.txt');
  await fs.writeFile(orphan, ORPHAN);
  const store = closeLater(await SessionBackupStore.open({ home: built.home, sessionId: 'sess-l' }));
  await store.blobs.snapshot(orphan, await fs.lstat(orphan, { bigint: true }), 1 << 20);
  // Quiet before a test looks at the home: no spare temp still being made. The turn stays open.
  await Promise.all([open.close(), store.close()]);
  return built;
}

describe('backup stats', () => {
  it('counts turns, files and bytes exactly, per session and in total', async () => {
    const built = await knownHome();
    const report = statsReportSchema.parse(await backupStats({ home: built.home }));
    expect(report.sessions).toEqual([
      {
        sessionId: 'sess-l',
        turns: 2,
        openTurns: 1,
        files: 2,
        blobs: 2,
        storedBytes: 57,
        logicalBytes: 50,
        dedupRatio: 50 / 57,
        unreferencedBlobs: 1,
        unreferencedBytes: 7,
      },
      {
        sessionId: SESSION,
        turns: 4,
        openTurns: 0,
        files: 6,
        blobs: 4,
        storedBytes: 1700,
        logicalBytes: 2800,
        dedupRatio: 2800 / 1700,
        unreferencedBlobs: 0,
        unreferencedBytes: 0,
      },
    ]);
    expect(report.total).toEqual({
      turns: 6,
      openTurns: 1,
      files: 8,
      blobs: 6,
      storedBytes: 1757,
      logicalBytes: 2850,
      dedupRatio: 2850 / 1757,
      unreferencedBlobs: 1,
      unreferencedBytes: 7,
    });
  });

  it('--session narrows to one session; an unknown one is an error', async () => {
    const built = await knownHome();
    const report = await backupStats({ home: built.home, sessionId: SESSION });
    expect(report.sessions.map((s) => s.sessionId)).toEqual([SESSION]);
    expect(report.total).toMatchObject({ turns: 4, storedBytes: 1700, logicalBytes: 2800 });
    await expect(backupStats({ home: built.home, sessionId: 'nope' })).rejects.toMatchObject({ code: ErrorCodes.TURN_NOT_FOUND });
  });

  it('reads only', async () => {
    const built = await knownHome();
    const before = await treeState(built.home);
    await backupStats({ home: built.home });
    expect(await treeState(built.home)).toEqual(before);
  });

  it('agrees with what a prune leaves', async () => {
    const built = await buildStore();
    const pruned = await pruneBackups({ home: built.home, keepLast: 2 });
    const report = await backupStats({ home: built.home });
    expect(report.total).toEqual({
      turns: 2,
      openTurns: 0,
      files: 2,
      blobs: 2,
      storedBytes: pruned.storedBytes.after,
      logicalBytes: 500,
      dedupRatio: 1,
      unreferencedBlobs: 0,
      unreferencedBytes: 0,
    });
    expect(pruned.storedBytes.after).toBe(500);
  });

  it('an empty home has nothing, and no ratio', async () => {
    const home = await tempDir('bsh-ret-empty-');
    expect(await backupStats({ home })).toEqual({
      sessions: [],
      total: { turns: 0, openTurns: 0, files: 0, blobs: 0, storedBytes: 0, logicalBytes: 0, dedupRatio: null, unreferencedBlobs: 0, unreferencedBytes: 0 },
      damaged: [],
    });
  });
});
