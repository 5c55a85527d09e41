import { lstatSync, readlinkSync, realpathSync } from 'node:fs';
import path from 'node:path';
import type { Decision, ResolvedRequest, ResolvedTarget } from '../../core/index.js';
import { stateFolderAt } from '../git-plan-notice/index.js';
import type { Protection } from './mandatory.js';

/*
 * Git directories beyond `.git`: git takes any folder holding a `HEAD` for a repository
 * (a bare one, a `--separate-git-dir`, the worktrees' and submodules' git dirs) and obeys
 * its config and hooks. The protections here find such folders on the disk; the fixed
 * `.git` patterns are in mandatory.ts.
 */

/** In a git directory, the names git takes config, hooks and remotes from (see GIT_PROTECTED_PATTERNS in mandatory.ts). */
export const GIT_DIR_CODE_NAMES: ReadonlySet<string> = new Set(['config', 'config.worktree', 'commondir', 'hooks', 'remotes', 'branches']);
const GIT_DIR_CODE_NAME_IN_PATH = /\/(?:config|config\.worktree|commondir|hooks|remotes|branches)(?:\/|$)/;
/** Of those, the directories: what lies beneath them counts. */
const GIT_DIR_CODE_FOLDERS: ReadonlySet<string> = new Set(['hooks', 'remotes', 'branches']);

/** Whether `dir` holds a `HEAD` (any kind of file): true, false, or undefined when the look failed otherwise. */
function headIn(dir: string): boolean | undefined {
  try {
    lstatSync(`${dir === '/' ? '' : dir}/HEAD`);
    return true;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'ENOENT' || code === 'ENOTDIR' ? false : undefined;
  }
}

/** The folders at or above `dir` that hold a `HEAD`, nearest first; undefined when a look failed. */
function gitRootsOf(dir: string): string[] | undefined {
  const roots: string[] = [];
  for (let at = dir; ; at = path.posix.dirname(at)) {
    const found = headIn(at);
    if (found === undefined) return undefined;
    if (found) roots.push(at);
    if (at === '/') return roots;
  }
}

/** Whether `dir` or a folder above it holds a `HEAD`, looking no further than the first; undefined when a look failed. */
function inGitDirectory(dir: string): boolean | undefined {
  for (let at = dir; ; at = path.posix.dirname(at)) {
    const found = headIn(at);
    if (found !== false) return found;
    if (at === '/') return false;
  }
}

/** A git directory's own data, where names are branch names and hashes, not config. */
const GIT_DATA_FOLDERS: ReadonlySet<string> = new Set(['refs', 'logs', 'objects']);

/**
 * Where `dir` stands among git directories: `none` outside any; `data` under the `refs`,
 * `logs` or `objects` of the outermost one (`.git/logs` holds a `HEAD` too, the reflog's,
 * and so does `refs/remotes/origin`); `inside` in one otherwise; `unknown` when a look
 * failed. Only the outermost decides: a command can put a `HEAD` anywhere inside a git
 * directory, and one planted above a submodule's git dir at `…/src/objects/lib` must not
 * make that git dir's config data.
 */
function gitPlaceOf(dir: string, roots = gitRootsOf(dir)): 'none' | 'data' | 'inside' | 'unknown' {
  if (roots === undefined) return 'unknown';
  const outermost = roots.at(-1);
  if (outermost === undefined) return 'none';
  return GIT_DATA_FOLDERS.has(path.posix.relative(outermost, dir).split('/')[0] ?? '') ? 'data' : 'inside';
}

/**
 * Git takes any folder holding a valid `HEAD` (with `objects` and `refs`) for a
 * repository, a bare one, and obeys its config and hooks when run there: a `docs/HEAD`
 * makes `git status` in `docs` run `docs/config`'s fsmonitor. Writing a `HEAD` therefore
 * needs approval, unless it goes into a git directory already (a `.git`, or a folder at
 * or above it that holds a `HEAD`: a separate git dir's `logs/HEAD`, or its `HEAD` being
 * updated by a rename over it), whose config and hooks are protected already. Removing a
 * `HEAD` needs approval too, but in a git directory's `refs` or `logs` (a remote's `HEAD`,
 * the reflog): without it a folder's config and hooks would no longer count as a git
 * directory's, while worktrees still use them. A look at the disk that fails asks.
 */
export function gitDirectoryHead(): Protection {
  return {
    id: 'git-directory-head',
    verdict: 'prompt',
    reason: 'the HEAD of a git directory: git obeys the config and hooks of a folder that holds one, and only then are they protected',
    covers: (form, access) => {
      if (path.posix.basename(form) !== 'HEAD' || !form.startsWith('/')) return false;
      const dir = path.posix.dirname(form);
      if (access === 'delete') return dir === '/' || gitPlaceOf(dir, gitRootsOf(path.posix.dirname(dir))) !== 'data';
      if (form.split('/').includes('.git')) return false;
      return inGitDirectory(dir) !== true;
    },
    holds: () => false,
    samples: (bases) => bases.map((base) => `${base}/HEAD`),
  };
}

