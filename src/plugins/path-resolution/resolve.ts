import { lstatSync, type Stats } from 'node:fs';
import path from 'node:path';
import { BrokerError, ErrorCodes, type PathKind } from '../../core/index.js';
import type { ResolveStrategy } from './strategies.js';
import { fsFailure, walkSync, type EntryStats, type WalkResult } from './walk.js';

/**
 * Absolute and lexically normalised: `.`, `..` and duplicate slashes removed, no
 * trailing slash except for `/`. Never touches the file system, so it is the path as the
 * client named it (a link's own path stays the link's).
 */
export function lexicalPath(p: string): string {
  if (!p.startsWith('/')) {
    throw new BrokerError(ErrorCodes.PATH_UNRESOLVED, `path must be absolute: ${p}`);
  }
  const normal = path.posix.normalize(p);
  return normal.length > 1 && normal.endsWith('/') ? normal.slice(0, -1) : normal;
}

const SELF_PREFIXES = ['/proc/self', '/proc/thread-self'];

/**
 * `/proc/self` in a request means the client's own process; resolved here it would name
 * the broker's. The kernel front end translates it before it arrives, so any that is
 * left is refused.
 */
export function refuseProcSelf(p: string): void {
  const lexical = lexicalPath(p);
  if (SELF_PREFIXES.some((prefix) => lexical === prefix || lexical.startsWith(`${prefix}/`))) {
    throw new BrokerError(ErrorCodes.PATH_UNRESOLVED, `${p} refers to the calling process; it cannot be resolved in the broker`);
  }
}

/** Every link followed; the path must exist. */
export async function resolveExisting(p: string): Promise<string> {
  return existing(p).path;
}

function existing(p: string): WalkResult {
  refuseProcSelf(p);
  return walkSync(p, { followFinal: true, allowMissingFinal: false });
}

/**
 * The parent's links followed and the final component kept as named, so an operation
 * on a symlink is judged on the link itself. The parent must be an existing directory.
 * A final `.`/`..`, the root itself, or a trailing slash (which makes the kernel follow
 * the final link) resolve fully instead, never to a path such as `/x/..`.
 */
export async function resolveThroughParent(p: string): Promise<string> {
  return throughParent(p).path;
}

function throughParent(p: string): WalkResult {
  refuseProcSelf(p);
  const trimmed = p.replace(/\/+$/, '');
  const cut = trimmed.lastIndexOf('/');
  const name = trimmed.slice(cut + 1);
  if (trimmed === '' || name === '.' || name === '..') return existing(p);
  if (trimmed !== p) return existingOrCreatable(p);
  const parent = walkSync(trimmed.slice(0, cut) || '/', { followFinal: true, allowMissingFinal: false });
  requireDirectory(parent, p);
  const joined = path.posix.join(parent.path, name);
  return { path: joined, stats: lstatOrNull(joined) };
}

/**
 * The real path when the path exists (links followed), else where a create would land:
 * the real parent plus the final name. A dangling final link is followed to the name it
 * points at, because creating through it (open O_CREAT, touch) makes the file there.
 */
export async function resolveExistingOrCreatable(p: string): Promise<string> {
  return existingOrCreatable(p).path;
}

function existingOrCreatable(p: string): WalkResult {
  refuseProcSelf(p);
  return walkSync(p, { followFinal: true, allowMissingFinal: true });
}

/**
 * For `mkdir -p`: the deepest existing ancestor, resolved as the kernel would (links and
 * `..` included), plus the missing components. When nothing is missing this is
 * `through-parent` (the final name is judged as is).
 */
export async function resolveNearestAncestor(p: string): Promise<string> {
  return nearestAncestor(p).path;
}

function nearestAncestor(p: string): WalkResult {
  refuseProcSelf(p);
  const components = p.split('/').filter(Boolean);
  for (let kept = components.length; kept >= 0; kept -= 1) {
    const prefix = `/${components.slice(0, kept).join('/')}`;
    let ancestor: WalkResult;
    try {
      ancestor = walkSync(prefix, { followFinal: true, allowMissingFinal: false });
    } catch (error) {
      if (error instanceof BrokerError && error.code === ErrorCodes.PATH_NOT_FOUND && error.errno === 'ENOENT') continue;
      throw error;
    }
    if (kept === components.length) return throughParent(p);
    requireDirectory(ancestor, p);
    // Missing components are plain names to be created; `..` among them is lexical.
    const joined = path.posix.join(ancestor.path, ...components.slice(kept));
    return { path: joined, stats: lstatOrNull(joined) };
  }
  throw new BrokerError(ErrorCodes.PATH_NOT_FOUND, `no existing ancestor of ${p}`, { errno: 'ENOENT' });
}

/**
 * Resolve by a strategy, keeping what the walk saw at the end (the `lstat` `inspect`
 * would repeat). Synchronous: see `walkSync`.
 */
export function resolveWithStats(strategy: ResolveStrategy, p: string): WalkResult {
  switch (strategy) {
    case 'nearest-ancestor':
      return nearestAncestor(p);
    case 'existing':
      return existing(p);
    case 'through-parent':
      return throughParent(p);
    case 'existing-or-creatable':
      return existingOrCreatable(p);
  }
}

export async function resolveWith(strategy: ResolveStrategy, p: string): Promise<string> {
  return resolveWithStats(strategy, p).path;
}

/** What is at `p` now, without following a final link, and how many names a file has. */
export async function inspect(p: string): Promise<{ kind: PathKind; links?: number }> {
  return describeStats(lstatOrNull(p));
}

/** The kind (and link count of a file or special file) an `lstat` result stands for; `null`: absent. */
export function describeStats(stats: EntryStats | null): { kind: PathKind; links?: number } {
  if (stats === null) return { kind: 'absent' };
  if (stats.isSymbolicLink()) return { kind: 'symlink' };
  if (stats.isFile()) return { kind: 'file', links: stats.nlink };
  if (stats.isDirectory()) return { kind: 'directory' };
  return { kind: 'other', links: stats.nlink };
}

/** What is at `p` now, without following a final link. */
export async function kindOf(p: string): Promise<PathKind> {
  return (await inspect(p)).kind;
}

function lstatOrNull(p: string): Stats | null {
  try {
    return lstatSync(p, { throwIfNoEntry: false }) ?? null;
  } catch (error) {
    throw fsFailure(error, p);
  }
}

function requireDirectory(parent: WalkResult, raw: string): void {
  // The walk followed every link to the parent, so what it saw there is the directory itself.
  const stats = parent.stats ?? lstatOrNull(parent.path);
  if (stats === null) throw new BrokerError(ErrorCodes.PATH_NOT_FOUND, `${raw} does not exist (ENOENT)`, { errno: 'ENOENT' });
  if (!stats.isDirectory()) {
    throw new BrokerError(ErrorCodes.PATH_NOT_FOUND, `the parent of ${raw} is not a directory`, { errno: 'ENOTDIR' });
  }
}
