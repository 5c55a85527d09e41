import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { fsFailure, isErrno } from './fs-failure.js';
import { originalPathFor } from './trash-location.js';
import { parseTrashInfo } from './trash-info.js';

/**
 * Lists a trash directory from its `info/` folder. Broken entries (unparseable info,
 * item missing from files/) are returned with the reason rather than thrown, so one bad
 * file does not hide the rest. Items in files/ without info are not listed: the spec
 * treats them as not (yet) trashed.
 */

interface TrashEntryBase {
  name: string;
  trashDir: string;
  infoPath: string;
  trashedPath: string;
}

export interface TrashEntryOk extends TrashEntryBase {
  status: 'ok';
  /** Absolute original location (a relative `Path=` joined with the trash's top directory). */
  originalPath: string;
  /** `Path=` as stored, percent-encoded. */
  encodedPath: string;
  deletedAt: Date;
}

export interface TrashEntryBroken extends TrashEntryBase {
  status: 'broken';
  problem: string;
}

export type TrashEntry = TrashEntryOk | TrashEntryBroken;

const INFO_SUFFIX = '.trashinfo';
const READ_BATCH = 64;

async function exists(path: string): Promise<boolean> {
  try {
    await fs.lstat(path);
    return true;
  } catch (error) {
    if (isErrno(error, 'ENOENT')) return false;
    throw error;
  }
}

async function readEntry(trashDir: string, file: string): Promise<TrashEntry> {
  const name = file.slice(0, -INFO_SUFFIX.length);
  const base: TrashEntryBase = {
    name,
    trashDir,
    infoPath: join(trashDir, 'info', file),
    trashedPath: join(trashDir, 'files', name),
  };
  const broken = (problem: string): TrashEntryBroken => ({ ...base, status: 'broken', problem });
  try {
    const parsed = parseTrashInfo(await fs.readFile(base.infoPath, 'utf8'));
    if (!parsed.ok) return broken(parsed.problem);
    if (!(await exists(base.trashedPath))) return broken('the item is missing from files/');
    const originalPath = originalPathFor(trashDir, parsed.info.path);
    return { ...base, status: 'ok', originalPath, encodedPath: parsed.info.encodedPath, deletedAt: parsed.info.deletedAt };
  } catch (error) {
    return broken(error instanceof Error ? error.message : String(error));
  }
}

export async function listTrash(trashDir: string): Promise<TrashEntry[]> {
  let files: string[];
  try {
    files = await fs.readdir(join(trashDir, 'info'));
  } catch (error) {
    if (isErrno(error, 'ENOENT')) return [];
    throw fsFailure(`cannot list ${trashDir}`, error);
  }
  const infos = files.filter((f) => f.endsWith(INFO_SUFFIX) && f.length > INFO_SUFFIX.length).sort();
  // In batches: a large trash must not open thousands of files at once (EMFILE).
  const entries: TrashEntry[] = [];
  for (let i = 0; i < infos.length; i += READ_BATCH) {
    entries.push(...(await Promise.all(infos.slice(i, i + READ_BATCH).map((file) => readEntry(trashDir, file)))));
  }
  return entries;
}
