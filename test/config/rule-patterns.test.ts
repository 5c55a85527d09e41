/**
 * A rule whose pattern no path can match, or whose syntax the matcher does not read, is
 * refused when the configuration loads, in every file rules come from: the home config,
 * the project file and a `--policy` file. Each such rule is one line naming the file,
 * the rule's key and pattern, and why; every problem is reported at once.
 */
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BrokerError, ErrorCodes } from '../../src/core/index.js';
import { HOME_CONFIG_FILE, PROJECT_CONFIG_FILE, loadConfig, readPolicyFile } from '../../src/config/index.js';

let base: string;
let home: string;
let ws: string;
beforeEach(() => {
  base = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'bsh-config-patterns-')));
  home = path.join(base, 'home');
  ws = path.join(base, 'ws');
  mkdirSync(home);
  mkdirSync(ws);
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

async function failure(promise: Promise<unknown>): Promise<BrokerError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof BrokerError)) throw new Error(`expected a BrokerError, got ${String(error)}`);
  expect(error.code).toBe(ErrorCodes.INVALID_OPTIONS);
  return error;
}

/** Patterns refused, and what the line says of each. */
const refused: Array<[string, string, RegExp]> = [
  ['a .. component', '**/../**', /can never match: it has a "\.\." component, and the paths rules are matched against are normalised/],
  ['a . component', 'src/./x', /can never match: it has a "\." component/],
  ['a trailing newline', 'secrets/**\n', /can never match: it holds the control character U\+000A \(a newline\)/],
  ['a tab', 'a\tb', /control character U\+0009/],
  ['an empty component', 'a//b', /can never match: it has an empty component/],
  ['a brace alternative that names nothing', 'a/{b,..}/c', /one of its brace alternatives has a "\.\." component/],
  ['a name longer than any file', `${'n'.repeat(256)}.txt`, /no file name is longer than 255/],
  ['an extglob', '+(a|b).pem', /is not a pattern rules can use: groups \(a\|b\) and extglobs/],
  ['a range', 'log{1..3}', /ranges like \{1\.\.3\} are not supported/],
  ['an unclosed class', 'key[0-9.pem', /class is not closed/],
];

describe('rules that can never match, or that use syntax the matcher does not read, are refused at load', () => {
  it.each(refused)('in the home config: %s', async (_what, pattern, why) => {
    writeFileSync(path.join(home, HOME_CONFIG_FILE), JSON.stringify({ fileSafety: { rules: [{ pattern: '*.pem', decision: 'prompt' }, { pattern, decision: 'deny' }] } }));
    const error = await failure(loadConfig({ workspace: ws, home }));
    const lines = error.message.split('\n');
    expect(lines[1]).toBe(`  ${path.join(home, HOME_CONFIG_FILE)}:`);
    expect(lines[2]).toMatch(/^ {4}- fileSafety\.rules\.1\.pattern: /);
    expect(lines[2]).toContain(JSON.stringify(pattern.length > 100 ? `${pattern.slice(0, 100)}…` : pattern));
    expect(lines[2]).toMatch(why);
  });

  it.each(refused)('in the project file: %s', async (_what, pattern, why) => {
    writeFileSync(path.join(ws, PROJECT_CONFIG_FILE), JSON.stringify({ fileSafety: { rules: [{ pattern, decision: 'prompt' }] } }));
    const error = await failure(loadConfig({ workspace: ws, home }));
    const line = error.message.split('\n').find((l) => l.startsWith('    - fileSafety.rules.0.pattern: '));
    expect(error.message).toContain(`  ${path.join(ws, PROJECT_CONFIG_FILE)}:\n`);
    expect(line, error.message).toMatch(why);
  });

  it.each(refused)('in a --policy file: %s', async (_what, pattern, why) => {
    const file = path.join(base, 'policy.json');
    writeFileSync(file, JSON.stringify({ rules: [{ pattern, decision: 'deny' }] }));
    const error = await failure(readPolicyFile(file, ws));
    expect(error.message).toContain(`policy file ${file} is invalid:`);
    const line = error.message.split('\n').find((l) => l.startsWith('  - rules.0.pattern: '));
    expect(line, error.message).toMatch(why);
  });

  it('names every such rule of both files at once, one line each', async () => {
    writeFileSync(path.join(home, HOME_CONFIG_FILE), JSON.stringify({ fileSafety: { rules: [{ pattern: '**/../**', decision: 'deny' }, { pattern: 'ok/**', decision: 'deny' }, { pattern: 'x\n', decision: 'prompt' }] } }));
    writeFileSync(path.join(ws, PROJECT_CONFIG_FILE), JSON.stringify({ fileSafety: { rules: [{ pattern: '*a*a*ab', decision: 'deny' }, { pattern: 'x+(y)', decision: 'deny' }] } }));
    const error = await failure(loadConfig({ workspace: ws, home }));
    expect(error.message.split('\n').slice(0, 7)).toEqual([
      'invalid brokered-shell configuration:',
      `  ${path.join(home, HOME_CONFIG_FILE)}:`,
      expect.stringMatching(/^ {4}- fileSafety\.rules\.0\.pattern: "\*\*\/\.\.\/\*\*" can never match/),
      expect.stringMatching(/^ {4}- fileSafety\.rules\.2\.pattern: "x\\n" can never match/),
      `  ${path.join(ws, PROJECT_CONFIG_FILE)}:`,
      expect.stringMatching(/^ {4}- fileSafety\.rules\.1\.pattern: "x\+\(y\)" is not a pattern rules can use/),
      expect.stringMatching(/^\(\.brokered-shell\.json may only narrow/),
    ]);
  });

  it.each(['secrets/**', '/', '~', '~/', './build/', '*.pem', 'a\\\nb', '{src,lib}/**/*.key', '[!.]*', '.git/hooks'])('accepts %j', async (pattern) => {
    writeFileSync(path.join(home, HOME_CONFIG_FILE), JSON.stringify({ fileSafety: { rules: [{ pattern, decision: 'deny' }] } }));
    expect((await loadConfig({ workspace: ws, home })).config.fileSafety.rules).toEqual([{ pattern, decision: 'deny' }]);
  });
});
