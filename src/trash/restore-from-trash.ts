import { promises as fs, type Stats } from 'node:fs';
import { dirname } from 'node:path';
import { BrokerError, ErrorCodes } from '../core/errors.js';
import { forgetDirectorySize } from './directory-sizes.js';
import { badRequest, fsFailure, isErrno } from './fs-failure.js';
import type { RenameFn } from './move-to-trash.js';
import { locateTrashItem, originalPathFor } from './trash-location.js';
import { parseTrashInfo } from './trash-info.js';

/**
 * Puts a trashed item back where its `.trashinfo` says it came from, by rename only.
 * Missing parent directories are not recreated: the caller decides whether that is wanted.
 */

export interface RestoreOptions {
  /**
   * Replace whatever is at the original path. A non-empty directory is never replaced.
   * What is replaced is gone for good: back it up or trash it first if it matters.
   */
  overwrite?: boolean;
  /** Performs the move out of files/. Default fs.promises.rename (note: it replaces an existing file). */
  rename?: RenameFn;
}

export interface RestoreResult {
  restoredTo: string;
}

const defaultRename: RenameFn = (from, to) => fs.rename(from, to);

async function lstatOrUndefined(path: string): Promise<Stats | undefined> {
  try {
    return await fs.lstat(path);
  } catch (error) {
    if (isErrno(error, 'ENOENT')) return undefined;
    throw fsFailure(`cannot inspect ${path}`, error);
  }
}

function conflict(message: string, errno: string, details: Record<string, unknown>): BrokerError {
  return new BrokerError(ErrorCodes.RESTORE_CONFLICT, message, { errno, details });
}

/** Clears the way for an overwrite, or refuses. Returns nothing when rename alone can replace the target. */
async function makeRoom(target: string, existing: Stats, item: Stats): Promise<void> {
  const existingIsDir = existing.isDirectory();
  if (existingIsDir && (await fs.readdir(target)).length > 0) {
    throw conflict(`${target} is a non-empty directory; it is not overwritten`, 'ENOTEMPTY', { target });
  }
  // rename() replaces a file with a file and an empty directory with a directory by itself;
  // across types it fails, so the (empty or non-directory) target is removed first.
  if (existingIsDir && !item.isDirectory()) await fs.rmdir(target);
  else if (!existingIsDir && item.isDirectory()) await fs.unlink(target);
}

export async function restoreFromTrash(path: string, options: RestoreOptions = {}): Promise<RestoreResult> {
  const location = locateTrashItem(path);
  let infoText: string;
  try {
    infoText = await fs.readFile(location.infoPath, 'utf8');
  } catch (error) {
    throw fsFailure(`cannot read ${location.infoPath}`, error);
  }
  const parsed = parseTrashInfo(infoText);
  if (!parsed.ok) throw badRequest(`${location.infoPath} is broken: ${parsed.problem}`, { infoPath: location.infoPath });
  const target = originalPathFor(location.trashDir, parsed.info.path);

  const item = await lstatOrUndefined(location.trashedPath);
  if (item === undefined) {
    throw new BrokerError(ErrorCodes.HOST_OP_FAILED, `${location.trashedPath} is missing from the trash`, {
      errno: 'ENOENT',
      details: { infoPath: location.infoPath },
    });
  }

  const parent = dirname(target);
  let parentStat: Stats;
  try {
    parentStat = await fs.stat(parent);
  } catch (error) {
    if (isErrno(error, 'ENOENT')) {
      throw new BrokerError(
        ErrorCodes.HOST_OP_FAILED,
        `cannot restore to ${target}: its directory ${parent} no longer exists (recreate it first)`,
        { errno: 'ENOENT', details: { target, missingParent: parent } },
      );
    }
    throw fsFailure(`cannot inspect ${parent}`, error);
  }
  if (!parentStat.isDirectory()) {
    throw new BrokerError(ErrorCodes.HOST_OP_FAILED, `cannot restore to ${target}: ${parent} is not a directory`, {
      errno: 'ENOTDIR',
      details: { target },
    });
  }

  const existing = await lstatOrUndefined(target);
  if (existing !== undefined) {
    if (options.overwrite !== true) {
      throw conflict(`${target} already exists; pass overwrite to replace it`, 'EEXIST', { target });
    }
    try {
      await makeRoom(target, existing, item);
    } catch (error) {
      throw fsFailure(`cannot replace ${target}`, error, { target });
    }
  }

  try {
    await (options.rename ?? defaultRename)(location.trashedPath, target);
  } catch (error) {
    throw fsFailure(`cannot move ${location.trashedPath} back to ${target}`, error, { target });
  }

  try {
    await fs.unlink(location.infoPath);
  } catch (error) {
    if (!isErrno(error, 'ENOENT')) {
      throw fsFailure(`restored to ${target}, but ${location.infoPath} could not be removed`, error, { restoredTo: target });
    }
  }
  if (item.isDirectory()) await forgetDirectorySize(location.trashDir, location.name).catch(() => undefined);
  return { restoredTo: target };
}