/**
 * In a git directory (a folder holding a `HEAD`, or anything below one: a `.git`, a
 * separate git dir, a bare repository, and the worktrees' and submodules' git dirs
 * inside them), `config`, `config.worktree`, `commondir`, `hooks`, `remotes` and
 * `branches` are protected like `.git`'s, except under its `refs`, `logs` and `objects`
 * (a branch may be called `hooks`). Below a git directory it does not matter whether the
 * folder holds a `HEAD` itself. Whether a `HEAD` is there is looked up only for paths
 * with one of these names; a look that fails counts as there.
 */
export function gitDirectoryFiles(): Protection {
  const protectedIn = (dir: string): boolean => {
    const place = gitPlaceOf(dir);
    return place === 'inside' || place === 'unknown';
  };
  return {
    id: 'git-directory-files',
    verdict: 'prompt',
    reason: 'a git hook or git configuration (its folder is in a git directory: one holding a HEAD)',
    covers: (form) => {
      // Most paths name none of these: no split, no look at the disk.
      if (!form.startsWith('/') || !GIT_DIR_CODE_NAME_IN_PATH.test(form)) return false;
      const parts = form.split('/');
      return parts.some(
        (name, at) => at > 1 && GIT_DIR_CODE_NAMES.has(name) && (GIT_DIR_CODE_FOLDERS.has(name) || at === parts.length - 1) && protectedIn(parts.slice(0, at).join('/')),
      );
    },
    holds: () => false,
    samples: () => [],
  };
}

/**
 * A symlink into a git directory (a `.git`, or any folder a `HEAD` at or above makes
 * one): a person who `cd`s through it lands inside, where git takes any folder holding a
 * `HEAD` for a repository, and that folder's config and hooks are nobody's protected
 * files (git writes `HEAD`s all over a git directory). Any case of `.git`, for file
 * systems that ignore it. A hard link of a symlink (made in the temp dir, say) is another
 * symlink with the same content, and a symlink renamed elsewhere is judged where it lands.
 */
export function symlinkIntoGit(target: Pick<ResolvedTarget, 'role' | 'resolved'>, resolved: Pick<ResolvedRequest, 'request' | 'targets'>): Decision | undefined {
  const { operation } = resolved.request;
  if ((operation !== 'link' && operation !== 'rename') || target.role !== 'to') return undefined;
  const content = linkContent(resolved);
  return content === undefined ? undefined : linkIntoGit(target.resolved, content);
}

/**
 * The verdict for a symlink holding `content` at `link` (made, hard-linked, or moved
 * there: a relative one names another place once moved), or undefined when it leads into
 * no git directory. `null`: its content could not be read, which asks.
 */
export function linkIntoGit(link: string, content: string | null): Decision | undefined {
  if (inStoppedStateFolder(link)) {
    return {
      verdict: 'prompt',
      reason: `${link} would be a symlink in git's record of a stopped rebase, am, cherry-pick or revert: continuing it would carry out whatever the link leads to; a person must approve`,
      source: 'file-safety:mandatory:git-symlink',
    };
  }
  const into = content === null || content.split('/').some((name) => name.toLowerCase() === '.git') || leadsIntoGitDirectory(link, content);
  if (!into) return undefined;
  const what = content === null ? 'a link to a symlink that cannot be read' : `a symlink into a git directory (${JSON.stringify(content)})`;
  return {
    verdict: 'prompt',
    reason: `${link} would be ${what}: git run through it would obey config and hooks there; a person must approve`,
    source: 'file-safety:mandatory:git-symlink',
  };
}

/**
 * Whether `link` is a folder where git keeps a stopped rebase, `git am`, cherry-pick or
 * revert (`rebase-merge`, `rebase-apply`, `sequencer` of a git directory), or lies in one.
 * Git makes no symlinks there; one would let a later turn change what `--continue` reads
 * without naming the folder (the git-plan-notice plugin follows the folders by name).
 */
function inStoppedStateFolder(link: string): boolean {
  const folder = stateFolderAt(link);
  return folder !== undefined && inGitDirectory(path.posix.dirname(folder)) !== false;
}

/**
 * A git directory not named `.git` (a separate git dir, a bare repository) is one a
 * folder at or above the link's destination holds a `HEAD` in; a failed look counts.
 * The destination is taken as written and, where it exists, as the disk resolves it.
 */
function leadsIntoGitDirectory(link: string, content: string): boolean {
  const written = path.posix.resolve(path.posix.dirname(link), content);
  let real: string | undefined;
  try {
    real = realpathSync(written);
  } catch {
    real = undefined;
  }
  const places = real === undefined || real === written ? [written] : [written, real];
  // Data folders count too (a repository can be built there): the first HEAD found settles it.
  return places.some((dest) => inGitDirectory(dest) !== false);
}

/** What the link made (or moved) would hold: a symlink's content; undefined for anything but a symlink; null when unreadable. */
function linkContent(resolved: Pick<ResolvedRequest, 'request' | 'targets'>): string | null | undefined {
  const { symbolic, linkTarget } = resolved.request.options;
  if (symbolic && resolved.request.operation === 'link') return linkTarget;
  const source = resolved.targets.find((t) => t.role === 'from');
  return source?.kind === 'symlink' ? symlinkContent(source.resolved) : undefined;
}

/** A symlink's content, or null when it cannot be read (which asks). */
export function symlinkContent(link: string): string | null {
  try {
    return readlinkSync(link);
  } catch {
    return null;
  }
}

