import path from 'node:path';
import type { Decision } from '../../core/index.js';
import { HOME_CODE_PATHS, WORKSPACE_CODE_PATTERNS } from './code-paths.js';
import { gitDirectoryFiles, gitDirectoryHead } from './git-directories.js';
import { compilePattern, isBeneath, isWithin, unique, type PolicyTarget, type TargetForms } from './patterns.js';

/**
 * Files a shell or git runs code from later, when a person (not the sandbox) uses them.
 * Relative to home. Other places in home that code is taken from: code-paths.ts.
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
  '.cshrc',
  '.tcshrc',
  '.login',
  '.logout',
  '.kshrc',
  '.mkshrc',
]);
export const GLOBAL_GIT_CONFIG: readonly string[] = Object.freeze(['.gitconfig', '.config/git/config']);

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
  /** What `form` is, when that depends on the path (else `reason`). */
  reasonFor?(form: string): string | undefined;
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

/** The places in home code is taken from (HOME_CODE_PATHS), each with why; `*` entries are globs. */
function homeCode(homes: readonly string[]): Protection {
  // Looked up by the path and each folder above it, not compared one by one: there are hundreds.
  const anchors = new Map<string, string>();
  const globs: Array<{ matches: (form: string) => boolean; why: string }> = [];
  for (const [name, why] of Object.entries(HOME_CODE_PATHS)) {
    const shown = `${path.posix.join('~', name)}: ${why}`;
    if (name.includes('*')) globs.push({ matches: compilePattern(`~/${name}`, homes), why: shown });
    else for (const home of homes) anchors.set(path.posix.join(home, name), shown);
  }
  const above = new Set([...anchors.keys()].flatMap((anchor) => ancestorsOf(anchor)));
  const whyFor = (form: string) => withinAnchor(form, anchors) ?? globs.find(({ matches }) => matches(form))?.why;
  return {
    id: 'home-code',
    verdict: 'prompt',
    reason: "a file the person's shell, PATH, desktop or tools take code from",
    covers: (form) => whyFor(form) !== undefined,
    holds: (form) => above.has(form),
    samples: () => [...anchors.keys()],
    reasonFor: (form) => {
      const why = whyFor(form);
      return why && `a place the person's tools take code from (${why})`;
    },
  };
}

/** What `anchors` says of `form` or the nearest folder above it that it names. */
export function withinAnchor(form: string, anchors: ReadonlyMap<string, string>): string | undefined {
  if (!form.startsWith('/')) return undefined;
  for (let end = form.length; end > 0; end = form.lastIndexOf('/', end - 1)) {
    const why = anchors.get(end === form.length ? form : form.slice(0, end));
    if (why !== undefined) return why;
  }
  return anchors.get('/');
}

/** The folders strictly above an absolute path, up to `/`. */
function ancestorsOf(p: string): string[] {
  const out: string[] = [];
  for (let end = p.lastIndexOf('/'); end >= 0; end = p.lastIndexOf('/', end - 1)) {
    out.push(end === 0 ? '/' : p.slice(0, end));
    if (end === 0) break;
  }
  return out;
}

/** Project files tools obey or run (WORKSPACE_CODE_PATTERNS), at any depth, each with why. */
function workspaceCode(): Protection {
  // A plain name matches when any component of the path is that name: one lookup per component.
  const names = new Map<string, string>();
  const globs: Array<{ matches: (form: string) => boolean; why: string }> = [];
  for (const [pattern, why] of Object.entries(WORKSPACE_CODE_PATTERNS)) {
    if (/^[\w.-]+$/.test(pattern)) names.set(pattern, `${pattern}: ${why}`);
    else globs.push({ matches: compilePattern(pattern, []), why: `${pattern}: ${why}` });
  }
  const whyFor = (form: string) => {
    for (const name of form.split('/')) {
      const why = names.get(name);
      if (why !== undefined) return why;
    }
    return globs.find(({ matches }) => matches(form))?.why;
  };
  return {
    id: 'workspace-code',
    verdict: 'prompt',
    reason: 'a project file an editor, agent or tool obeys or runs when the person opens, enters or commits in its folder',
    covers: (form) => whyFor(form) !== undefined,
    // Its names are found in what a whole-directory operation takes along (tree.ts).
    holds: () => false,
    samples: (bases) => bases.flatMap((base) => [`${base}/.mcp.json`, `${base}/.vscode/tasks.json`, `${base}/.claude/settings.json`]),
    reasonFor: (form) => {
      const why = whyFor(form);
      return why && `a project file tools obey or run (${why})`;
    },
  };
}

export interface ProtectionInputs {
  /** Every form of home (as given, real path). */
  readonly homes: readonly string[];
  /** Every form of each protected path (as given, real path). */
  readonly protectedPaths: readonly string[];
  /** What the git config of the repositories in the roots names (git-config-watch.ts). */
  readonly gitConfig?: Protection;
}

/** The built-in protections. No option removes them. */
export function buildProtections(inputs: ProtectionInputs): Protection[] {
  const underHome = (names: readonly string[]) => unique(inputs.homes.flatMap((home) => names.map((name) => path.posix.join(home, name))));
  const protections = [
    literal('shell-startup', 'prompt', 'a shell startup file', underHome(SHELL_STARTUP_FILES)),
    homeCode(inputs.homes),
    literal('git-global-config', 'prompt', "git's global configuration", underHome(GLOBAL_GIT_CONFIG)),
    anyDepth('git-hooks-config', 'a git hook or git configuration', GIT_PROTECTED_PATTERNS),
    workspaceCode(),
    ...(inputs.gitConfig ? [inputs.gitConfig] : []),
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
  const reason = (!holds && protection.reasonFor?.(form)) || protection.reason;
  const what = holds ? `holds ${reason}` : `is ${reason}`;
  const ask = protection.verdict === 'deny' ? 'it is never modified' : 'a person must approve';
  return {
    verdict: protection.verdict,
    reason: `${form} ${what}; ${ask}`,
    source: `file-safety:mandatory:${protection.id}`,
  };
}
