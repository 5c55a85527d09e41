import { closeSync, constants as C, fstatSync, openSync, readSync } from 'node:fs';
import path from 'node:path';
import { STOPPED_STATES, lstatQuietly, type StoppedState } from './state.js';

/*
 * What a person should hear of a stopped operation before continuing it: the rebase plan's
 * commands, and a merge strategy that is a program, read the way git reads them.
 */

/** Git's own merge strategies; any other name runs a program. */
const BUILTIN_STRATEGIES: ReadonlySet<string> = new Set(['ort', 'recursive', 'resolve', 'octopus', 'ours', 'subtree']);
/** Files larger than this are not read: the notice says so. */
const MAX_READ_BYTES = 1024 * 1024;
const SHOWN_COMMANDS = 10;
const SHOWN_HEAD = 60;
const SHOWN_TAIL = 40;

/** A rebase plan's commands: git takes `exec` or `x`, after any indentation, then a space or tab, as the rest run in a shell. */
export function execLines(text: string): string[] {
  return text.split('\n').filter((line) => /^[ \t]*(?:exec|x)(?:[ \t]|$)/.test(line)).map((line) => line.trim());
}

/** Longest `opts` line read; a longer one naming a strategy is reported as unread. */
const MAX_OPTS_LINE = 4096;

/**
 * The merge strategies a sequencer's `opts` (git config syntax) may name: every value of
 * a `strategy` key, any case, quotes and escapes taken off (git uses the last; every one is
 * reported). `unread` when a line that mentions a strategy is not in a form read here (a
 * continued value, an overlong line): the caller says so rather than guess.
 */
export function optsStrategies(text: string): { values: string[]; unread: boolean } {
  const values: string[] = [];
  let unread = false;
  for (const line of text.split('\n')) {
    if (!/strategy/i.test(line)) continue;
    // A section header may share the line with a setting (`[options] strategy = x`).
    const setting = line.length > MAX_OPTS_LINE ? undefined : /^[ \t]*(?:\[[^\]\n]*\][ \t]*)?([A-Za-z][A-Za-z0-9-]*)[ \t]*=([^\n]*)$/.exec(line);
    if (!setting) {
      unread = true;
      continue;
    }
    if (setting[1]?.toLowerCase() !== 'strategy') continue;
    const raw = setting[2] ?? '';
    // A backslash ending the line continues the value on the next: not read here.
    const value = /\\[ \t\r]*$/.test(raw) ? undefined : configValue(raw);
    if (value === undefined) unread = true;
    else values.push(value);
  }
  return { values, unread };
}

/** Whitespace as git's config reader takes it outside quotes. */
const CONFIG_SPACE = new Set([' ', '\t', '\r']);

/**
 * A config value as git reads it: unquoted whitespace dropped at both ends and each run
 * inside kept as one space, quoted text kept as it is, git's escapes (`\n`, `\t`, `\b`,
 * `\"`, `\\`) read as git reads them, a comment outside quotes ending it; undefined for an
 * escape git refuses. Exactly: `"ort "` is no built-in strategy to git.
 */
function configValue(raw: string): string | undefined {
  let out = '';
  let quoted = false;
  let pendingSpace = false;
  for (let i = 0; i < raw.length; i += 1) {
    const c = raw[i] as string;
    if (!quoted && CONFIG_SPACE.has(c)) {
      pendingSpace = out.length > 0;
      continue;
    }
    if (!quoted && (c === '#' || c === ';')) break;
    if (pendingSpace) out += ' ';
    pendingSpace = false;
    if (c === '"') quoted = !quoted;
    else if (c === '\\') {
      const escaped = CONFIG_ESCAPES.get(raw[(i += 1)] ?? '');
      // Any other escape is an error to git: not read here either.
      if (escaped === undefined) return undefined;
      out += escaped;
    } else out += c;
  }
  return out;
}

/** The escapes git's config reader knows inside a value. */
const CONFIG_ESCAPES: ReadonlyMap<string, string> = new Map([
  ['n', '\n'],
  ['t', '\t'],
  ['b', '\b'],
  ['"', '"'],
  ['\\', '\\'],
]);

