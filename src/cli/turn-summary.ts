import type { EndTurnResult } from '../agent/types.js';
import { PLUGIN_NAME as CACHE_ROOTS, KEPT_OUT_REMEDY } from '../plugins/cache-roots/index.js';
import { OUTSIDE_ROOTS_REMEDY } from '../plugins/file-safety/evaluate.js';

const plural = (count: number, one: string, many = `${one}s`) => `${count} ${count === 1 ? one : many}`;

/** How each kind of path kept out of the backups is named in the summary; others by their plugin's name. */
const EXEMPTED: Readonly<Record<string, string>> = Object.freeze({ [CACHE_ROOTS]: 'in cache roots' });

/**
 * The line `run` ends a committed turn with, on stderr: how many files it backed up, and
 * how many paths it changed where no backup is taken by design (tools' caches), as counts:
 * a cache changes by the thousand, and a restore leaves it as it is. Nothing when the turn
 * did neither.
 */
export function turnSummaryLine(ended: EndTurnResult): string | undefined {
  if (!ended.ok || !ended.turnId) return undefined;
  const kept = Object.entries(ended.exempted ?? {})
    .filter(([, count]) => count > 0)
    .map(([by, count]) => `${plural(count, 'path')} ${EXEMPTED[by] ?? `kept out by ${by}`}`);
  const unbacked = kept.length > 0 ? `${kept.join(', ')} changed without a backup (a restore leaves them as they are)` : '';
  if (ended.files > 0) {
    const line = `brokered-shell: turn ${ended.turnId} backed up ${plural(ended.files, 'file')} (brokered-shell backups show ${ended.turnId})`;
    return unbacked ? `${line}; ${unbacked}` : line;
  }
  return unbacked ? `brokered-shell: turn ${ended.turnId}: ${unbacked}` : undefined;
}

/**
 * A denial's reason as `run` prints it: where the remedy names the home config, the
 * real file (`$BROKERED_SHELL_HOME/config.json`), so the person knows what to edit.
 */
export function withConfigFile(reason: string, homeConfigFile: string): string {
  let out = reason;
  for (const remedy of [OUTSIDE_ROOTS_REMEDY, KEPT_OUT_REMEDY]) out = out.replace(remedy, remedy.replace('<home>/config.json', homeConfigFile));
  // The read policy's remedies name a setting of the home config too (secrets.remove: […] in <home>/config.json).
  return out.replace(/(secrets\.remove: \[[^\]]*\] in )<home>\/config\.json/g, (_, head: string) => `${head}${homeConfigFile}`);
}
