import path from 'node:path';

/** A command as it will be started: a bash script, or a program and its arguments. */
export type Invocation =
  | { kind: 'shell'; script: string; display: string }
  | { kind: 'raw'; argv: string[]; display: string };

/**
 * What `execute` was given, as an invocation. An array is always a raw argv. A string
 * is a bash script, or with `raw` an argv split on whitespace (no quoting, no
 * expansion: pass an array for arguments with spaces).
 */
export function toInvocation(command: string | readonly string[], raw = false): Invocation {
  if (typeof command !== 'string') {
    const argv = [...command];
    if (argv.length === 0 || argv[0] === '') throw new RangeError('a raw command needs a program');
    return { kind: 'raw', argv, display: argv.join(' ') };
  }
  if (!raw) return { kind: 'shell', script: command, display: command };
  const argv = command.split(/\s+/).filter((word) => word !== '');
  if (argv.length === 0) throw new RangeError('a raw command needs a program');
  return { kind: 'raw', argv, display: argv.join(' ') };
}

/**
 * Anything that makes a script more than one simple command: lists, pipes, background,
 * redirections, subshells, command substitution (`$(…)`, backticks), line breaks.
 * Variable expansion (`$OUT`, `${OUT}`) runs nothing and is allowed.
 */
const COMPOUND = /[;&|<>()`\n\r]/;
const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*=/;

/**
 * The words of a simple command after leading `NAME=value` assignments, quotes around a
 * word removed; undefined when the script is not one simple command (then it is never
 * excluded from the sandbox: `docker ps; rm -rf ~` must not leave it because it starts
 * with `docker`). A raw argv is its own words.
 */
export function commandWords(invocation: Invocation): string[] | undefined {
  if (invocation.kind === 'raw') return invocation.argv;
  if (COMPOUND.test(invocation.script)) return undefined;
  const words = invocation.script.split(/[ \t]+/).filter((word) => word !== '');
  let start = 0;
  while (start < words.length && ASSIGNMENT.test(words[start] ?? '')) start++;
  const rest = words.slice(start).map(unquote);
  return rest.length > 0 ? rest : undefined;
}

function unquote(word: string): string {
  const quoted = word.length >= 2 && (word[0] === '"' || word[0] === "'") && word.at(-1) === word[0];
  return quoted ? word.slice(1, -1) : word;
}

/**
 * Whether `excludedCommands` names this command. An entry is one or more words
 * (`docker`, `git push`; a trailing `*` or `:*` is allowed and means the same); it
 * matches when the command's words start with them, the first compared by name or by
 * the base name of a path (`/usr/bin/docker` matches `docker`).
 */
export function isExcluded(invocation: Invocation, excludedCommands: readonly string[]): boolean {
  const words = commandWords(invocation);
  const root = words?.[0];
  if (!words || root === undefined) return false;
  return excludedCommands.some((entry) => {
    const wanted = entry.trim().replace(/\s*:?\*$/, '').split(/\s+/).filter((word) => word !== '');
    const [first, ...more] = wanted;
    if (first === undefined) return false;
    if (root !== first && path.posix.basename(root) !== first) return false;
    return more.every((word, index) => words[index + 1] === word);
  });
}
