import { promises as fs, type Stats } from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, isAbsolute, join } from 'node:path';
import { BrokerError, ErrorCodes } from '../core/errors.js';
import { findTopDir } from './mount-point.js';
import { badRequest, fsFailure, isErrno } from './fs-failure.js';

/**
 * Chooses the trash directory for an item (trash spec 1.0, "Trash directories"):
 * the home trash when the item's directory is on the home trash's device, otherwise
 * `$topdir/.Trash/$uid` when `$topdir/.Trash` passes the spec's checks, otherwise
 * `$topdir/.Trash-$uid`. Never a trash on another device: that would need a copy.
 */

export type TrashKind = 'home' | 'shared-topdir' | 'user-topdir';

export interface TrashDirChoice {
  /** The trash directory: it holds `files/` and `info/`. */
  trashDir: string;
  /** Where a relative `Path=` is resolved from: `$XDG_DATA_HOME` for the home trash, the mount point otherwise. */
  topDir: string;
  kind: TrashKind;
  /** Why `$topdir/.Trash` was passed over, when it exists but could not be used (spec: report it). */
  ignoredSharedTrash?: string;
}

export interface FindTrashDirOptions {
  /** Read for XDG_DATA_HOME and HOME; defaults to process.env. */
  env?: NodeJS.ProcessEnv;
  uid?: number;
  /** Create the chosen trash (and its files/ and info/) when missing. Default true. */
  create?: boolean;
}

const DIR_MODE = 0o700;

export function resolveUid(uid: number | undefined): number {
  const value = uid ?? process.getuid?.();
  if (value === undefined || !Number.isInteger(value) || value < 0) {
    throw badRequest('cannot tell the user id for the trash (pass options.uid)');
  }
  return value;
}

/** `$XDG_DATA_HOME/Trash`; XDG says an unset, empty or relative value means `$HOME/.local/share`. */
export function homeTrashDir(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_DATA_HOME;
  if (xdg !== undefined && isAbsolute(xdg)) return join(xdg, 'Trash');
  const home = env.HOME !== undefined && isAbsolute(env.HOME) ? env.HOME : homedir();
  return join(home, '.local', 'share', 'Trash');
}

/** The directory a relative `Path=` in this trash is relative to. */
export function trashTopDir(trashDir: string): string {
  const parent = dirname(trashDir);
  if (/^\.Trash-\d+$/.test(basename(trashDir))) return parent;
  if (/^\d+$/.test(basename(trashDir)) && basename(parent) === '.Trash') return dirname(parent);
  return parent;
}

async function lstatOrUndefined(path: string): Promise<Stats | undefined> {
  try {
    return await fs.lstat(path);
  } catch (error) {
    if (isErrno(error, 'ENOENT')) return undefined;
    throw fsFailure(`cannot inspect ${path}`, error);
  }
}

/** stat of the path, or of its nearest existing ancestor: the device a not-yet-created directory would land on. */
async function statNearestExisting(path: string): Promise<Stats> {
  for (let current = path; ; current = dirname(current)) {
    try {
      return await fs.stat(current);
    } catch (error) {
      if (!isErrno(error, 'ENOENT') && !isErrno(error, 'ENOTDIR')) throw fsFailure(`cannot inspect ${current}`, error);
      if (dirname(current) === current) throw fsFailure(`no existing ancestor of ${path}`, error);
    }
  }
}

async function ensureHomeTrash(trashDir: string): Promise<void> {
  for (const sub of ['files', 'info']) {
    const dir = join(trashDir, sub);
    try {
      await fs.mkdir(dir, { recursive: true, mode: DIR_MODE });
      const stat = await fs.stat(dir);
      if (!stat.isDirectory()) throw new BrokerError(ErrorCodes.HOST_OP_FAILED, `${dir} is not a directory`, { errno: 'ENOTDIR' });
    } catch (error) {
      throw fsFailure(`cannot create the home trash ${trashDir}`, error);
    }
  }
}

/**
 * A per-user trash on a volume (`.Trash/$uid` or `.Trash-$uid`) must be a real
 * directory owned by the user: on a shared volume another user could plant a symlink or
 * a directory of their own there and receive our files.
 */
