import fs from 'node:fs/promises';
import path from 'node:path';
import type { RenamedEntry } from './manifest-schema.js';

/**
 * Where paths are in a turn that renamed directories whole (rename records, not one
 * entry per path inside). A path's entry names it as it was before the turn; the
 * directories renamed since carry it elsewhere. Only renames not expanded count: an
 * expanded one had every path of its tree recorded on its own.
 */

/** `path` is `dir` or lies below it. */
export function isAtOrUnder(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir === '/' ? '/' : `${dir}/`);
}

function moved(path: string, from: string, to: string): string {
  return path === from ? to : to + path.slice(from.length);
}

/**
 * The name, before the turn, of what is at `path` now: each rename (newest first) that
 * took it to where it is is undone. Undefined when `path` lies where a rename took a
 * directory away from: what stands there now is new, and has no such name.
 */
export function pathBeforeRenames(path: string, renames: readonly RenamedEntry[]): string | undefined {
  let at = path;
  for (let i = renames.length - 1; i >= 0; i--) {
    const rename = renames[i] as RenamedEntry;
    if (isAtOrUnder(at, rename.to)) at = moved(at, rename.to, rename.path);
    else if (isAtOrUnder(at, rename.path)) return undefined;
  }
  return at;
}

/** Where what was at `path` is after the renames from `first` on (all of them by default). */
export function pathAfterRenames(path: string, renames: readonly RenamedEntry[], first = 0): string {
  let at = path;
  for (let i = first; i < renames.length; i++) {
    const rename = renames[i] as RenamedEntry;
    if (isAtOrUnder(at, rename.path)) at = moved(at, rename.path, rename.to);
  }
  return at;
}

/** The rename records a turn still renames back whole, in order: each expanded line takes back the rename it marks, recorded before it. */
export function liveRenames(entries: readonly { kind: string }[]): RenamedEntry[] {
  const live: RenamedEntry[] = [];
  for (const entry of entries) {
    if (entry.kind !== 'renamed') continue;
    const rename = entry as RenamedEntry;
    if (!rename.expanded) live.push(rename);
    else {
      const marked = live.findIndex((other) => other.path === rename.path && other.to === rename.to);
      if (marked >= 0) live.splice(marked, 1);
    }
  }
  return live;
}

/** `dir` and every path below it, parents before what they hold; symlinks are not followed. Nothing when `dir` is gone. */
export async function treePaths(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (at: string): Promise<void> => {
    out.push(at);
    let names;
    try {
      names = await fs.readdir(at, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of names) {
      const child = path.join(at, entry.name);
      if (entry.isDirectory()) await walk(child);
      else out.push(child);
    }
  };
  if (await fs.lstat(dir).catch(() => undefined)) await walk(dir);
  return out;
}
