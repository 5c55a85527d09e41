import fs from 'node:fs/promises';
import path from 'node:path';
import { errorCode, lstatOrUndefined } from './fs-util.js';
import { isDirectoryState, observeState, type ObserveOptions } from './file-state.js';
import type { AfterState } from './manifest-schema.js';

/**
 * What a rewind plan looks at: the file system, or (for a dry run of several turns) the
 * file system as it would be once the turns planned before were applied.
 */
export interface TreeView {
  observe(file: string): Promise<AfterState>;
  /** Names in `dir` (none when it is not a directory). */
  children(dir: string): Promise<string[]>;
  /** What stands at `file`, a final symlink not followed: enough to check a parent chain. */
  kindOf(file: string): Promise<NodeKind>;
  /** The existing directory `dir` with every symlink above it resolved. */
  realpath(dir: string): Promise<string>;
  /** Record that `file` would now be in `state` (dry runs only). */
  assume(file: string, state: AfterState): void;
  /** Record that what is at `from` (a directory and all it holds) would now be at `to` (plans through an overlay only). */
  move(from: string, to: string): void;
  /** The inode number of what is on disk where the view has `file` (undefined: nothing there). */
  inodeOf(file: string): Promise<string | undefined>;
}

async function inodeAt(file: string): Promise<string | undefined> {
  return (await lstatOrUndefined(file))?.ino.toString();
}

export type NodeKind = 'directory' | 'symlink' | 'file' | 'absent';

async function lstatKind(file: string): Promise<NodeKind> {
  const stats = await lstatOrUndefined(file);
  if (!stats) return 'absent';
  return stats.isDirectory() ? 'directory' : stats.isSymbolicLink() ? 'symlink' : 'file';
}

/** The file system's own answers to a parent-chain check. */
export const diskParents: Pick<TreeView, 'kindOf' | 'realpath'> = { kindOf: lstatKind, realpath: (dir) => fs.realpath(dir) };

function kindOfState(state: AfterState): NodeKind {
  if (isDirectoryState(state)) return 'directory';
  return state.type === 'absent' || state.type === 'symlink' ? state.type : 'file';
}

async function readNames(dir: string): Promise<string[]> {
  try {
    return await fs.readdir(dir);
  } catch (error) {
    const code = errorCode(error);
    if (code === 'ENOENT' || code === 'ENOTDIR') return [];
    throw error;
  }
}

/** The real view's `move`, which moves nothing: a plan that must see moves plans through an overlay instead. */
export const realMove = (): void => undefined;

/** The file system itself. */
export function realView(options: ObserveOptions): TreeView {
  return {
    observe: (file) => observeState(file, options),
    children: readNames,
    ...diskParents,
    assume: () => undefined,
    move: realMove,
    inodeOf: inodeAt,
  };
}

/**
 * The file system with changes laid over it that a dry run of earlier turns would have
 * made. Good enough to tell conflicts and emptiness apart; it never touches the disk.
 */
export function overlayView(options: ObserveOptions): TreeView {
  const assumed = new Map<string, AfterState>();
  /** Directories assumed moved (a rename back), in order. */
  const moves: Array<{ from: string; to: string }> = [];
  /** Where on disk what the overlay has at `file` is: undefined when a move left nothing there. */
  const onDisk = (file: string): string | undefined => {
    let at = file;
    for (let i = moves.length - 1; i >= 0; i--) {
      const { from, to } = moves[i] as { from: string; to: string };
      if (at === to || at.startsWith(`${to}/`)) at = from + at.slice(to.length);
      else if (at === from || at.startsWith(`${from}/`)) return undefined;
    }
    return at;
  };
  /** The assumed state of `file` or of an ancestor that hides it (absent or not a directory). */
  const lookup = (file: string): AfterState | undefined => {
    const own = assumed.get(file);
    if (own) return own;
    for (let dir = path.dirname(file); dir !== path.dirname(dir); dir = path.dirname(dir)) {
      const above = assumed.get(dir);
      if (above && !isDirectoryState(above)) return { type: 'absent' };
      // An ancestor assumed to be a (re)created directory holds what the real one holds.
    }
    return onDisk(file) === undefined ? { type: 'absent' } : undefined;
  };
  const real = (file: string) => onDisk(file) ?? file;
  return {
    observe: async (file) => lookup(file) ?? observeState(real(file), options),
    children: async (dir) => {
      const state = lookup(dir);
      if (state && !isDirectoryState(state)) return [];
      const names = new Set(await readNames(real(dir)));
      for (const { from, to } of moves) {
        if (path.dirname(from) === dir) names.delete(path.basename(from));
        if (path.dirname(to) === dir) names.add(path.basename(to));
      }
      for (const [file, fileState] of assumed) {
        if (path.dirname(file) !== dir) continue;
        const name = path.basename(file);
        if (fileState.type === 'absent') names.delete(name);
        else names.add(name);
      }
      return [...names];
    },
    kindOf: async (file) => {
      const state = lookup(file);
      return state ? kindOfState(state) : lstatKind(real(file));
    },
    // A directory the earlier turns' steps would make, or move, stands at its own name, under its parent's real path.
    realpath: async function realpath(dir): Promise<string> {
      const state = lookup(dir);
      const movedHere = real(dir) !== dir;
      if (((state && isDirectoryState(state)) || movedHere) && dir !== path.dirname(dir)) return path.join(await realpath(path.dirname(dir)), path.basename(dir));
      return fs.realpath(dir);
    },
    assume: (file, state) => void assumed.set(file, state),
    move: (from, to) => {
      // What earlier steps assumed of the tree goes along with it.
      for (const [file, state] of [...assumed]) {
        if (file !== from && !file.startsWith(`${from}/`)) continue;
        assumed.delete(file);
        assumed.set(to + file.slice(from.length), state);
      }
      moves.push({ from, to });
    },
    inodeOf: async (file) => (lookup(file) ? undefined : inodeAt(real(file))),
  };
}
