import path from 'node:path';
import fc from 'fast-check';
import picomatch from 'picomatch';
import { describe, expect, it } from 'vitest';
import { GlobSyntaxError, MAX_ALTERNATIVES, compileAlternative, compileGlob, escapeGlob, globAlternatives, literalBase, runProgram } from '../../src/plugins/file-safety/glob.js';
import { compileFileSafety, evaluateFileSafety } from '../../src/plugins/file-safety/index.js';
import { compilePattern, globsFor } from '../../src/plugins/file-safety/patterns.js';

/** The path itself, then each directory above it, up to `/` (what rules are tested against). */
function ancestorsOf(p: string): string[] {
  const out = [p];
  for (let current = p; current.includes('/') && current !== '/'; ) {
    const parent = path.posix.dirname(current);
    if (parent === current) break;
    out.push(parent);
    current = parent;
  }
  return out;
}

/** What rules were matched with before: picomatch's regular expressions, on the path and each directory above it. */
const picomatchPattern = (pattern: string, homes: readonly string[]) => {
  const globs = globsFor(pattern, homes).map((glob) => picomatch(glob, { dot: true, nonegate: true }));
  return (p: string) => ancestorsOf(p).some((candidate) => globs.some((glob) => glob(candidate)));
};

/*
 * Random patterns of the syntax rules use, but for the corners where picomatch answers
 * what no reader of the rule means, and which the matcher answers as globs read:
 * - `[!a]`: picomatch matches `!` or `a` (or the text `[!a]`); here it is any one
 *   character but `a`, as `[^a]` is in both;
 * - `**` in braces, after a component with a wildcard (`a*` then `/**`), or twice in a
 *   row: picomatch stops `a*\/**` and `{**,b}` matching the directory itself and `/**\/**\/b`
 *   matching `/b`, and `/**\/a` matching `/a`; here `x/**` always matches `x` and
 *   `/**\/a` matches `/a`, wherever `**` comes from.
 */
