import path from 'node:path';
import type { Decision } from '../../core/index.js';
import { gitDirectoryFiles, gitDirectoryHead } from './git-directories.js';
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
