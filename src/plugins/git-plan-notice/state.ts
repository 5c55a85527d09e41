import path from 'node:path';
import { lstatQuietly, namesIn, repositoryGitDirs } from './repositories.js';

export { gitDirOf, lstatQuietly } from './repositories.js';

/*
 * Where git keeps a stopped rebase, `git am`, cherry-pick or revert, and how to tell
 * whether one changed: found on the disk, never through git (whose config the command
 * may have written).
 */

/** The folders of a git directory a stopped operation leaves, what it is, and how a person goes on or out. */
export const STOPPED_STATES = [
  { folder: 'rebase-merge', what: 'a stopped rebase', resume: 'git rebase --continue', abort: 'git rebase --abort' },
  { folder: 'rebase-apply', what: 'a stopped rebase or am', resume: 'git rebase --continue or git am --continue', abort: 'git rebase --abort or git am --abort' },
  { folder: 'sequencer', what: 'a stopped cherry-pick or revert', resume: 'git cherry-pick --continue or git revert --continue', abort: 'git cherry-pick --abort or git revert --abort' },
] as const;
export type StoppedState = (typeof STOPPED_STATES)[number];

/** A path naming one of those folders; most written paths do not, and are not split. */
const STATE_FOLDER_IN_PATH = /\/(?:rebase-merge|rebase-apply|sequencer)(?:\/|$)/;

/** What makes a folder a git directory: these names in it. */
const GIT_DIRECTORY_MARKS: ReadonlySet<string> = new Set(['HEAD', 'objects', 'commondir']);
/** The files continuing reads what it runs from: always looked at, however many others a folder holds. */
const KEY_FILES = ['git-rebase-todo', 'strategy', 'opts', 'todo'];
/** Entries of a stopped-operation folder looked at one by one; a folder with more is taken as changed each time. */
const MAX_WATCHED_ENTRIES = 10_000;

/** Every stopped-operation folder of the repository whose git directory is `gitDir`: its own, its common dir's, each linked worktree's and submodule's. */
export function stateFoldersOf(gitDir: string): string[] {
  return repositoryGitDirs(gitDir).flatMap(stateFoldersIn);
}

/** The stopped-operation folders a git directory `dir` may hold. */
export function stateFoldersIn(dir: string): string[] {
  return STOPPED_STATES.map((state) => path.join(dir, state.folder));
}

/**
 * The stopped-operation folder a changed path is in or names (its deepest component with
 * such a name), whether or not its parent is a git directory now: that is asked when the
 * turn is committed, since a command can take a git directory's `objects` away and put
 * it back.
 */
export function stateFolderAt(changed: string): string | undefined {
  if (!STATE_FOLDER_IN_PATH.test(changed)) return undefined;
  const parts = changed.split('/');
  for (let i = parts.length - 1; i > 1; i -= 1) {
    if (STOPPED_STATES.some((state) => state.folder === parts[i])) return parts.slice(0, i + 1).join('/');
  }
  return undefined;
}

/**
 * A git directory, where a stopped operation counts: it holds a `HEAD` and `objects` (a
 * repository's, a submodule's) or `commondir` (a linked worktree's). A reflog's or a
 * remote's `HEAD` folder is none, so a branch called `sequencer` is not taken for one.
 */
export function isGitDirectory(dir: string): boolean {
  return lstatQuietly(`${dir}/HEAD`) !== undefined && (lstatQuietly(`${dir}/objects`) !== undefined || lstatQuietly(`${dir}/commondir`) !== undefined);
}

/**
 * The stopped operations that stand in the git directories `written` paths lie in or
 * name (a restore's, say): each existing folder whose parent is a git directory. The
 * nearest git directory at or above a path counts whole, since bringing back its
 * `objects` or `HEAD` can make what it holds count again.
 */
export function stoppedOperationsAround(written: Iterable<string>): string[] {
  const folders = new Set<string>();
  const looked = new Set<string>();
  for (const file of written) {
    const named = stateFolderAt(file);
    if (named !== undefined) folders.add(named);
    for (let dir = path.dirname(file); !looked.has(dir); dir = path.dirname(dir)) {
      looked.add(dir);
      if (isGitDirectory(dir)) {
        for (const folder of stateFoldersIn(dir)) folders.add(folder);
        break;
      }
      if (dir === path.dirname(dir)) break;
    }
  }
  return [...folders].filter((folder) => lstatQuietly(folder) !== undefined && isGitDirectory(path.dirname(folder)));
}

/** The folder a change may make a git directory (its `HEAD`, `objects` or `commondir`), if the path names one. */
export function markedGitDirectory(changed: string): string | undefined {
  return GIT_DIRECTORY_MARKS.has(path.basename(changed)) ? path.dirname(changed) : undefined;
}

/** A folder's entries and each one's identity, enough to tell one created, changed or replaced since. */
export function folderIdentity(folder: string): string {
  const self = lstatQuietly(folder);
  if (!self) return 'absent';
  const parts = [identityOf(self)];
  if (self.isDirectory()) {
    const names = namesIn(folder);
    // Too many to look at each: never taken as unchanged.
    if (names.length > MAX_WATCHED_ENTRIES) return `${parts[0]}\nunwatched ${names.length} ${process.hrtime.bigint()}`;
    for (const name of new Set([...KEY_FILES, ...names.sort()])) parts.push(`${name}=${identityOf(lstatQuietly(path.join(folder, name)))}`);
  }
  return parts.join('\n');
}

function identityOf(stats: ReturnType<typeof lstatQuietly>): string {
  return stats ? `${stats.mode}:${stats.ino}:${stats.size}:${stats.mtimeNs}:${stats.ctimeNs}` : 'absent';
}
