import { lstat } from 'node:fs/promises';
import path from 'node:path';
import { BrokerError, ErrorCodes, errnoOf, type PathKind } from '../../core/index.js';
import type { ResolveStrategy } from './strategies.js';
import { fsFailure, walk } from './walk.js';

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
  refuseProcSelf(p);
  return walk(p, { followFinal: true, allowMissingFinal: false });
}

/**
 * The parent's links followed and the final component kept as named, so an operation
 * on a symlink is judged on the link itself. The parent must be an existing directory.
 * A final `.`/`..`, the root itself, or a trailing slash (which makes the kernel follow
 * the final link) resolve fully instead, never to a path such as `/x/..`.
 */
export async function resolveThroughParent(p: string): Promise<string> {
  refuseProcSelf(p);
  const trimmed = p.replace(/\/+$/, '');
  const cut = trimmed.lastIndexOf('/');
  const name = trimmed.slice(cut + 1);
  if (trimmed === '' || name === '.' || name === '..') return resolveExisting(p);
  if (trimmed !== p) return resolveExistingOrCreatable(p);
  const parent = await walk(trimmed.slice(0, cut) || '/', { followFinal: true, allowMissingFinal: false });
  await requireDirectory(parent, p);
  return path.posix.join(parent, name);
}

/**
 * The real path when the path exists (links followed), else where a create would land:
 * the real parent plus the final name. A dangling final link is followed to the name it
 * points at, because creating through it (open O_CREAT, touch) makes the file there.
 */
export async function resolveExistingOrCreatable(p: string): Promise<string> {
  refuseProcSelf(p);
  return walk(p, { followFinal: true, allowMissingFinal: true });
}

/**
 * For `mkdir -p`: the deepest existing ancestor, resolved as the kernel would (links and
 * `..` included), plus the missing components. When nothing is missing this is
 * `through-parent` (the final name is judged as is).
 */
export async function resolveNearestAncestor(p: string): Promise<string> {
  refuseProcSelf(p);
  const components = p.split('/').filter(Boolean);
  for (let kept = components.length; kept >= 0; kept -= 1) {
    const prefix = `/${components.slice(0, kept).join('/')}`;
    let ancestor: string;
    try {
      ancestor = await walk(prefix, { followFinal: true, allowMissingFinal: false });
    } catch (error) {
      if (error instanceof BrokerError && error.code === ErrorCodes.PATH_NOT_FOUND && error.errno === 'ENOENT') continue;
      throw error;
    }
    if (kept === components.length) return resolveThroughParent(p);
    await requireDirectory(ancestor, p);
    // Missing components are plain names to be created; `..` among them is lexical.
    return path.posix.join(ancestor, ...components.slice(kept));
  }
  throw new BrokerError(ErrorCodes.PATH_NOT_FOUND, `no existing ancestor of ${p}`, { errno: 'ENOENT' });
}

export function resolveWith(strategy: ResolveStrategy, p: string): Promise<string> {
  switch (strategy) {
    case 'nearest-ancestor':
      return resolveNearestAncestor(p);
    case 'existing':
      return resolveExisting(p);
    case 'through-parent':
      return resolveThroughParent(p);
    case 'existing-or-creatable':
      return resolveExistingOrCreatable(p);
  }
}

/** What is at `p` now, without following a final link, and how many names a file has. */
export async function inspect(p: string): Promise<{ kind: PathKind; links?: number }> {
  try {
    const stats = await lstat(p);
    if (stats.isSymbolicLink()) return { kind: 'symlink' };
    if (stats.isFile()) return { kind: 'file', links: stats.nlink };
    if (stats.isDirectory()) return { kind: 'directory' };
    return { kind: 'other' };
  } catch (error) {
    if (errnoOf(error) === 'ENOENT') return { kind: 'absent' };
    throw fsFailure(error, p);
  }
}

/** What is at `p` now, without following a final link. */
export async function kindOf(p: string): Promise<PathKind> {
  return (await inspect(p)).kind;
}

async function requireDirectory(parent: string, raw: string): Promise<void> {
  let isDirectory: boolean;
  try {
    isDirectory = (await lstat(parent)).isDirectory();
  } catch (error) {
    throw fsFailure(error, raw);
  }
  if (!isDirectory) {
    throw new BrokerError(ErrorCodes.PATH_NOT_FOUND, `the parent of ${raw} is not a directory`, { errno: 'ENOTDIR' });
  }
}
