/*
 * Globs matched in time linear in the path's length, whatever the pattern: a glob is
 * compiled to a small automaton per alternative of its braces, and each automaton is run
 * over the path once, keeping the set of states it is in (no backtracking). A backtracking
 * matcher (a regular expression) took minutes over one 45-character name for the rule
 * `*a*a*a*a*a*a*a*a*a*a*a*a*ab`, and a repository's own file can bring any rule.
 *
 * Kept small enough to be written in C: a flat array of instructions per alternative and
 * two lists of states.
 *
 * Syntax: `*` any characters but `/`; `**` as a whole component, any number of components
 * (none too); `?` one character but `/`; `[…]` one character of a class (`!` or `^` first
 * negates; ranges `a-z`; `]` first is literal; `\` escapes); `{a,b}` alternatives, nested;
 * `\` escapes the next character. A name starting with `.` is matched like any other.
 * What other glob dialects give meaning to (extglobs `+(…)`, groups `(a|b)`, quotes,
 * ranges `{1..3}`, POSIX classes `[[:alpha:]]`) is refused with a GlobSyntaxError rather
 * than guessed at.
 */

export class GlobSyntaxError extends Error {}

/** One character's test, or a component boundary. */
type Atom =
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
const isGlobstar = (component: readonly Atom[]) => component.length === 2 && component.every((atom) => atom.kind === 'star');

/** The component's text when it holds only literal characters (undefined otherwise). */
export function literalText(component: readonly Atom[]): string | undefined {
  if (!component.every((atom) => atom.kind === 'char')) return undefined;
  return String.fromCodePoint(...component.map((atom) => (atom as { code: number }).code));
}

/*
 * The automaton: instructions in an array, run on the path's UTF-16 code units (as the
 * regular expressions it replaces were). A class holds code-unit ranges; a character
 * outside the BMP in a class or literal is refused by nothing and simply matched as code
 * points would not be: rules name paths, which rarely hold such characters.
 */
const enum Op {
  /** `a`: the code unit to match. */
  Char,
  /** Any code unit but `/`. */
  Any,
  /** Any code unit, `/` too. */
  AnySlash,
  /** `a`: index of the class in `classes`. */
  Class,
  /** Continue at `a` and at `b`. */
  Split,
  /** Continue at `a`. */
  Jump,
  Match,
}

interface GlobClass {
  readonly negated: boolean;
  readonly ranges: readonly number[];
}

export interface GlobProgram {
  readonly ops: Uint8Array;
  readonly a: Int32Array;
  readonly b: Int32Array;
  readonly classes: readonly GlobClass[];
  /** Where each instruction's closure starts in `closureList` (see closures). */
  readonly closureStart: Int32Array;
  readonly closureList: Int32Array;
  /** 1 where an instruction's closure holds the match. */
  readonly closureMatches: Uint8Array;
  /** Texts every path this alternative matches contains (for a cheap look before it runs). */
  readonly needs: readonly string[];
}

/** Compile one brace-free alternative (its components). */
export function compileAlternative(components: readonly (readonly Atom[])[]): GlobProgram {
  const ops: number[] = [];
  const a: number[] = [];
  const b: number[] = [];
  const classes: Array<{ negated: boolean; ranges: readonly number[] }> = [];
  const needs: string[] = [];
  let run = '';
  const emit = (op: Op, x = 0, y = 0): number => {
    ops.push(op);
    a.push(x);
    b.push(y);
    return ops.length - 1;
  };
  const flush = () => {
    if (run !== '') needs.push(run);
    run = '';
  };
  const char = (code: number) => {
    // Code points beyond the BMP are two code units in the path.
    for (const unit of String.fromCodePoint(code)) {
      emit(Op.Char, unit.charCodeAt(0));
      run += unit;
    }
  };
  /** `(x)*` around what `body` emits. */
  const loop = (body: () => void) => {
    const split = emit(Op.Split);
    a[split] = ops.length;
    body();
    emit(Op.Jump, split);
    b[split] = ops.length;
  };
  const last = components.length - 1;
  components.forEach((component, index) => {
    const previousGlobstar = index > 0 && isGlobstar(components[index - 1] as Atom[]);
    if (isGlobstar(component)) {
      if (index < last && index > 0 && !previousGlobstar) char(SLASH);
      flush();
      if (index === last && index === 0) loop(() => emit(Op.AnySlash));
      else if (index === last && !previousGlobstar) {
        // `a/**` is `a` too: the `/` and all below it are optional.
        const split = emit(Op.Split, ops.length + 1);
        emit(Op.Char, SLASH);
        loop(() => emit(Op.AnySlash));
        b[split] = ops.length;
      } else if (index === last) loop(() => emit(Op.AnySlash));
      else {
        // Leading or middle: any number of `name/`, each with its own `/`.
        loop(() => {
          loop(() => emit(Op.Any));
          emit(Op.Char, SLASH);
        });
      }
      return;
    }
    if (index > 0 && !previousGlobstar) char(SLASH);
    const onlyStars = component.length > 0 && component.every((atom) => atom.kind === 'star');
    // A last component of stars names something: at least one character.
    if (onlyStars && index === last) {
      flush();
      emit(Op.Any);
      loop(() => emit(Op.Any));
      return;
    }
    for (const atom of component) {
      if (atom.kind === 'char') char(atom.code);
      else {
        flush();
        if (atom.kind === 'any') emit(Op.Any);
        else if (atom.kind === 'star') loop(() => emit(Op.Any));
        else if (atom.kind === 'class') emit(Op.Class, classes.push({ negated: atom.negated, ranges: atom.ranges }) - 1);
      }
    }
  });
  flush();
  emit(Op.Match);
  return { ops: Uint8Array.from(ops), a: Int32Array.from(a), b: Int32Array.from(b), classes, needs, ...closures(ops, a, b) };
}

