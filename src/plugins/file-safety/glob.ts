/*
 * Globs matched in time linear in the path's length, whatever the pattern: a glob is
 * compiled to a small automaton per alternative of its braces, and each automaton is run
 * over the path once, keeping the set of states it is in (no backtracking). A backtracking
 * matcher (a regular expression, as picomatch compiles) takes minutes over one
 * 45-character name for the rule `*a*a*a*a*a*a*a*a*a*a*a*a*ab`, with the event loop held,
 * and a repository's own file can bring any rule.
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

import { globAlternatives, isGlobstar, type Atom } from './glob-syntax.js';

export { GlobSyntaxError, MAX_ALTERNATIVES, escapeGlob, globAlternatives, literalBase, literalText } from './glob-syntax.js';

const SLASH = 0x2f;

/*
 * The automaton: instructions in an array, run on the path's UTF-16 code units, as a
 * regular expression without the `u` flag is. A literal beyond the BMP is its two code
 * units; `?` and a class take one, so a class does not match such a character (paths
 * rules name rarely hold one).
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
