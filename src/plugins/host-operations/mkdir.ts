import { promises as fs } from 'node:fs';
import { errnoOf } from '../../core/index.js';
import type { FsAt } from './fs-at.js';

/**
 * mkdir -p on a resolved path. Every level is made with mkdirat under a parent opened
 * without links, so a level swapped for a link fails (ELOOP) instead of creating
 * elsewhere. Missing parents get 0777 less the umask, the last level `mode`.
 */
export async function makeDirectories(fsAt: FsAt, path: string, mode: number): Promise<void> {
  const parts = path.split('/').filter((part) => part !== '');
  for (let depth = 1; depth <= parts.length; depth += 1) {
    const current = `/${parts.slice(0, depth).join('/')}`;
    const last = depth === parts.length;
    try {
      fsAt.mkdir(current, last ? mode : 0o777);
    } catch (error) {
      if (errnoOf(error) !== 'EEXIST') throw error;
      // A file in the way of a middle level fails at the next mkdirat (ENOTDIR); the last
      // level may be a directory or a link to one, as with mkdir -p. Nothing is changed.
      if (last && !(await isDirectory(current))) throw error;
    }
  }
}

async function isDirectory(path: string): Promise<boolean> {
  return fs.stat(path).then(
    (info) => info.isDirectory(),
    () => false,
  );
}
