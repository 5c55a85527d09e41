import type { BackupHome, RewindReport, TurnManifest } from '../backup/index.js';
import { HttpError } from './http.js';

/**
 * Rewind, as `backups restore --to TURN` does it: the same plan (TURN and every later
 * agent turn of its session, newest first) and the same store call (one rescue turn for
 * the whole rewind; a turn with conflicts stops it, unchanged, unless forced).
 */
export async function rewindPlan(home: BackupHome, sessionId: string, turnId: string): Promise<TurnManifest[]> {
  return (await home.rewindPlan(turnId, { sessionId })).turns;
}

export async function rewindSession(
  home: BackupHome,
  sessionId: string,
  turnId: string,
  options: { force?: boolean; dryRun?: boolean; confirmed?: readonly string[] } = {},
): Promise<RewindReport> {
  const { store, turns } = await home.rewindPlan(turnId, { sessionId });
  // A turn committed since the person confirmed the list would be undone unseen: refuse, and let them look again.
  const ids = turns.map((turn) => turn.id);
  if (options.confirmed && ids.join('\n') !== options.confirmed.join('\n')) {
    throw new HttpError(409, `the turns to rewind are now ${ids.join(', ')}, not the ${options.confirmed.length} confirmed; look at the plan again`);
  }
  return store.rewind(turns, { force: options.force ?? false, dryRun: options.dryRun ?? false });
}
