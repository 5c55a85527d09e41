import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';
import { isWithin } from '../file-safety/patterns.js';
import type { ReadDenial, ReadPolicy } from './policy.js';

/** Most entries looked at to tell whether a folder a request takes whole holds a path no command may read. */
export const HELD_WALK_LIMIT = 100_000;

export interface HeldDenial {
  /** The path inside that may not be read (or the folder itself, when it is too large to look through). */
  readonly path: string;
  readonly denial: ReadDenial;
}

/**
 * Whether `dir`, taken whole (moved, copied, trashed), holds a path the policy keeps
 * unreadable: an entry of the secret list that exists below it, or a path below it a read
 * rule matches (links are not followed: what a move takes along is the link). A tree too
 * large to look through is refused: what cannot be inspected is not let out.
 */
export async function heldDenial(dir: string, policy: ReadPolicy, limit = HELD_WALK_LIMIT): Promise<HeldDenial | undefined> {
  for (const entry of policy.entries) {
    for (const form of [entry.real, entry.path]) {
      if (form === dir || !isWithin(form, dir)) continue;
      if (await lstat(form).then(() => true, () => false)) return { path: form, denial: entry.denial };
    }
  }
  if (policy.rules.length === 0) return undefined;
  let left = limit;
  const pending = [dir];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const entries = await readdir(next, { withFileTypes: true }).catch(() => []);
    left -= entries.length;
    if (left < 0) {
      return {
        path: dir,
        denial: { by: `its size (more than ${limit} entries to look through for paths the read rules deny)`, source: 'read-policy:tree', remedy: 'move or copy smaller parts of it' },
      };
    }
    for (const entry of entries) {
      const child = path.posix.join(next, entry.name);
      const rule = policy.rules.find((candidate) => candidate.matches(child));
      if (rule) return { path: child, denial: rule.denial };
      if (entry.isDirectory()) pending.push(child);
    }
  }
  return undefined;
}
