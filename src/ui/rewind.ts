import type { BackupHome, RewindReport, TurnManifest } from '../backup/index.js';

/**
 * Rewind, as `backups restore --to TURN` does it: the same plan (TURN and every later
 * agent turn of its session, newest first) and the same store call (one rescue turn for
 * the whole rewind; a turn with conflicts stops it, unchanged, unless forced).
 */
export async function rewindPlan(home: BackupHome, sessionId: string, turnId: string): Promise<TurnManifest[]> {
  return (await home.rewindPlan(turnId, { sessionId })).turns;
}

export async function rewindSession(home: BackupHome, sessionId: string, turnId: string, options: { force?: boolean; dryRun?: boolean } = {}): Promise<RewindReport> {
  const { store, turns } = await home.rewindPlan(turnId, { sessionId });
  return store.rewind(turns, { force: options.force ?? false, dryRun: options.dryRun ?? false });
}
