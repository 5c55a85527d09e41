/*
 * The glob syntax rules are written in (glob.ts matches them): parsed into atoms and
 * brace groups, the braces expanded into alternatives, each split into components.
 * What is not read here is refused with a GlobSyntaxError, never guessed at.
 */

export class GlobSyntaxError extends Error {}

/** One character's test, or a component boundary. */
export type Atom =
  | { readonly kind: 'char'; readonly code: number }
  | { readonly kind: 'any' }
  | { readonly kind: 'star' }
  | { readonly kind: 'class'; readonly negated: boolean; readonly ranges: readonly number[] }
  | { readonly kind: 'slash' };
type GlobNode = Atom | { readonly kind: 'alt'; readonly options: readonly GlobNode[][] };

/** More alternatives than this, after every brace is expanded, is refused: each one is an automaton to run. */
export const MAX_ALTERNATIVES = 256;

const SLASH = 0x2f;

/** Parse a glob into atoms and brace groups; GlobSyntaxError for what is not supported. */
function parse(glob: string): GlobNode[] {
  let at = 0;
  const fail = (why: string): never => {
    throw new GlobSyntaxError(why);
  };
  const escaped = (): number => {
    at += 1;
    if (at >= glob.length) fail('it ends in a lone \\ (write \\\\ for a backslash)');
    return glob.codePointAt(at) as number;
  };
  const parseClass = (): Atom => {
    // At the `[`.
    at += 1;
    const negated = glob[at] === '!' || glob[at] === '^';
    if (negated) at += 1;
    const ranges: number[] = [];
    for (let first = true; ; first = false) {
      if (at >= glob.length) fail('a [ class is not closed (write \\[ for a bracket)');
      const c = glob[at];
      if (c === ']' && !first) break;
      if (c === '[' && glob[at + 1] === ':') fail('POSIX classes like [[:alpha:]] are not supported (write the range, [a-zA-Z])');
      const lo = c === '\\' ? escaped() : (glob.codePointAt(at) as number);
      at += lo > 0xffff ? 2 : 1;
      let hi = lo;
      if (glob[at] === '-' && at + 1 < glob.length && glob[at + 1] !== ']') {
        at += 1;
        hi = glob[at] === '\\' ? escaped() : (glob.codePointAt(at) as number);
        at += hi > 0xffff ? 2 : 1;
        if (hi < lo) fail(`the class range ${String.fromCodePoint(lo)}-${String.fromCodePoint(hi)} is reversed`);
      }
      if (!negated && lo <= SLASH && SLASH <= hi) fail('a [ class cannot match /, which separates components');
      ranges.push(lo, hi);
    }
    at += 1;
    return { kind: 'class', negated, ranges };
  };
  const parseSequence = (inGroup: boolean): GlobNode[] => {
    const out: GlobNode[] = [];
    while (at < glob.length) {
      const c = glob[at] as string;
      if (inGroup && (c === ',' || c === '}')) return out;
      if (c === '\\') {
        const code = escaped();
        out.push({ kind: 'char', code });
        at += code > 0xffff ? 2 : 1;
        continue;
      }
      if (c === '[') {
        out.push(parseClass());
        continue;
      }
      if (c === '{') {
        out.push(parseGroup());
        continue;
      }
      if (c === '}') fail('a } has no { to close (write \\} for a brace)');
      if (c === '(' || c === ')' || c === '|') fail('groups (a|b) and extglobs like +(…) or !(…) are not supported (use {a,b}; write \\( for a parenthesis)');
      if (c === '"') fail('quotes are not glob syntax here (escape a special character with \\ instead)');
      if (c === '*') out.push({ kind: 'star' });
      else if (c === '?') out.push({ kind: 'any' });
      else if (c === '/') out.push({ kind: 'slash' });
      else {
        const code = glob.codePointAt(at) as number;
        out.push({ kind: 'char', code });
        if (code > 0xffff) at += 1;
      }
      at += 1;
    }
    if (inGroup) fail('a { group is not closed (write \\{ for a brace)');
    return out;
  };
  const parseGroup = (): GlobNode => {
    // At the `{`.
    const options: GlobNode[][] = [];
    do {
      at += 1;
      options.push(parseSequence(true));
    } while (glob[at] === ',');
    at += 1;
    if (options.length < 2) fail('a { group needs a comma, {a,b}: ranges like {1..3} are not supported (write \\{ for a brace)');
    return { kind: 'alt', options };
  };
  return parseSequence(false);
}

/** How many alternatives a sequence expands into, saturating just past the limit. */
function countOf(nodes: readonly GlobNode[]): number {
  let count = 1;
  for (const node of nodes) {
    if (node.kind !== 'alt') continue;
    count = Math.min(MAX_ALTERNATIVES + 1, count * Math.min(MAX_ALTERNATIVES + 1, node.options.reduce((sum, option) => sum + countOf(option), 0)));
  }
  return count;
}

function expand(nodes: readonly GlobNode[]): Atom[][] {
  let partial: Atom[][] = [[]];
  for (const node of nodes) {
    if (node.kind !== 'alt') {
      for (const atoms of partial) atoms.push(node);
      continue;
    }
    const tails = node.options.flatMap(expand);
    partial = partial.flatMap((head) => tails.map((tail) => [...head, ...tail]));
  }
  return partial;
}

/** The brace-free alternatives of a glob, each split into components (an absolute glob's first is empty). */
export function globAlternatives(glob: string): Atom[][][] {
  const nodes = parse(glob);
  const count = countOf(nodes);
  if (count > MAX_ALTERNATIVES) throw new GlobSyntaxError(`its braces expand into more than ${MAX_ALTERNATIVES} alternatives`);
  return expand(nodes).map(componentsOf);
}

function componentsOf(atoms: readonly Atom[]): Atom[][] {
  const components: Atom[][] = [[]];
  for (const atom of atoms) {
    if (atom.kind === 'slash') components.push([]);
    else (components.at(-1) as Atom[]).push(atom);
  }
  return components;
}

/** A component that is only `**`: any number of components. `*`, `***` and `a**` are single stars. */
export const isGlobstar = (component: readonly Atom[]) => component.length === 2 && component.every((atom) => atom.kind === 'star');

/** The component's text when it holds only literal characters (undefined otherwise). */
export function literalText(component: readonly Atom[]): string | undefined {
  if (!component.every((atom) => atom.kind === 'char')) return undefined;
  return String.fromCodePoint(...component.map((atom) => (atom as { code: number }).code));
}

/**
 * A literal path inside a glob: every character a reader could take for syntax is
 * escaped, and control characters too (a rule refuses them unescaped: patternProblem).
 */
export function escapeGlob(literal: string): string {
  return literal.replace(/[*?[\]{}()!+@\\|"\x01-\x1f\x7f]/g, '\\$&');
}

/** The literal directory a glob starts with (`/a/b` of `/a/b/*.txt`), unescaped; empty when its first component has a wildcard. */
export function literalBase(glob: string): string {
  const taken: string[] = [];
  for (const component of glob.split(/(?<!\\)\//)) {
    if (/(?<!\\)[*?[{]/.test(component)) break;
    taken.push(component.replace(/\\(.)/g, '$1'));
  }
  return taken.join('/');
}
