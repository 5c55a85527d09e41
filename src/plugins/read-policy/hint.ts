import path from 'node:path';
import { isWithin } from '../file-safety/patterns.js';
import type { UnreadablePath } from './unreadable.js';

/**
 * A command's own reads never leave the kernel, so nothing tells the broker which of
 * them Landlock refused. What `run` can say, after a command that failed, is which
 * unreadable path its command line names: the path, its `~/` form, its last two
 * components (`.aws/credentials`) or a last component that stands out on its own (one
 * starting with `.`, or at least 6 characters: `.env`, `id_ed25519`, `hosts.yml`).
 * Best effort: a path reached through a script or a variable is not named.
 */
export function namedUnreadable(command: string, unreadable: readonly UnreadablePath[], home: string): UnreadablePath | undefined {
  return unreadable.find((entry) => spellings(entry.path, home).some((spelling) => spelled(command, spelling)));
}

/** A character that goes on a name: `~/.ssh/id_ed25519` is not named by `~/.ssh/id_ed25519.pub`. */
const NAME_CHAR = /[\w.\-]/;

function spelled(command: string, spelling: string): boolean {
  for (let at = command.indexOf(spelling); at !== -1; at = command.indexOf(spelling, at + 1)) {
    const before = command[at - 1];
    const after = command[at + spelling.length];
    if ((before === undefined || !NAME_CHAR.test(before)) && (after === undefined || !NAME_CHAR.test(after))) return true;
  }
  return false;
}

function spellings(p: string, home: string): string[] {
  const out = [p];
  if (home !== '/' && isWithin(p, home) && p !== home) out.push(`~${p.slice(home.length)}`);
  const base = path.posix.basename(p);
  const parent = path.posix.basename(path.posix.dirname(p));
  if (parent !== '' && parent !== '/') out.push(`${parent}/${base}`);
  if (base.startsWith('.') || base.length >= 6) out.push(base);
  return out;
}

/** The line `run` prints for it (`<home>` is the brokered-shell home's config, named by the caller). */
export function unreadableHint(entry: UnreadablePath): string {
  return `brokered-shell: note: ${entry.path} may not be read in the sandbox (${entry.denial.by}); ${entry.denial.remedy}`;
}