/** A command as a person can read it whole: whitespace runs as one space, and a long one shown at both ends. */
export function shown(command: string): string {
  const flat = command.replace(/\s+/g, ' ');
  if (flat.length <= SHOWN_HEAD + SHOWN_TAIL + 20) return flat;
  return `${flat.slice(0, SHOWN_HEAD)} …(${flat.length - SHOWN_HEAD - SHOWN_TAIL} characters)… ${flat.slice(-SHOWN_TAIL)}`;
}

/** What a person should know about the stopped-operation folder `folder` before going on. */
export function noticeFor(folder: string): string {
  const state: StoppedState = STOPPED_STATES.find((s) => path.basename(folder) === s.folder) ?? STOPPED_STATES[0];
  const where = `${state.what} left in ${path.dirname(folder)}`;
  const runs = programsIn(folder, state);
  const readIt = `read ${folder} first, or ${state.abort}`;
  if (runs.length === 0) return `${where} is carried out at ${state.resume}, outside the sandbox: ${readIt}`;
  return `${where} will run outside the sandbox at ${state.resume}: ${runs.join(' | ')}; ${readIt}`;
}

/** What continuing the operation would run (the plan's commands, a strategy that is a program), and what could not be read to tell. */
function programsIn(folder: string, state: StoppedState): string[] {
  const runs: string[] = [];
  const strategies: string[] = [];
  const read = (name: string): string | undefined => {
    const got = readRegular(path.join(folder, name));
    if ('reason' in got) runs.push(`${name} was not read (${got.reason}): it may run anything`);
    return 'text' in got ? got.text : undefined;
  };
  if (state.folder === 'rebase-merge') {
    const commands = execLines(read('git-rebase-todo') ?? '');
    runs.push(...commands.slice(0, SHOWN_COMMANDS).map(shown));
    if (commands.length > SHOWN_COMMANDS) runs.push(`and ${commands.length - SHOWN_COMMANDS} more commands`);
    // Git takes the file's one line as it is, but for its newline.
    const strategy = read('strategy')?.replace(/\r?\n$/, '');
    if (strategy) strategies.push(strategy);
  } else if (state.folder === 'sequencer') {
    const opts = optsStrategies(read('opts') ?? '');
    strategies.push(...opts.values);
    if (opts.unread) runs.push('opts names a merge strategy in a form not read here: it may run a program');
  }
  for (const strategy of strategies) {
    if (!BUILTIN_STRATEGIES.has(strategy)) runs.push(`the merge strategy ${JSON.stringify(shown(strategy))}, a program (git-merge-${shown(strategy)})`);
  }
  return runs;
}

/** A regular file's text, nothing when there is none, or why it was not read (not a regular file, too large, unreadable). */
function readRegular(file: string): { text: string } | { missing: true } | { reason: string } {
  // Only a regular file is opened: opening a FIFO can hang, opening a device can act.
  const seen = lstatQuietly(file);
  if (!seen) return { missing: true };
  if (!seen.isFile()) return { reason: 'not a regular file' };
  if (seen.size > BigInt(MAX_READ_BYTES)) return { reason: `${seen.size} bytes` };
  let fd: number;
  try {
    fd = openSync(file, C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK);
  } catch {
    return { reason: 'unreadable' };
  }
  try {
    const stats = fstatSync(fd, { bigint: true });
    if (!stats.isFile() || stats.ino !== seen.ino || stats.dev !== seen.dev || stats.size > BigInt(MAX_READ_BYTES)) return { reason: 'replaced while read' };
    const buffer = Buffer.alloc(Number(stats.size));
    let filled = 0;
    for (let got = -1; got !== 0 && filled < buffer.length; filled += got) got = readSync(fd, buffer, filled, buffer.length - filled, filled);
    return { text: buffer.subarray(0, filled).toString('utf8') };
  } finally {
    closeSync(fd);
  }
}

