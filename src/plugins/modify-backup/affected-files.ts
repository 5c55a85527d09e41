import { promises as fs } from 'node:fs';
import { join, relative } from 'node:path';
import type { ResolvedRequest } from '../../core/index.js';

/** The paths a request may create: written targets that do not exist yet. */
export function createdPaths(resolved: ResolvedRequest): string[] {
  return resolved.targets.filter((t) => t.access === 'write' && t.kind === 'absent').map((t) => t.resolved);
}

/**
 * The existing files a request is about to change: every written or deleted target
 * that is a file or symlink now, plus — for recursive deletes and copies — the files
 * inside the trees they reach. Directories themselves hold no content to back up.
 */
export async function affectedFiles(resolved: ResolvedRequest): Promise<string[]> {
  const { request, targets } = resolved;
  const paths: string[] = [];
  for (const target of targets) {
    if (target.access === 'read') continue;
    if (target.kind === 'file' || target.kind === 'symlink') paths.push(target.resolved);
    else if (target.kind === 'directory' && request.operation === 'delete' && request.options.recursive) {
      await collect(target.resolved, paths);
    }
  }
  const from = targets.find((t) => t.role === 'from');
  const to = targets.find((t) => t.role === 'to');
  if (request.operation === 'copy' && request.options.recursive && from?.kind === 'directory' && to?.kind === 'directory') {
    // A tree copy overwrites the destination's files that share a relative path with the source.
    const sources: string[] = [];
    await collect(from.resolved, sources);
    for (const source of sources) {
      const destination = join(to.resolved, relative(from.resolved, source));
      if (await isFileOrLink(destination)) paths.push(destination);
    }
  }
  return paths;
}

async function collect(dir: string, into: string[]): Promise<void> {
  for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) await collect(path, into);
    else if (entry.isFile() || entry.isSymbolicLink()) into.push(path);
  }
}

async function isFileOrLink(path: string): Promise<boolean> {
  try {
    const info = await fs.lstat(path);
    return info.isFile() || info.isSymbolicLink();
  } catch {
    return false;
  }
}
