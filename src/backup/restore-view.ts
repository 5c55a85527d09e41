import fs from 'node:fs/promises';
import path from 'node:path';
import { errorCode } from './fs-util.js';
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
  /** Record that `file` would now be in `state` (dry runs only). */
  assume(file: string, state: AfterState): void;
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

/** The file system itself. */
export function realView(options: ObserveOptions): TreeView {
  return {
    observe: (file) => observeState(file, options),
    children: readNames,
    assume: () => undefined,
  };
}

/**
 * The file system with changes laid over it that a dry run of earlier turns would have
 * made. Good enough to tell conflicts and emptiness apart; it never touches the disk.
 */
export function overlayView(options: ObserveOptions): TreeView {
  const assumed = new Map<string, AfterState>();
  /** The assumed state of `file` or of an ancestor that hides it (absent or not a directory). */
  const lookup = (file: string): AfterState | undefined => {
    const own = assumed.get(file);
    if (own) return own;
    for (let dir = path.dirname(file); dir !== path.dirname(dir); dir = path.dirname(dir)) {
      const above = assumed.get(dir);
      if (above && !isDirectoryState(above)) return { type: 'absent' };
      // An ancestor assumed to be a (re)created directory holds what the real one holds.
    }
    return undefined;
  };
  return {
    observe: async (file) => lookup(file) ?? observeState(file, options),
    children: async (dir) => {
      const state = lookup(dir);
      if (state && !isDirectoryState(state)) return [];
      const names = new Set(await readNames(dir));
      for (const [file, fileState] of assumed) {
        if (path.dirname(file) !== dir) continue;
        const name = path.basename(file);
        if (fileState.type === 'absent') names.delete(name);
        else names.add(name);
      }
      return [...names];
    },
    assume: (file, state) => void assumed.set(file, state),
  };
}
