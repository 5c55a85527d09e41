import { realpathSync } from 'node:fs';
import path from 'node:path';

/**
 * A path that may not exist yet, as the disk resolves it: the real path of the deepest
 * existing folder above it plus the rest, so a link on the way there cannot hide it (a
 * store or a cache folder compared by where it will be, before it is made).
 */
export function realOfDeepestExisting(p: string): string {
  let existing = p;
  const rest: string[] = [];
  for (;;) {
    try {
      return path.posix.join(realpathSync(existing), ...rest.reverse());
    } catch {
      const parent = path.posix.dirname(existing);
      if (parent === existing) return p;
      rest.push(path.posix.basename(existing));
      existing = parent;
    }
  }
}
