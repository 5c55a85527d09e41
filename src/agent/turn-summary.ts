import type { EndTurnResult } from './types.js';
import { PLUGIN_NAME as CACHE_ROOTS, KEPT_OUT_REMEDY } from '../plugins/cache-roots/index.js';
import { OUTSIDE_ROOTS_REMEDY } from '../plugins/file-safety/evaluate.js';

const plural = (count: number, one: string, many = `${one}s`) => `${count} ${count === 1 ? one : many}`;

/** How each kind of path kept out of the backups is named in the summary; others by their plugin's name. */
const EXEMPTED: Readonly<Record<string, string>> = Object.freeze({ [CACHE_ROOTS]: 'in cache roots' });

/**
 * What `run` says of a committed turn, on stderr after `brokered-shell: `: how many files
 * it backed up, and how many paths it changed where no backup is taken by design (tools'
 * caches), as counts: a cache changes by the thousand, and a restore leaves it as it is.
 * Undefined when the turn did neither.
 */
export function turnSummaryText(ended: EndTurnResult): string | undefined {
  if (!ended.ok || !ended.turnId) return undefined;
  const kept = Object.entries(ended.exempted ?? {})
    .filter(([, count]) => count > 0)
    .map(([by, count]) => `${plural(count, 'path')} ${EXEMPTED[by] ?? `kept out by ${by}`}`);
  const unbacked = kept.length > 0 ? `${kept.join(', ')} changed without a backup (a restore leaves them as they are)` : '';
  if (ended.files > 0) {
    const line = `turn ${ended.turnId} backed up ${plural(ended.files, 'file')} (brokered-shell backups show ${ended.turnId})`;
    return unbacked ? `${line}; ${unbacked}` : line;
  }
  return unbacked ? `turn ${ended.turnId}: ${unbacked}` : undefined;
}

/** The line `run` ends a committed turn with (nothing when the turn backed up nothing and kept nothing out). */
export function turnSummaryLine(ended: EndTurnResult): string | undefined {
  const text = turnSummaryText(ended);
  return text === undefined ? undefined : `brokered-shell: ${text}`;
}

/** A turn's end, for a program: `run --json`'s `summary`, the MCP server's `run` tool. */
export interface TurnSummary {
  /** Whether the turn was committed (a failed commit leaves its backups for the next turn). */
  committed: boolean;
  turnId: string | null;
  /** Files backed up in the turn: what restoring it brings back. */
  files: number;
  /** Paths changed without a backup by design, per plugin that kept them out (`cache-roots`). */
  exempted: Record<string, number>;
  /** Files changed whose content was not saved (over the size cap with `oversize: skip`). */
  unsaved: string[];
  /** What a person should know before going on (a stopped rebase left for `--continue`). */
  notices: string[];
  /** The summary line `run` prints, without its `brokered-shell: ` (null when it prints none). */
  text: string | null;
  /** Why the commit failed. */
  error?: string;
}

export function turnSummary(ended: EndTurnResult): TurnSummary {
  return {
    committed: ended.ok,
    turnId: ended.turnId ?? null,
    files: ended.files,
    exempted: { ...ended.exempted },
    unsaved: [...(ended.unsaved ?? [])],
    notices: [...(ended.notices ?? [])],
    text: turnSummaryText(ended) ?? null,
    ...(ended.ok || ended.error === undefined ? {} : { error: ended.error }),
  };
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