function inClass(cls: GlobClass, unit: number): boolean {
  if (unit === SLASH) return false;
  let found = false;
  for (let i = 0; i < cls.ranges.length && !found; i += 2) found = (cls.ranges[i] as number) <= unit && unit <= (cls.ranges[i + 1] as number);
  return found !== cls.negated;
}

/**
 * Whether `program` matches `p`, or (with `ancestors`) `p` or a directory above it: the
 * directories above are the prefixes of `p` that end before a `/`, and `/` itself, so one
 * pass over `p` answers for all of them. Each code unit costs at most one step per
 * instruction: time linear in the path's length (`work` counts the steps).
 */
export function runProgram(program: GlobProgram, p: string, ancestors: boolean, work?: { steps: number }): boolean {
  const { ops, a, closureStart, closureList, closureMatches } = program;
  // Scratch lists, made once per program: a run finishes before the next starts.
  const scratch = (program as { scratch?: Scratch }).scratch ?? ((program as { scratch?: Scratch }).scratch = newScratch(ops.length));
  let current = scratch.current;
  let next = scratch.next;
  let currentLength = 0;
  // A state is on the list being built when its mark is the step's generation.
  const marks = scratch.marks;
  marks.fill(0);
  let generation = 1;
  /** Put the states `pc` leads to on `list`; whether it reaches a match. */
  const follow = (list: Int32Array, length: number, pc: number): number => {
    for (let k = closureStart[pc] as number; k < (closureStart[pc + 1] as number); k += 1) {
      const state = closureList[k] as number;
      if (marks[state] === generation) continue;
      marks[state] = generation;
      list[length++] = state;
    }
    return length;
  };
  currentLength = follow(current, 0, 0);
  const absolute = p.charCodeAt(0) === SLASH;
  for (let i = 0; i < p.length; i += 1) {
    const unit = p.charCodeAt(i);
    generation += 1;
    let matched = false;
    let nextLength = 0;
    if (work) work.steps += currentLength;
    for (let k = 0; k < currentLength; k += 1) {
      const pc = current[k] as number;
      const op = ops[pc] as Op;
      const passes = op === Op.Char ? a[pc] === unit : op === Op.Any ? unit !== SLASH : op === Op.AnySlash || inClass(program.classes[a[pc] as number] as GlobClass, unit);
      if (!passes) continue;
      nextLength = follow(next, nextLength, pc + 1);
      if (closureMatches[pc + 1] === 1) matched = true;
    }
    [current, next] = [next, current];
    currentLength = nextLength;
    const consumed = i + 1;
    const boundary = consumed === p.length || (ancestors && ((absolute && consumed === 1) || p.charCodeAt(consumed) === SLASH));
    if (matched && boundary) return true;
    if (currentLength === 0) return false;
  }
  return false;
}

interface Scratch {
  current: Int32Array;
  next: Int32Array;
  marks: Int32Array;
}

function newScratch(size: number): Scratch {
  return { current: new Int32Array(size), next: new Int32Array(size), marks: new Int32Array(size) };
}

/**
 * For each instruction, the instructions that test a character reachable from it through
 * splits and jumps alone, and whether the match is: worked out once, so a run only steps
 * from state to state.
 */
function closures(ops: readonly number[], a: readonly number[], b: readonly number[]): Pick<GlobProgram, 'closureStart' | 'closureList' | 'closureMatches'> {
  const starts = [0];
  const list: number[] = [];
  const matches = new Uint8Array(ops.length);
  for (let pc = 0; pc < ops.length; pc += 1) {
    const seen = new Set<number>();
    const pending = [pc];
    for (let at = pending.pop(); at !== undefined; at = pending.pop()) {
      if (seen.has(at)) continue;
      seen.add(at);
      const op = ops[at] as Op;
      if (op === Op.Split) pending.push(b[at] as number, a[at] as number);
      else if (op === Op.Jump) pending.push(a[at] as number);
      else if (op === Op.Match) matches[pc] = 1;
      else list.push(at);
    }
    starts.push(list.length);
  }
  return { closureStart: Int32Array.from(starts), closureList: Int32Array.from(list), closureMatches: matches };
}

export interface CompiledGlob {
  /** `p` itself matches. */
  matches(p: string): boolean;
  /** `p` or a directory above it matches. */
  matchesWithin(p: string): boolean;
}

/** Compile a glob; GlobSyntaxError for syntax it does not support. */
export function compileGlob(glob: string): CompiledGlob {
  const programs = globAlternatives(glob).map(compileAlternative);
  const test = (p: string, ancestors: boolean) => programs.some((program) => program.needs.every((text) => p.includes(text)) && runProgram(program, p, ancestors));
  return { matches: (p) => test(p, false), matchesWithin: (p) => test(p, true) };
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
