import { FILE_BACKUP_MAX_SIZE_MB } from './settings.js';
import { fileTypeOf, hashFile, lstatNowOrUndefined, permissionBits } from './fs-util.js';
import type { AfterState, TurnEntry } from './manifest-schema.js';
import { readLinkQuietly, readXattrs, setTimesNsWithTouch, type SetTimesNs, type XattrAccess } from './metadata-ops.js';

/** Files above this are compared by size, mode and mtime only (hashing them would stall a commit). */
export const STATE_HASH_LIMIT = FILE_BACKUP_MAX_SIZE_MB.max * 1024 * 1024;

export interface ObserveOptions {
  hashLimit?: number;
  /** false: never hash (size, mode, mtime, owner and xattrs decide). A created file's after-state is taken so: cheap. */
  hash?: boolean;
  /** Puts a symlink's times back after reading its target (see readLinkQuietly). */
  setTimesNs?: SetTimesNs;
  /** Record the xattrs of files and directories too (compared only when both states hold them). */
  xattrs?: XattrAccess | undefined;
}

/** What is at `file` now, in the form manifests record after-states. Reads change no times. */
export async function observeState(file: string, options: ObserveOptions = {}): Promise<AfterState> {
  const hashLimit = options.hashLimit ?? STATE_HASH_LIMIT;
  // Synchronous: a commit observes every path of its turn, and a thread-pool round trip per
  // lstat cost it several times the lstat itself (the caller yields to the event loop).
  const stats = lstatNowOrUndefined(file);
  if (!stats) return { type: 'absent' };
  const type = fileTypeOf(stats);
  const uid = Number(stats.uid);
  const gid = Number(stats.gid);
  if (type === 'symlink') return { type: 'symlink', target: await readLinkQuietly(file, stats, options.setTimesNs ?? setTimesNsWithTouch), uid, gid };
  // Fields spelled out, no `...owner` in the middle: Node 20's V8 pays a runtime call per field after a spread (a commit observes every file).
  let state: AfterState;
  if (type === 'directory') state = { type: 'other', fileType: 'directory', mode: permissionBits(stats), uid, gid, mtimeNs: stats.mtimeNs.toString() };
  else if (type === 'unknown') return { type: 'other', fileType: type };
  // A FIFO, socket or device: what a rewind puts back, and so compares.
  else if (type !== 'file') state = { type: 'other', fileType: type, mode: permissionBits(stats), uid, gid, mtimeNs: stats.mtimeNs.toString(), rdev: Number(stats.rdev) };
  else {
    const sha256 = options.hash !== false && stats.size <= BigInt(hashLimit) ? await hashOrNull(file, Number(stats.size)) : null;
    const ino = stats.ino.toString();
    const btimeNs = stats.birthtimeNs.toString();
    const ctimeNs = stats.ctimeNs.toString();
    state = { type: 'file', size: Number(stats.size), sha256, mode: permissionBits(stats), mtimeNs: stats.mtimeNs.toString(), ino, btimeNs, ctimeNs, uid, gid };
  }
  if (options.xattrs) state.xattrs = readXattrs(options.xattrs, file) ?? null;
  return state;
}

/**
 * The hash of what `file` holds, or null when its bytes cannot be read as the file its
 * size says it is (a /proc file reached through a parent made a symlink, one that would
 * block, or one swapped meanwhile): size, mode and mtime then decide, and a commit or a
 * view never waits on it or reads without end.
 */
async function hashOrNull(file: string, size: number): Promise<string | null> {
  try {
    return (await hashFile(file, size)).sha256;
  } catch {
    return null;
  }
}

/** The state an entry describes: the path as it was before the turn. */
export function beforeStateOf(entry: TurnEntry): AfterState {
  switch (entry.kind) {
    case 'absent':
      return { type: 'absent' };
    case 'directory':
    case 'renamed':
      return { type: 'other', fileType: 'directory', mode: entry.mode, uid: entry.uid, gid: entry.gid, mtimeNs: entry.mtimeNs, xattrs: entry.xattrs };
    case 'special':
      return { type: 'other', fileType: entry.fileType, mode: entry.mode, uid: entry.uid, gid: entry.gid, mtimeNs: entry.mtimeNs, rdev: entry.rdev, xattrs: entry.xattrs };
    case 'metadata':
      // The content was not kept: size, mode, mtime, owner and xattrs tell whether it is as before.
      return { type: 'file', size: entry.size, sha256: null, mode: entry.mode, mtimeNs: entry.mtimeNs, uid: entry.uid, gid: entry.gid, xattrs: entry.xattrs };
    case 'symlink':
      return { type: 'symlink', target: entry.linkTarget ?? '', uid: entry.uid, gid: entry.gid };
    case 'file':
      return {
        type: 'file',
        size: entry.size,
        sha256: entry.sha256,
        mode: entry.mode,
        mtimeNs: entry.mtimeNs,
        uid: entry.uid,
        gid: entry.gid,
        xattrs: entry.xattrs,
      };
  }
}

