import path from 'node:path';
import picomatch from 'picomatch';
import type { ResolvedTarget } from '../../core/index.js';

/** What policy needs of a target: how it is used and every form of its path. */
export type PolicyTarget = Pick<ResolvedTarget, 'access' | 'lexical' | 'resolved' | 'ruleForm' | 'links'> & {
  /** Set when the operation changes the existing inode in place (not its name). */
  inPlace?: boolean;
};

/** Tests a path; true when the path or any directory above it matches. */
export type PathMatcher = (p: string) => boolean;

/**
 * Compile a rule pattern. `/…` is absolute, `~`/`~/…` is expanded with every form of
 * home, anything else matches at any depth. Negation is off: `!x` must never turn a
 * rule into "everything except x".
 */
export function compilePattern(pattern: string, homes: readonly string[]): PathMatcher {
  const globs = globsFor(pattern, homes).map((glob) => ({ needs: literalRuns(glob), matches: picomatch(glob, { dot: true, nonegate: true }) }));
  return (p) => {
    let candidates: string[] | undefined;
    for (const { needs, matches } of globs) {
      // Most paths lack a glob's literal text: then no ancestor can match, and no regex runs.
      if (!needs.every((text) => p.includes(text))) continue;
      candidates ??= ancestorsOf(p);
      if (candidates.some((candidate) => matches(candidate))) return true;
    }
    return false;
  };
}

/** A component picomatch matches only by itself: no wildcard, class, brace, extglob, escape, `.` or `..`. */
const LITERAL_COMPONENT = /^(?!\.\.?$)[\w.~-]+$/;

/**
 * The texts every match of `glob` contains: its runs of literal components, joined by
 * `/`. The candidates tested are the path and its ancestors, all prefixes of the path,
 * so a path without one of these texts cannot match, and skipping it changes no answer.
 */
export function literalRuns(glob: string): string[] {
  const runs: string[] = [];
  let run: string[] = [];
  for (const component of glob.split('/')) {
    if (LITERAL_COMPONENT.test(component)) {
      run.push(component);
      continue;
    }
    if (run.length > 0) runs.push(run.join('/'));
    run = [];
  }
  if (run.length > 0) runs.push(run.join('/'));
  return runs;
}

/** The globs a pattern stands for, tested against the path and each directory above it. */
export function globsFor(pattern: string, homes: readonly string[]): string[] {
  const trimmed = stripTrailingSlashes(pattern);
  if (trimmed.startsWith('/')) return [trimmed];
  if (trimmed === '~' || trimmed.startsWith('~/')) {
    return homes.map((home) => stripTrailingSlashes(escapeGlob(home) + trimmed.slice(1)) || '/');
  }
  const relative = trimmed.replace(/^(\.\/)+/, '');
  return [relative.startsWith('**/') ? relative : `**/${relative}`];
}

/** A literal path inside a glob: its own `*`, `[` … must not act as wildcards. */
function escapeGlob(literal: string): string {
  return literal.replace(/[*?[\]{}()!+@\\]/g, '\\$&');
}

function stripTrailingSlashes(value: string): string {
  return value.length > 1 ? value.replace(/\/+$/, '') || '/' : value;
}

/** The path itself, then each directory above it, up to `/`. */
export function ancestorsOf(p: string): string[] {
  const out = [p];
  let current = p;
  while (current.includes('/') && current !== '/') {
    const parent = path.posix.dirname(current);
    if (parent === current) break;
    out.push(parent);
    current = parent;
  }
  return out;
}

/** `p` is `base` or beneath it, at a component boundary (`/root2` is not in `/root`). */
export function isWithin(p: string, base: string): boolean {
  if (base === '/') return p.startsWith('/');
  // No `${base}/` to build: asked for every anchor and form of every request.
  return p.startsWith(base) && (p.length === base.length || p.charCodeAt(base.length) === SLASH);
}

const SLASH = 0x2f;

/** `p` is strictly beneath `base`. */
export function isBeneath(p: string, base: string): boolean {
  return p !== base && isWithin(p, base);
}

/** The home abbreviation of a rule form undone, once per form of home. */
export function expandRuleForm(ruleForm: string, homes: readonly string[]): string[] {
  if (ruleForm === '~') return [...homes];
  if (ruleForm.startsWith('~/')) return homes.map((home) => `${home === '/' ? '' : home}${ruleForm.slice(1)}`);
  return [ruleForm];
}

export interface TargetForms {
  /** Every name the target goes by: restrictive rules (deny, prompt) match any of them. */
  readonly all: readonly string[];
  /**
   * Only forms that name the file actually touched: permissive rules (grant-token,
   * sandbox) match these, so a grant on a link's own path never lets a write through
   * to where the link points, and a rewritten rule form never borrows another
   * directory's grant.
   */
  readonly touched: readonly string[];
}

export function formsOf(target: PolicyTarget, homes: readonly string[]): TargetForms {
  const expanded = expandRuleForm(target.ruleForm, homes).filter((form) => form.startsWith('/'));
  const directory = path.posix.dirname(target.resolved);
  const sameDirectory = expanded.filter((form) => form === target.resolved || path.posix.dirname(form) === directory);
  return {
    all: unique([target.lexical, target.resolved, ...expanded]),
    touched: unique([target.resolved, ...sameDirectory]),
  };
}

export function unique<T>(values: readonly T[]): T[] {
  return [...new Set(values)];
}
