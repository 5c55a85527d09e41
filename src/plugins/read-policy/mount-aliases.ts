import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { isWithin } from '../file-safety/patterns.js';

/**
 * Landlock rules hold on the folders a path goes through, so the same file under a second
 * mount of its file system (a bind mount of the home, a container's view of the host)
 * is reached through other folders, which the read allow-list lets through. Such a mount
 * is found in `/proc/self/mountinfo` when a command starts (the command can make no
 * mount of its own: mount and namespace calls are refused), and the file's path under it
 * is denied too.
 */

interface Mount {
  /** `major:minor` of the file system. */
  readonly dev: string;
  /** The folder of the file system it shows. */
  readonly root: string;
  /** Where it is mounted. */
  readonly point: string;
}

export interface MountAlias {
  /** The denied path's name under another mount. */
  readonly path: string;
  /** The denied path it names. */
  readonly of: string;
}

/** mountinfo escapes space, tab, newline and backslash as octal. */
const unescapeField = (field: string) => field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));

export function parseMountInfo(text: string): Mount[] {
  const mounts: Mount[] = [];
  for (const line of text.split('\n')) {
    const fields = line.split(' ');
    const [, , dev, root, point] = fields;
    if (dev === undefined || root === undefined || point === undefined) continue;
    mounts.push({ dev, root: unescapeField(root), point: unescapeField(point) });
  }
  return mounts;
}

/** The mount a path lies in: the one mounted deepest above it (the last of them, if mounted over). */
function mountOf(mounts: readonly Mount[], p: string): Mount | undefined {
  let best: Mount | undefined;
  for (const mount of mounts) if (isWithin(p, mount.point) && (!best || mount.point.length >= best.point.length)) best = mount;
  return best;
}

const rebase = (p: string, from: string, to: string) => (p === from ? to : path.posix.join(to, path.posix.relative(from, p)));

/** Every other name, under another mount, of each of `paths` (real paths); none when mountinfo cannot be read. */
export async function mountAliases(paths: readonly string[], mountInfo?: string): Promise<MountAlias[]> {
  if (paths.length === 0) return [];
  const text = mountInfo ?? (await readFile('/proc/self/mountinfo', 'utf8').catch(() => ''));
  const mounts = parseMountInfo(text);
  const out: MountAlias[] = [];
  for (const p of paths) {
    const home = mountOf(mounts, p);
    if (!home) continue;
    const inFs = rebase(p, home.point, home.root);
    for (const other of mounts) {
      if (other === home || other.dev !== home.dev) continue;
      // The other mount shows the denied path's folder, or something inside the denied path.
      const alias = isWithin(inFs, other.root) ? rebase(inFs, other.root, other.point) : isWithin(other.root, inFs) ? other.point : undefined;
      // A name under the denied path itself needs nothing more (a mount inside it).
      if (alias !== undefined && !isWithin(alias, p) && mountOf(mounts, alias) === other) out.push({ path: alias, of: p });
    }
  }
  return out;
}
