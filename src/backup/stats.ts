import path from 'node:path';
import { z } from 'zod';
import { silentLogger, type Logger } from '../core/logger.js';
import { entryBlob, listBlobsOnDisk, selectSessions, sessionLayout } from './gc.js';
import { damagedTurnSchema, readManifestsIn, type DamagedTurn } from './manifest-io.js';

/**
 * What the backups hold and what they cost, read-only (nothing is opened for writing,
 * nothing tidied).
 *
 *   storedBytes   bytes of the blobs on disk (apparent size)
 *   logicalBytes  the sum of the sizes of the entries whose content is in a blob: what
 *                 the backups would take without deduplication (symlinks and files
 *                 skipped as too large hold no content and do not count)
 *   dedupRatio    logicalBytes / storedBytes (null when nothing is stored)
 *
 * Unreferenced blobs (no turn names them: left by pruned turns or interrupted backups)
 * are part of storedBytes and counted apart; a prune's GC removes them.
 */

const count = z.number().int().min(0);

export const storeTotalsSchema = z.strictObject({
  /** Committed and open. */
  turns: count,
  openTurns: count,
  /** Backup entries over all turns. */
  files: count,
  blobs: count,
  storedBytes: count,
  logicalBytes: count,
  dedupRatio: z.number().nullable(),
  unreferencedBlobs: count,
  unreferencedBytes: count,
});
export type StoreTotals = z.infer<typeof storeTotalsSchema>;

export const sessionStatsSchema = storeTotalsSchema.extend({ sessionId: z.string() });
export type SessionStats = z.infer<typeof sessionStatsSchema>;

export const statsReportSchema = z.strictObject({
  sessions: z.array(sessionStatsSchema),
  total: storeTotalsSchema,
  /** Turns that cannot be read: not counted, and their blobs count as unreferenced. */
  damaged: z.array(damagedTurnSchema),
});
export type StatsReport = z.infer<typeof statsReportSchema>;

export interface StatsOptions {
  home: string;
  /** Only this session (TURN_NOT_FOUND when it has no backups). */
  sessionId?: string;
  /** Damaged turns are left out, logged here and named in the report. */
  logger?: Logger;
}

export async function backupStats(options: StatsOptions): Promise<StatsReport> {
  const home = path.resolve(options.home);
  const log = options.logger ?? silentLogger();
  const sessionIds = await selectSessions(home, options.sessionId);
  const sessions: SessionStats[] = [];
  const damaged: DamagedTurn[] = [];
  for (const sessionId of sessionIds) sessions.push(await sessionStats(home, sessionId, log, damaged));
  const total = emptyTotals();
  for (const s of sessions) {
    total.turns += s.turns;
    total.openTurns += s.openTurns;
    total.files += s.files;
    total.blobs += s.blobs;
    total.storedBytes += s.storedBytes;
    total.logicalBytes += s.logicalBytes;
    total.unreferencedBlobs += s.unreferencedBlobs;
    total.unreferencedBytes += s.unreferencedBytes;
  }
  total.dedupRatio = ratio(total.logicalBytes, total.storedBytes);
  return { sessions, total, damaged };
}

async function sessionStats(home: string, sessionId: string, log: Logger, damaged: DamagedTurn[]): Promise<SessionStats> {
  const layout = sessionLayout(home, sessionId);
  const turns = await readManifestsIn(layout, sessionId, { onDamaged: 'skip', log, damaged });
  const out: SessionStats = { sessionId, ...emptyTotals() };
  const referenced = new Set<string>();
  for (const turn of turns) {
    out.turns++;
    if (turn.committedAt === null) out.openTurns++;
    for (const entry of turn.files) {
      out.files++;
      const sha = entryBlob(entry);
      if (sha === undefined) continue;
      out.logicalBytes += entry.size;
      referenced.add(sha);
    }
  }
  for (const blob of await listBlobsOnDisk(layout)) {
    out.blobs++;
    out.storedBytes += blob.size;
    if (!referenced.has(blob.sha256)) {
      out.unreferencedBlobs++;
      out.unreferencedBytes += blob.size;
    }
  }
  out.dedupRatio = ratio(out.logicalBytes, out.storedBytes);
  return out;
}

function emptyTotals(): StoreTotals {
  return {
    turns: 0,
    openTurns: 0,
    files: 0,
    blobs: 0,
    storedBytes: 0,
    logicalBytes: 0,
    dedupRatio: null,
    unreferencedBlobs: 0,
    unreferencedBytes: 0,
  };
}

function ratio(logical: number, stored: number): number | null {
  return stored === 0 ? null : logical / stored;
}