/**
 * Why two states differ, or undefined when they are the same. A missing hash compares
 * by size, mode and mtime (and, for the same inode, ctime); owner and xattrs count when
 * both states recorded them.
 * Directories compare type, mode, owner and xattrs, not mtime (see `directoryTimesDiffer`);
 * special files their device number and mtime too.
 */
export function stateDifference(expected: AfterState, actual: AfterState): string | undefined {
  if (expected.type === 'absent' && actual.type === 'absent') return undefined;
  if (expected.type === 'symlink' && actual.type === 'symlink') {
    if (actual.target !== expected.target) return `symlink now points to ${JSON.stringify(actual.target)}`;
    return ownerDifference(expected, actual);
  }
  if (expected.type === 'other' && actual.type === 'other' && expected.fileType === actual.fileType) {
    if (expected.rdev !== undefined && actual.rdev !== undefined && expected.rdev !== actual.rdev) return `device number is ${actual.rdev}, expected ${expected.rdev}`;
    if (expected.mode !== undefined && actual.mode !== undefined && expected.mode !== actual.mode) return modeDifference(expected.mode, actual.mode);
    const special = expected.fileType !== 'directory';
    if (special && expected.mtimeNs !== undefined && actual.mtimeNs !== undefined && expected.mtimeNs !== actual.mtimeNs) return 'modification time differs';
    return ownerDifference(expected, actual) ?? xattrDifference(expected.xattrs, actual.xattrs);
  }
  if (expected.type === 'file' && actual.type === 'file') {
    if (expected.size !== actual.size) return `size is ${actual.size}, expected ${expected.size}`;
    if (expected.sha256 !== null && actual.sha256 !== null && expected.sha256 !== actual.sha256) return 'content differs';
    if (expected.mode !== actual.mode) return modeDifference(expected.mode, actual.mode);
    if (expected.mtimeNs !== actual.mtimeNs) return 'modification time differs';
    if (sameInodeChangedSince(expected, actual)) return 'written since (the same file, a later status change time; no hash to compare content)';
    return ownerDifference(expected, actual) ?? xattrDifference(expected.xattrs, actual.xattrs);
  }
  return `expected ${describeState(expected)}, found ${describeState(actual)}`;
}

type FileState = Extract<AfterState, { type: 'file' }>;

/**
 * Without a hash, a write of the same size with the old mtime put back (`touch -d`,
 * `cp -p` over it) would pass for the file as the turn left it. Its status change time
 * gives it away. Only for the same file (inode number and birth time, as inode numbers
 * are reused): a restore makes every file afresh, which must not read as a change for
 * the turns before it. Where no birth time is kept, nothing tells the same file apart.
 */
function sameInodeChangedSince(expected: FileState, actual: FileState): boolean {
  if (expected.sha256 !== null || expected.ctimeNs === undefined || actual.ctimeNs === undefined) return false;
  const sameFile = expected.ino !== undefined && expected.ino === actual.ino && expected.btimeNs !== undefined && expected.btimeNs !== '0' && expected.btimeNs === actual.btimeNs;
  return sameFile && expected.ctimeNs !== actual.ctimeNs;
}

/** Whether both states are directories with recorded, different mtimes. */
export function directoryTimesDiffer(expected: AfterState, actual: AfterState): boolean {
  if (expected.type !== 'other' || actual.type !== 'other' || expected.fileType !== 'directory' || actual.fileType !== 'directory') return false;
  return expected.mtimeNs !== undefined && actual.mtimeNs !== undefined && expected.mtimeNs !== actual.mtimeNs;
}

export function isDirectoryState(state: AfterState): boolean {
  return state.type === 'other' && state.fileType === 'directory';
}

function modeDifference(expected: number, actual: number): string {
  return `mode is ${actual.toString(8)}, expected ${expected.toString(8)}`;
}

function ownerDifference(expected: { uid?: number | undefined; gid?: number | undefined }, actual: { uid?: number | undefined; gid?: number | undefined }): string | undefined {
  const uidDiffers = expected.uid !== undefined && actual.uid !== undefined && expected.uid !== actual.uid;
  const gidDiffers = expected.gid !== undefined && actual.gid !== undefined && expected.gid !== actual.gid;
  if (!uidDiffers && !gidDiffers) return undefined;
  return `owner is ${actual.uid ?? '?'}:${actual.gid ?? '?'}, expected ${expected.uid ?? '?'}:${expected.gid ?? '?'}`;
}

type Xattrs = Record<string, string> | null | undefined;

function xattrDifference(expected: Xattrs, actual: Xattrs): string | undefined {
  // Not recorded on one side (no xattr access, or an older manifest): nothing to compare.
  if (expected === null || expected === undefined || actual === null || actual === undefined) return undefined;
  const names = new Set([...Object.keys(expected), ...Object.keys(actual)]);
  const changed = [...names].filter((name) => expected[name] !== actual[name]).sort();
  return changed.length === 0 ? undefined : `extended attributes differ (${changed.join(', ')})`;
}

export function describeState(state: AfterState): string {
  switch (state.type) {
    case 'absent':
      return 'nothing';
    case 'file':
      return 'a regular file';
    case 'symlink':
      return 'a symlink';
    case 'other':
      return `a ${state.fileType}`;
  }
}
