import { lstatSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/*
 * Which git directories make up a repository, found on the disk, never through git
 * (whose config the command may have written): the git-plan-notice plugin follows their
 * stopped operations, file-safety what their config names.
 */

/** Linked worktrees, and folders under `modules` and in each of them, looked at per repository. */
export const MAX_ENTRIES = 256;

/** The git directory of the repository `dir` is in (its `.git` folder, or where a `.git` file points), if any. */
export function gitDirOf(dir: string): string | undefined {
  for (let at = dir; ; at = path.dirname(at)) {
    const found = dotGitAt(at);
    if (found !== 'none') return found;
    if (at === path.dirname(at)) return undefined;
  }
}

/** What `dir/.git` names: a git directory, `none` when there is no `.git`, undefined when a `.git` file names nothing readable. */
export function dotGitAt(dir: string): string | 'none' | undefined {
  const dotGit = path.join(dir, '.git');
  const stats = lstatQuietly(dotGit);
  if (stats?.isDirectory()) return dotGit;
  if (!stats?.isFile()) return 'none';
  const pointer = /^gitdir:[ \t]*(.+?)[ \t]*$/m.exec(readSmall(dotGit) ?? '');
  return pointer?.[1] ? path.resolve(dir, pointer[1]) : undefined;
}

/** Where a git directory takes its config and hooks from: what its `commondir` names, else itself. */
export function commonDirOf(gitDir: string): string {
  const commonText = readSmall(path.join(gitDir, 'commondir'))?.trim();
  return commonText ? path.resolve(gitDir, commonText) : gitDir;
}

/** A linked worktree's folder, as its git directory's `gitdir` file names it (the worktree's `.git` file). */
export function linkedWorkTreeOf(gitDir: string): string | undefined {
  const text = readSmall(path.join(gitDir, 'gitdir'))?.trim();
  return text ? path.dirname(path.resolve(gitDir, text)) : undefined;
}

/** The git directories of the repository whose git directory is `gitDir`: itself, its common dir, each linked worktree's and each submodule's (nested too), a bounded number. */
export function repositoryGitDirs(gitDir: string): string[] {
  const common = commonDirOf(gitDir);
  const dirs = new Set([gitDir, common]);
  for (const name of namesIn(path.join(common, 'worktrees')).slice(0, MAX_ENTRIES)) dirs.add(path.join(common, 'worktrees', name));
  for (const dir of [...dirs]) for (const module of submoduleGitDirs(dir)) dirs.add(module);
  return [...dirs];
}

/** The submodules' git dirs under `gitDir`'s `modules` (a submodule's name may hold slashes; nested ones too), a bounded number. */
function submoduleGitDirs(gitDir: string): string[] {
  const found: string[] = [];
  const queue = [path.join(gitDir, 'modules')];
  for (let looked = 0; queue.length > 0 && looked < MAX_ENTRIES; looked += 1) {
    const dir = queue.shift() as string;
    if (lstatQuietly(path.join(dir, 'HEAD'))) {
      found.push(dir);
      queue.push(path.join(dir, 'modules'));
      continue;
    }
    for (const name of namesIn(dir).slice(0, MAX_ENTRIES)) if (lstatQuietly(path.join(dir, name))?.isDirectory()) queue.push(path.join(dir, name));
  }
  return found;
}

/** What is at `file`, or undefined when nothing can be seen there (missing, a file in the way, no permission). */
export function lstatQuietly(file: string) {
  try {
    return lstatSync(file, { bigint: true, throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

export function namesIn(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** A small regular file's text (`.git` pointer, `commondir`, `gitdir`), never through a symlink. */
function readSmall(file: string): string | undefined {
  try {
    const stats = lstatSync(file);
    return stats.isFile() && stats.size <= 4096 ? readFileSync(file, 'utf8') : undefined;
  } catch {
    return undefined;
  }
}
