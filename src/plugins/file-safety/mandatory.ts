import { lstatSync, readlinkSync, realpathSync } from 'node:fs';
import path from 'node:path';
import type { Decision, ResolvedRequest, ResolvedTarget } from '../../core/index.js';
import { compilePattern, isBeneath, isWithin, unique, type PolicyTarget, type TargetForms } from './patterns.js';

/**
 * Files a shell or git runs code from later, when a person (not the sandbox) uses them.
 * Relative to home. The list in the brief, plus fish's conf.d and git's global config,
 * which run code for the same reason.
 */
export const SHELL_STARTUP_FILES: readonly string[] = Object.freeze([
  '.bashrc',
  '.bash_profile',
  '.bash_login',
  '.bash_logout',
  '.profile',
  '.zshrc',
  '.zshenv',
  '.zprofile',
  '.zlogin',
  '.zlogout',
  '.inputrc',
  '.config/fish/config.fish',
  '.config/fish/conf.d',
]);
export const GLOBAL_GIT_CONFIG: readonly string[] = Object.freeze(['.gitconfig', '.config/git/config']);

/**
 * Other places in home a person's later shell, session or ssh takes commands or keys
 * from: what common startup files source (Debian's `.bash_aliases`, Fedora's
 * `.bashrc.d`, bash completions), fish's functions, the directory `.profile` puts first
 * on PATH, the session's environment, user services and autostart entries, and ssh's
 * per-user config, rc and authorised keys. Relative to home.
 */
export const HOME_CODE_PATHS: readonly string[] = Object.freeze([
  '.bash_aliases',
  '.bashrc.d',
  '.bash_completion',
  '.local/share/bash-completion',
  '.config/fish/functions',
  '.config/environment.d',
  '.config/systemd/user',
  '.config/autostart',
  '.local/bin',
  '.ssh/config',
  '.ssh/rc',
  '.ssh/environment',
  '.ssh/authorized_keys',
  '.ssh/authorized_keys2',
]);

/**
 * Repository files that make git run code (hooks, and config that can name commands),
 * at any depth, including submodules' and worktrees' git directories. `commondir` names
 * the directory git then takes config and hooks from instead. Everything else in `.git`
 * (objects, refs, index, HEAD, logs) stays with the normal rules so git can commit.
 */
export const GIT_PROTECTED_PATTERNS: readonly string[] = Object.freeze([
  '.git/hooks',
  '.git/config',
  '.git/modules/**/hooks',
  '.git/modules/**/config',
  // Named where git keeps them, not at any depth: under refs/ and logs/ they are branch names.
  '.git/config.worktree',
  '.git/commondir',
  '.git/worktrees/*/config.worktree',
  '.git/worktrees/*/commondir',
  '.git/modules/**/config.worktree',
  '.git/modules/**/commondir',
  // A linked worktree's submodules keep their git dirs under its admin dir.
  '.git/worktrees/*/modules/**/hooks',
  '.git/worktrees/*/modules/**/config',
  '.git/worktrees/*/modules/**/config.worktree',
  '.git/worktrees/*/modules/**/commondir',
  '.git/worktrees/*/modules/**/remotes',
  '.git/worktrees/*/modules/**/branches',
  // Remotes git still reads from files (where a plain `git pull` fetches from), with the
  // folders themselves: a symlink there would name any folder of remotes.
  '.git/remotes',
  '.git/branches',
  '.git/modules/**/remotes',
  '.git/modules/**/branches',
]);

/** In a git directory, the names git takes config, hooks and remotes from (see GIT_PROTECTED_PATTERNS). */
const GIT_DIR_CODE_NAMES: ReadonlySet<string> = new Set(['config', 'config.worktree', 'commondir', 'hooks', 'remotes', 'branches']);
const GIT_DIR_CODE_NAME_IN_PATH = /\/(?:config|config\.worktree|commondir|hooks|remotes|branches)(?:\/|$)/;
/** Of those, the directories: what lies beneath them counts. */
const GIT_DIR_CODE_FOLDERS: ReadonlySet<string> = new Set(['hooks', 'remotes', 'branches']);

export interface Protection {
  readonly id: string;
  readonly verdict: 'prompt' | 'deny';
  readonly reason: string;
  /** The path is protected (for this access), or beneath something protected. */
  covers(form: string, access: 'write' | 'delete'): boolean;
  /**
   * The path is a directory above something protected: deleting, renaming or replacing
   * it changes what is protected just as well.
   */
  holds(form: string): boolean;
  /** Paths that stand for this protection when looking for rules that try to lift it. */
  samples(bases: readonly string[]): string[];
}