async function ensureUserTrash(trashDir: string, uid: number, create: boolean): Promise<void> {
  const checkDir = async (dir: string, owned: boolean): Promise<void> => {
    let stat = await lstatOrUndefined(dir);
    if (stat === undefined) {
      if (!create) return;
      try {
        await fs.mkdir(dir, { mode: DIR_MODE });
      } catch (error) {
        if (!isErrno(error, 'EEXIST')) throw fsFailure(`cannot create trash directory ${dir}`, error);
      }
      stat = await lstatOrUndefined(dir);
    }
    if (stat === undefined) {
      throw new BrokerError(ErrorCodes.HOST_OP_FAILED, `trash directory ${dir} vanished while being set up`, { errno: 'ENOENT' });
    }
    if (stat.isSymbolicLink() || !stat.isDirectory()) {
      throw new BrokerError(ErrorCodes.HOST_OP_FAILED, `refusing to use ${dir}: not a real directory`, { errno: 'ENOTDIR' });
    }
    if (owned && stat.uid !== uid) {
      throw new BrokerError(ErrorCodes.HOST_OP_FAILED, `refusing to use ${dir}: owned by uid ${stat.uid}, not ${uid}`, {
        errno: 'EPERM',
      });
    }
  };
  await checkDir(trashDir, true);
  await checkDir(join(trashDir, 'files'), true);
  await checkDir(join(trashDir, 'info'), true);
}

/** Why `$topdir/.Trash` fails the spec's checks, or undefined when it passes (absent counts as failing silently). */
function sharedTrashProblem(stat: Stats): string | undefined {
  if (stat.isSymbolicLink()) return 'it is a symbolic link';
  if (!stat.isDirectory()) return 'it is not a directory';
  if ((stat.mode & 0o1000) === 0) return 'it lacks the sticky bit';
  return undefined;
}

export async function findTrashDir(path: string, options: FindTrashDirOptions = {}): Promise<TrashDirChoice> {
  if (!isAbsolute(path)) throw badRequest(`trash needs an absolute path, got ${JSON.stringify(path)}`);
  const create = options.create ?? true;
  const uid = resolveUid(options.uid);
  // The rename happens in the item's directory, so that directory's device decides.
  const parent = dirname(path);
  let parentStat: Stats;
  let realParent: string;
  try {
    parentStat = await fs.stat(parent);
    realParent = await fs.realpath(parent);
  } catch (error) {
    throw fsFailure(`cannot inspect ${parent}`, error);
  }

  const home = homeTrashDir(options.env ?? process.env);
  if ((await statNearestExisting(home)).dev === parentStat.dev) {
    if (create) await ensureHomeTrash(home);
    return { trashDir: home, topDir: dirname(home), kind: 'home' };
  }

  let topDir: string;
  try {
    topDir = await findTopDir(realParent, parentStat.dev);
  } catch (error) {
    throw fsFailure(`cannot find the mount point of ${realParent}`, error);
  }

  let ignoredSharedTrash: string | undefined;
  const shared = join(topDir, '.Trash');
  const sharedStat = await lstatOrUndefined(shared);
  if (sharedStat !== undefined) {
    ignoredSharedTrash = sharedTrashProblem(sharedStat);
    if (ignoredSharedTrash === undefined) {
      const trashDir = join(shared, String(uid));
      try {
        await ensureUserTrash(trashDir, uid, create);
        return { trashDir, topDir, kind: 'shared-topdir' };
      } catch (error) {
        // Spec: when $topdir/.Trash/$uid cannot be used, fall back to $topdir/.Trash-$uid.
        ignoredSharedTrash = `${trashDir} is unusable: ${error instanceof Error ? error.message : String(error)}`;
      }
    }
    ignoredSharedTrash = `${shared} ignored: ${ignoredSharedTrash}`;
  }

  const trashDir = join(topDir, `.Trash-${uid}`);
  await ensureUserTrash(trashDir, uid, create);
  return ignoredSharedTrash === undefined
    ? { trashDir, topDir, kind: 'user-topdir' }
    : { trashDir, topDir, kind: 'user-topdir', ignoredSharedTrash };
}
