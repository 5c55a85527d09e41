import { promises as fs, type Stats } from 'node:fs';
import { basename, dirname, join, normalize, relative, sep } from 'node:path';
import { claimTrashName } from './claim-name.js';
import { recordDirectorySize } from './directory-sizes.js';
import { badRequest, fsFailure } from './fs-failure.js';
import { findTrashDir, type TrashKind } from './trash-dir.js';
import { formatTrashInfo } from './trash-info.js';

/**
 * Moves one item into the freedesktop.org trash (spec 1.0). Only ever a rename within
 * one device: an item that cannot be trashed makes this throw, it is never copied and
 * never deleted.
 */

export type RenameFn = (from: string, to: string) => Promise<void> | void;

export interface MoveToTrashOptions {
  /** Read for XDG_DATA_HOME and HOME; defaults to process.env. */
  env?: NodeJS.ProcessEnv;
  uid?: number;
  /** Deletion time to record; defaults to now. */
  now?: Date;
  /** Performs the move into files/; the broker passes its race-free rename. Default fs.promises.rename. */
  rename?: RenameFn;
  /**
   * Keep `$trash/directorysizes` up to date for trashed directories. Off by default:
   * it walks the whole tree, which a broker should not pay on every `rm -r`.
   */
  directorySizes?: boolean;
}

export interface TrashedItem {
  /** The path as given (normalised). */
  originalPath: string;
  trashDir: string;
  /** Where the item now is: `<trashDir>/files/<name>`. */
  trashedPath: string;
  /** `<trashDir>/info/<name>.trashinfo`. */
  infoPath: string;
  /** The recorded deletion time (whole seconds, as written to the info file). */
  deletedAt: Date;
  kind: TrashKind;
  /** Set when `$topdir/.Trash` exists but failed the spec's checks. */
  ignoredSharedTrash?: string;
}

const defaultRename: RenameFn = (from, to) => fs.rename(from, to);

function isInside(child: string, parent: string): boolean {
  return child === parent || child.startsWith(parent.endsWith(sep) ? parent : parent + sep);
}

function wholeSeconds(date: Date): Date {
  return new Date(Math.floor(date.getTime() / 1000) * 1000);
}

export async function moveToTrash(path: string, options: MoveToTrashOptions = {}): Promise<TrashedItem> {
  if (typeof path !== 'string' || !path.startsWith('/')) {
    throw badRequest(`trash needs an absolute path, got ${JSON.stringify(path)}`);
  }
  // normalize drops a trailing slash, so the final component is the link, not its target.
  const originalPath = normalize(path).replace(/(.)\/+$/, '$1');
  if (originalPath === '/') throw badRequest('refusing to trash /');
  const base = basename(originalPath);
  if (base === '.' || base === '..') throw badRequest(`cannot trash ${JSON.stringify(path)}`);

  let itemStat: Stats;
  let parentStat: Stats;
  try {
    itemStat = await fs.lstat(originalPath);
    parentStat = await fs.stat(dirname(originalPath));
  } catch (error) {
    throw fsFailure(`cannot trash ${originalPath}`, error);
  }
  if (itemStat.isDirectory() && itemStat.dev !== parentStat.dev) {
    throw badRequest(`${originalPath} is a mount point; it cannot be moved to a trash`);
  }

  const choice = await findTrashDir(originalPath, { env: options.env, uid: options.uid, create: true });
  const { trashDir, topDir, kind } = choice;

  // Compare real paths: the caller's path may run through symlinked directories.
  let realItem: string;
  let realTrash: string;
  try {
    realItem = join(await fs.realpath(dirname(originalPath)), base);
    realTrash = await fs.realpath(trashDir);
  } catch (error) {
    throw fsFailure(`cannot resolve ${originalPath}`, error);
  }
  if (isInside(realItem, realTrash)) throw badRequest(`${originalPath} is already in the trash ${trashDir}`);
  if (isInside(realTrash, realItem)) throw badRequest(`${originalPath} contains its own trash ${trashDir}`);

  // Spec: absolute Path= in the home trash, relative to the top directory on a volume.
  const recordedPath = kind === 'home' ? originalPath : relative(topDir, realItem);
  const deletedAt = wholeSeconds(options.now ?? new Date());
  const claimed = await claimTrashName(trashDir, base, formatTrashInfo(recordedPath, deletedAt));

  try {
    await (options.rename ?? defaultRename)(originalPath, claimed.trashedPath);
  } catch (error) {
    // Release the claim so no info file points at an item that never arrived.
    await fs.unlink(claimed.infoPath).catch(() => undefined);
    throw fsFailure(`cannot move ${originalPath} into ${trashDir}`, error, { trashDir });
  }

  if (options.directorySizes === true && itemStat.isDirectory()) {
    // A cache: failing to update it does not undo or fail the trashing.
    await recordDirectorySize(trashDir, claimed.name).catch(() => undefined);
  }

  const item: TrashedItem = {
    originalPath,
    trashDir,
    trashedPath: claimed.trashedPath,
    infoPath: claimed.infoPath,
    deletedAt,
    kind,
  };
  if (choice.ignoredSharedTrash !== undefined) item.ignoredSharedTrash = choice.ignoredSharedTrash;
  return item;
}