function literal(id: string, verdict: Protection['verdict'], reason: string, anchors: readonly string[]): Protection {
  return {
    id,
    verdict,
    reason,
    covers: (form) => anchors.some((anchor) => isWithin(form, anchor)),
    holds: (form) => anchors.some((anchor) => isBeneath(anchor, form)),
    samples: () => [...anchors],
  };
}

function anyDepth(id: string, reason: string, patterns: readonly string[]): Protection {
  const matchers = patterns.map((pattern) => compilePattern(pattern, []));
  return {
    id,
    verdict: 'prompt',
    reason,
    covers: (form) => matchers.some((matches) => matches(form)),
    // A `.git` directory (or `.git` file naming one) holds hooks and config.
    holds: (form) => path.posix.basename(form) === '.git',
    samples: (bases) => bases.flatMap((base) => [`${base}/.git/hooks/pre-commit`, `${base}/.git/config`]),
  };
}

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
function gitDirectoryHead(): Protection {
  return {
    id: 'git-directory-head',
    verdict: 'prompt',
    reason: 'the HEAD of a git directory: git obeys the config and hooks of a folder that holds one, and only then are they protected',
    covers: (form, access) => {
      if (path.posix.basename(form) !== 'HEAD' || !form.startsWith('/')) return false;
      const dir = path.posix.dirname(form);
      if (access === 'delete') return dir === '/' || gitPlaceOf(dir, gitRootsOf(path.posix.dirname(dir))) !== 'data';
      if (form.split('/').includes('.git')) return false;
      const place = gitPlaceOf(dir);
      return place === 'none' || place === 'unknown';
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
function gitDirectoryFiles(): Protection {
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
  return [written, real].some((dest) => dest !== undefined && gitPlaceOf(dest) !== 'none');
}

/** What the link made (or moved) would hold: a symlink's content; undefined for anything but a symlink; null when unreadable. */
function linkContent(resolved: Pick<ResolvedRequest, 'request' | 'targets'>): string | null | undefined {
  const { symbolic, linkTarget } = resolved.request.options;
  if (symbolic && resolved.request.operation === 'link') return linkTarget;
  const source = resolved.targets.find((t) => t.role === 'from');
  if (source?.kind !== 'symlink') return undefined;
  try {
    return readlinkSync(source.resolved);
  } catch {
    return null;
  }
}

export interface ProtectionInputs {
  /** Every form of home (as given, real path). */
  readonly homes: readonly string[];
  /** Every form of each protected path (as given, real path). */
  readonly protectedPaths: readonly string[];
}

/** The built-in protections. No option removes them. */
export function buildProtections(inputs: ProtectionInputs): Protection[] {
  const underHome = (names: readonly string[]) => unique(inputs.homes.flatMap((home) => names.map((name) => path.posix.join(home, name))));
  const protections = [
    literal('shell-startup', 'prompt', 'a shell startup file', underHome(SHELL_STARTUP_FILES)),
    literal('home-code', 'prompt', "a file the person's shell, PATH or ssh takes commands or keys from", underHome(HOME_CODE_PATHS)),
    literal('git-global-config', 'prompt', "git's global configuration", underHome(GLOBAL_GIT_CONFIG)),
    anyDepth('git-hooks-config', 'a git hook or git configuration', GIT_PROTECTED_PATTERNS),
    gitDirectoryHead(),
    gitDirectoryFiles(),
  ];
  if (inputs.protectedPaths.length > 0) {
    protections.push(literal('broker-files', 'deny', "the broker's own files", inputs.protectedPaths));
  }
  return protections;
}

const RANK = { prompt: 1, deny: 2 } as const;

/**
 * Mandatory protections for one target: only writes and deletes, on every form of its
 * path. The strictest protection that applies decides.
 */
export function evaluateMandatory(target: PolicyTarget, forms: TargetForms, protections: readonly Protection[]): Decision | undefined {
  const access = target.access;
  if (access === 'read') return undefined;
  let found: { protection: Protection; form: string; holds: boolean } | undefined;
  for (const protection of protections) {
    if (found && RANK[found.protection.verdict] >= RANK[protection.verdict]) continue;
    for (const form of forms.all) {
      const covered = protection.covers(form, access);
      if (covered || protection.holds(form)) {
        found = { protection, form, holds: !covered };
        break;
      }
    }
  }
  if (!found) return undefined;
  const { protection, form, holds } = found;
  const what = holds ? `holds ${protection.reason}` : `is ${protection.reason}`;
  const ask = protection.verdict === 'deny' ? 'it is never modified' : 'a person must approve';
  return {
    verdict: protection.verdict,
    reason: `${form} ${what}; ${ask}`,
    source: `file-safety:mandatory:${protection.id}`,
  };
}
