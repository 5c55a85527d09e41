import { promises as fs } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fsError, listNames, type FsAt } from './fs-at.js';

export interface DeleteOptions {
  mode: 'trash' | 'unlink';
  recursive: boolean;
  force: boolean;
  env?: NodeJS.ProcessEnv;
}

/**
 * Delete one resolved path (a symlink is removed as a link, never followed). Trash mode
 * moves it whole into the freedesktop trash; if that is impossible the delete fails —
 * it never falls back to a permanent delete.
 */
export async function deletePath(fsAt: FsAt, path: string, options: DeleteOptions): Promise<{ trashedTo?: string }> {
  let info;
  try {
    info = await fs.lstat(path);
  } catch (error) {
    if (options.force && (error as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw error;
  }
  if (info.isDirectory() && !options.recursive && (await fs.readdir(path)).length > 0) {
    throw fsError('ENOTEMPTY', `${path} is a non-empty directory (delete needs recursive)`);
  }
  if (options.mode === 'trash') {
    // Loaded on the first trash delete: most brokers (every `run`) never make one, and the trash is 12 modules.
    const { moveToTrash } = await import('../../trash/index.js');
    const item = await moveToTrash(path, {
      ...(options.env ? { env: options.env } : {}),
      rename: async (from, to) => fsAt.rename(from, await intoRealDirectory(to), { noReplace: true }),
    });
    return { trashedTo: item.trashedPath };
  }
  if (info.isDirectory()) await removeTree(fsAt, path);
  else fsAt.unlink(path);
  return {};
}

/**
 * The trash is the user's own directory and its path may run through links (a linked
 * home, XDG_DATA_HOME); the race-free rename refuses any, so name its real directory.
 */
async function intoRealDirectory(path: string): Promise<string> {
  return join(await fs.realpath(dirname(path)), basename(path));
}

/** Depth first; every unlink is relative to a parent opened without links, so a swap fails. */
async function removeTree(fsAt: FsAt, dir: string): Promise<void> {
  for (const name of await listNames(dir)) {
    const child = join(dir, name);
    if ((await fs.lstat(child)).isDirectory()) await removeTree(fsAt, child);
    else fsAt.unlink(child);
  }
  fsAt.unlink(dir, true);
}