const componentTokens = ['a', 'b', '.git', 'hooks', 'x.txt', '*', '?', '[ab]', '[^a]', '[a-c]x', 'x.*', '.e*', 'a\\*b', '*a*', '?b', '{a,b}', '{x.txt,.git}', 'a{,b}', '{a,b}{c,d}', '\\{x\\}'];
const leads = ['', '/', '~/', '**/'];
const randomPatterns = fc
  .tuple(fc.constantFrom(...leads), fc.array(fc.oneof(fc.constantFrom(...componentTokens), fc.constant('**')), { minLength: 1, maxLength: 5 }))
  .filter(([, parts]) => parts.every((part, i) => part !== '**' || i === 0 || (parts[i - 1] !== '**' && !/[*?[{]/.test(parts[i - 1] as string))))
  .filter(([lead, parts]) => !((lead === '**/' || lead === '/') && parts[0] === '**'))
  .map(([lead, parts]) => lead + parts.join('/'));
const pathComponents = ['.git', 'hooks', 'modules', 'config', 'a', 'b', 'c', 'd', 'ac', 'bd', 'x', '.env', 'x.txt', '.e', 'a*b', 'ab', 'ba', 'x.', '{x}', 'u', 'w'];
// `/` itself is left out: picomatch takes `**/*` to match it (an empty name), not the matcher; as an ancestor it is tested still.
const randomPaths = fc.array(fc.constantFrom(...pathComponents), { minLength: 1, maxLength: 7 }).map((parts) => `/${parts.join('/')}`);
const homes = ['/w/u', '/u'];

describe('glob matching', () => {
  it('gives the answers picomatch gives, on the path and the directories above it, for random patterns', () => {
    fc.assert(
      fc.property(randomPatterns, fc.array(randomPaths, { minLength: 20, maxLength: 20 }), (pattern, paths) => {
        const ours = compilePattern(pattern, homes);
        const theirs = picomatchPattern(pattern, homes);
        for (const p of paths) expect([pattern, p, ours(p)]).toEqual([pattern, p, theirs(p)]);
      }),
      { numRuns: 3000, seed: 31 },
    );
  });

  it('gives the answers picomatch gives for the patterns of the existing rules and protections', () => {
    const patterns = ['.git/hooks', '.git/modules/**/hooks', '*.env', 'secrets/**', '/w/a/*.txt', '~/x', '~', 'a/{b,c}/d', 'a/[bc]/d', 'dist', '**/d/**', '.e*', '/', '~/.cache/**', 'docs', '*.pem', '.git/worktrees/*/modules/**/config'];
    const pairs = patterns.map((pattern) => ({ pattern, ours: compilePattern(pattern, homes), theirs: picomatchPattern(pattern, homes) }));
    fc.assert(
      fc.property(randomPaths, (p) => {
        for (const { pattern, ours, theirs } of pairs) expect([pattern, p, ours(p)]).toEqual([pattern, p, theirs(p)]);
      }),
      { numRuns: 3000, seed: 8 },
    );
  });

  it.each<[string, string, boolean]>([
    ['/x/[!a]', '/x/b', true],
    ['/x/[!a]', '/x/a', false],
    ['/x/[!a]', '/x/!', true],
    ['/x/[!/]', '/x/y', true],
    ['/a*/**', '/ab', true],
    ['/x/{**,y}', '/x', true],
    ['/**/**/b', '/b', true],
    ['/**/a', '/a', true],
    ['/a/**/b', '/ab', false],
    ['**/x', '/x', true],
    ['/*', '/', false],
    ['/**', '/', true],
    ['/a/**', '/a', true],
    ['/a**b', '/aX/b', false],
    ['/x/*', '/x/.git', true],
    ['/\\{a\\}', '/{a}', true],
  ])('%s on %s → %s', (glob, p, expected) => {
    expect(compileGlob(glob).matches(p)).toBe(expected);
  });

  it('checks each alternative only on paths holding its literal text, with no answer changed', () => {
    const [program] = globAlternatives('**/.git/modules/**/hooks').map(compileAlternative);
    expect(program?.needs).toEqual(['.git/modules/', 'hooks']);
    expect(globAlternatives('/x/\\*y/z').map(compileAlternative)[0]?.needs).toEqual(['/x/*y/z']);
    fc.assert(
      fc.property(randomPatterns, fc.array(randomPaths, { minLength: 10, maxLength: 10 }), (pattern, paths) => {
        const programs = globsFor(pattern, homes).flatMap((glob) => globAlternatives(glob).map(compileAlternative));
        for (const p of paths) {
          const unfiltered = programs.some((each) => runProgram(each, p, true));
          expect([pattern, p, compilePattern(pattern, homes)(p)]).toEqual([pattern, p, unfiltered]);
        }
      }),
      { numRuns: 500, seed: 9 },
    );
  });
});

describe('a pattern that makes a backtracking matcher take minutes', () => {
  const rule = '*a*a*a*a*a*a*a*a*a*a*a*a*ab';

  it('answers at once, and its work grows with the path, not exponentially', () => {
    const [program] = globAlternatives(`**/${rule}`).map(compileAlternative);
    if (!program) throw new Error('no program');
    for (const length of [45, 1000, 100_000]) {
      const name = `/ws/${'a'.repeat(length)}`;
      const work = { steps: 0 };
      expect(runProgram(program, name, true, work)).toBe(false);
      expect(work.steps).toBeLessThanOrEqual(name.length * program.ops.length);
    }
    expect(compilePattern(rule, [])(`/ws/${'a'.repeat(44)}b`)).toBe(true);
  });

  it("as a rule, leaves a write check of a 45-character name answered", () => {
    const policy = compileFileSafety({ writableRoots: ['/'], rules: [{ pattern: rule, decision: 'deny' }], home: '/nonexistent-home' });
    const name = `/tmp/${'a'.repeat(45)}`;
    expect(evaluateFileSafety({ access: 'write', lexical: name, resolved: name, ruleForm: name }, policy).verdict).toBe('sandbox');
    const matching = `/tmp/${'a'.repeat(44)}b`;
    expect(evaluateFileSafety({ access: 'write', lexical: matching, resolved: matching, ruleForm: matching }, policy).verdict).toBe('deny');
  });
});

describe('syntax that is refused rather than guessed at', () => {
  it.each<[string, RegExp]>([
    ['+(a|b)', /extglobs/],
    ['!(a)', /extglobs/],
    ['*.(js|ts)', /groups/],
    ['a|b', /groups/],
    ['"quoted"', /quotes/],
    ['{1..3}', /ranges/],
    ['{a}', /needs a comma/],
    ['a{b', /not closed/],
    ['a}', /no \{/],
    ['[abc', /not closed/],
    ['[z-a]', /reversed/],
    ['[[:alpha:]]', /POSIX/],
    ['a[/]b', /cannot match \//],
    ['x\\', /lone \\/],
    ['{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}', new RegExp(`more than ${MAX_ALTERNATIVES}`)],
  ])('%s', (glob, why) => {
    expect(() => compileGlob(glob)).toThrow(GlobSyntaxError);
    expect(() => compileGlob(glob)).toThrow(why);
  });

  it('escapes every character of a literal path that could be syntax', () => {
    const literal = '/h/we*ird?[x]{a,b}(c)|"d"!e+f@g\\h';
    expect(compileGlob(escapeGlob(literal)).matches(literal)).toBe(true);
    expect(compileGlob(escapeGlob(literal)).matches('/h/weXirdY[x]{a,b}(c)|"d"!e+f@g\\h')).toBe(false);
  });

  it('finds the literal directory a glob starts from', () => {
    expect([literalBase('/a/b/*.txt'), literalBase('/a/\\(x/c*'), literalBase('**/x'), literalBase('/a/b')]).toEqual(['/a/b', '/a/(x', '', '/a/b']);
  });
});
