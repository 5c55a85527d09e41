import path from 'node:path';
import type { ResolvedTarget } from '../../core/index.js';
import { GlobSyntaxError, compileGlob, escapeGlob, globAlternatives, literalText } from './glob.js';

/** What policy needs of a target: how it is used and every form of its path. */
export type PolicyTarget = Pick<ResolvedTarget, 'access' | 'lexical' | 'resolved' | 'ruleForm' | 'links'> & {
  /** Set when the operation changes the existing inode in place (not its name). */
  inPlace?: boolean;
};

/** Tests a path; true when the path or any directory above it matches. */
export type PathMatcher = (p: string) => boolean;

/**
 * Compile a rule pattern. `/…` is absolute, `~`/`~/…` is expanded with every form of
 * home, anything else matches at any depth. There is no negation: `!x` must never turn a
 * rule into "everything except x". Matching takes time linear in the path's length
 * (glob.ts); a pattern it cannot read throws GlobSyntaxError.
 */
export function compilePattern(pattern: string, homes: readonly string[]): PathMatcher {
  const globs = globsFor(pattern, homes).map(compileGlob);
  return (p) => globs.some((glob) => glob.matchesWithin(p));
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

function stripTrailingSlashes(value: string): string {
  return value.length > 1 ? value.replace(/\/+$/, '') || '/' : value;
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

/** The longest name a Linux file system gives a file, in bytes. */
const NAME_MAX = 255;

/**
 * Why a rule's pattern is refused, or undefined: syntax the matcher does not read
 * (glob.ts), or a pattern no path can match. Rules are matched against absolute,
 * normalised paths, so a pattern with a `.` or `..` component, an empty one (`a//b`), a
 * name longer than any file's, or a control character (a newline left at the end, say)
 * names nothing, and accepting it would leave a person believing a path is guarded.
 */
export function patternProblem(pattern: string): string | undefined {
  const shown = JSON.stringify(pattern.length > 100 ? `${pattern.slice(0, 100)}…` : pattern);
  const control = unescapedControl(pattern);
  if (control !== undefined) {
    const code = `U+${control.toString(16).toUpperCase().padStart(4, '0')}`;
    return `${shown} can never match: it holds the control character ${code}${control === 0x0a ? ' (a newline)' : ''}, which no path a rule is meant for has (match it with ?, or escape it with \\ to mean it)`;
  }
  let alternatives: ReturnType<typeof globAlternatives>;
  try {
    alternatives = globsFor(pattern, ['/home']).flatMap(globAlternatives);
  } catch (error) {
    if (error instanceof GlobSyntaxError) return `${shown} is not a pattern rules can use: ${error.message}`;
    throw error;
  }
  const some = alternatives.length > 1 ? 'one of its brace alternatives has' : 'it has';
  for (const components of alternatives) {
    // `/` is the root's own glob: its second component is the empty name after the slash.
    if (components.length === 2 && components.every((component) => component.length === 0)) continue;
    for (const [index, component] of components.entries()) {
      if (index > 0 && component.length === 0) return `${shown} can never match: ${some} an empty component (//), which no path has`;
      const text = literalText(component);
      if (text === '.' || text === '..') return `${shown} can never match: ${some} a ${JSON.stringify(text)} component, and the paths rules are matched against are normalised (they never hold one)`;
      if (text !== undefined && Buffer.byteLength(text) > NAME_MAX) return `${shown} can never match: ${some} a component of ${Buffer.byteLength(text)} bytes, and no file name is longer than ${NAME_MAX}`;
    }
  }
  return undefined;
}

/** The first control character (C0 or DEL, NUL aside: refused on its own) not escaped with `\`. */
function unescapedControl(pattern: string): number | undefined {
  for (let i = 0; i < pattern.length; i += 1) {
    const code = pattern.charCodeAt(i);
    if (code === 0x5c) i += 1;
    else if ((code > 0 && code < 0x20) || code === 0x7f) return code;
  }
  return undefined;
}

export { realOfDeepestExisting } from '../../requests/deepest-real.js';
