import { FILE_BACKUP_MAX_SIZE_MB } from './settings.js';
import { fileTypeOf, hashFile, lstatOrUndefined, permissionBits } from './fs-util.js';
import type { AfterState, BackupEntry } from './manifest-schema.js';
import { readLinkQuietly, setTimesNsWithTouch, type SetTimesNs } from './metadata-ops.js';

/** Files above this are compared by size, mode and mtime only (hashing them would stall a commit). */
export const STATE_HASH_LIMIT = FILE_BACKUP_MAX_SIZE_MB.max * 1024 * 1024;

export interface ObserveOptions {
  hashLimit?: number;
  /** Puts a symlink's times back after reading its target (see readLinkQuietly). */
  setTimesNs?: SetTimesNs;
}

/** What is at `file` now, in the form manifests record after-states. Reads change no times. */
export async function observeState(file: string, options: ObserveOptions = {}): Promise<AfterState> {
  const hashLimit = options.hashLimit ?? STATE_HASH_LIMIT;
  const stats = await lstatOrUndefined(file);
  if (!stats) return { type: 'absent' };
  const type = fileTypeOf(stats);
  if (type === 'symlink') return { type: 'symlink', target: await readLinkQuietly(file, stats, options.setTimesNs ?? setTimesNsWithTouch) };
  if (type !== 'file') return { type: 'other', fileType: type };
  const sha256 = stats.size <= BigInt(hashLimit) ? (await hashFile(file)).sha256 : null;
  return {
    type: 'file',
    size: Number(stats.size),
    sha256,
    mode: permissionBits(stats),
    mtimeNs: stats.mtimeNs.toString(),
  };
}

/** The state an entry describes: the path as it was before the turn. */
export function beforeStateOf(entry: BackupEntry): AfterState {
  if (entry.kind === 'symlink') return { type: 'symlink', target: entry.linkTarget ?? '' };
  return { type: 'file', size: entry.size, sha256: entry.sha256, mode: entry.mode, mtimeNs: entry.mtimeNs };
}

/** Why two states differ, or undefined when they are the same. A missing hash compares by size, mode and mtime. */
export function stateDifference(expected: AfterState, actual: AfterState): string | undefined {
  if (expected.type === 'absent' && actual.type === 'absent') return undefined;
  if (expected.type === 'symlink' && actual.type === 'symlink') {
    return actual.target === expected.target ? undefined : `symlink now points to ${JSON.stringify(actual.target)}`;
  }
  if (expected.type === 'other' && actual.type === 'other' && expected.fileType === actual.fileType) return undefined;
  if (expected.type === 'file' && actual.type === 'file') {
    if (expected.size !== actual.size) return `size is ${actual.size}, expected ${expected.size}`;
    if (expected.sha256 !== null && actual.sha256 !== null && expected.sha256 !== actual.sha256) return 'content differs';
    if (expected.mode !== actual.mode) return `mode is ${actual.mode.toString(8)}, expected ${expected.mode.toString(8)}`;
    if (expected.mtimeNs !== actual.mtimeNs) return 'modification time differs';
    return undefined;
  }
  return `expected ${describe(expected)}, found ${describe(actual)}`;
}

function describe(state: AfterState): string {
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
