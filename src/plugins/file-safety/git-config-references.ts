import path from 'node:path';
import type { GitConfigEntry, ParsedGitConfig } from './git-config-parse.js';

/*
 * What a repository's config points git at, beyond `.git/hooks` and `.git/config`: the
 * files it includes (read as config), the hooks folder `core.hooksPath` names, and the
 * files named in values git runs as commands. Each is a path a command in the sandbox
 * could write to have git run it at the person's next `git commit` or `git status`.
 */

/** Keys whose value git runs as a command (`section.key`, or `section.*.key` for any subsection). */
const COMMAND_KEYS: ReadonlySet<string> = new Set([
  'core.fsmonitor',
  'core.sshcommand',
  'core.editor',
  'core.pager',
  'core.askpass',
  'core.gitproxy',
  'core.alternaterefscommand',
  'sequence.editor',
  'diff.external',
  'diff.*.command',
  'diff.*.textconv',
  'merge.*.driver',
  'mergetool.*.cmd',
  'difftool.*.cmd',
  'filter.*.clean',
  'filter.*.smudge',
  'filter.*.process',
  'credential.helper',
  'credential.*.helper',
  'gpg.program',
  'gpg.*.program',
  'gpg.ssh.defaultkeycommand',
  'interactive.difffilter',
  'pager.*',
  'alias.*',
  'browser.*.cmd',
  'man.*.cmd',
  'guitool.*.cmd',
  'sendemail.sendmailcmd',
  'sendemail.*.sendmailcmd',
  'sendemail.smtpserver',
  'sendemail.*.smtpserver',
  'sendemail.tocmd',
  'sendemail.*.tocmd',
  'sendemail.cccmd',
  'sendemail.*.cccmd',
  'sendemail.headercmd',
  'remote.*.uploadpack',
  'remote.*.receivepack',
  'submodule.*.update',
  'trailer.*.command',
  'trailer.*.cmd',
  'hook.*.command',
  'imap.tunnel',
  'uploadpack.packobjectshook',
  'instaweb.httpd',
]);
/** Keys whose whole value is the path of a program git runs. */
const PROGRAM_PATH_KEYS: ReadonlySet<string> = new Set(['mergetool.*.path', 'difftool.*.path', 'browser.*.path', 'man.*.path']);
const INCLUDE_KEYS: ReadonlySet<string> = new Set(['include.path', 'includeif.*.path']);

/** `section.*.key` for a key with a subsection, `section.key` (and `section.*` for a two-part key) otherwise. */
function shapesOf(key: string): string[] {
  const first = key.indexOf('.');
  const last = key.lastIndexOf('.');
  if (first < 0) return [key];
  if (first === last) return [key, `${key.slice(0, first)}.*`];
  return [`${key.slice(0, first)}.*${key.slice(last)}`];
}

export type KeyKind = 'include' | 'hooks' | 'worktree' | 'command' | 'program';

export function kindOf(key: string): KeyKind | undefined {
  const shapes = shapesOf(key);
  if (shapes.some((shape) => INCLUDE_KEYS.has(shape))) return 'include';
  if (key === 'core.hookspath') return 'hooks';
  if (key === 'core.worktree') return 'worktree';
  if (shapes.some((shape) => PROGRAM_PATH_KEYS.has(shape))) return 'program';
  if (shapes.some((shape) => COMMAND_KEYS.has(shape))) return 'command';
  return undefined;
}

/**
 * The words of a command as a shell would split it (quotes and `\` taken off; operators,
 * braces and `!` separate words). Every word counts, not only the first: `sh hooks/x`
 * runs `hooks/x` as surely as `./hooks/x` does. What follows `=` in a word counts too
 * (`--file=x`, `-c core.fsmonitor=x`).
 */
export function commandWords(command: string): string[] {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  let quote: string | undefined;
  const end = () => {
    if (inWord) words.push(word);
    word = '';
    inWord = false;
  };
  for (let i = 0; i < command.length; i += 1) {
    const c = command[i] as string;
    if (quote === "'") {
      if (c === "'") quote = undefined;
      else word += c;
    } else if (quote === '"') {
      if (c === '"') quote = undefined;
      else word += c === '\\' && i + 1 < command.length ? (command[++i] as string) : c;
    } else if (c === "'" || c === '"') {
      quote = c;
      inWord = true;
    } else if (c === '\\') {
      word += command[++i] ?? '';
      inWord = true;
    } else if (/[\s;&|()<>`!{}]/.test(c)) end();
    else {
      word += c;
      inWord = true;
    }
  }
  end();
  return words.flatMap((each) => (each.includes('=') ? [each, each.slice(each.indexOf('=') + 1)] : [each])).filter((each) => each !== '' && !each.startsWith('-') && !each.includes('$'));
}

/** A config file read, with where it came from (for reasons). */
export interface ReadFile {
  readonly file: string;
  readonly entries: readonly GitConfigEntry[];
}

export interface FileReader {
  /** `missing` when there is no such file (git skips a missing include). */
  (file: string): ParsedGitConfig | 'missing';
}

export interface ConfigChain {
  /** Every file read or looked for, with why it is config. */
  readonly files: Map<string, string>;
  readonly read: ReadFile[];
  /** Files that could not be read, and why. */
  readonly unreadable: Array<{ file: string; why: string }>;
}

/** Git stops at this depth of includes; so does this. */
const MAX_INCLUDE_DEPTH = 10;

/**
 * Read `file` and what it includes (`include.path`, `includeIf.*.path`: whatever the
 * condition, which can turn true later: another branch, the repository moved), relative
 * to the including file, `~` as home.
 */
export function readChain(file: string, why: string, readFile: FileReader, homes: readonly string[], chain: ConfigChain, depth = 0): void {
  if (chain.files.has(file)) return;
  chain.files.set(file, why);
  const parsed = readFile(file);
  if (parsed === 'missing') return;
  if ('error' in parsed) {
    chain.unreadable.push({ file, why: parsed.error });
    return;
  }
  chain.read.push({ file, entries: parsed.entries });
  for (const entry of parsed.entries) {
    if (kindOf(entry.key) !== 'include') continue;
    if (entry.value === null || entry.value === '') {
      chain.unreadable.push({ file, why: `line ${entry.line}: ${entry.key} has no path` });
      continue;
    }
    if (depth + 1 >= MAX_INCLUDE_DEPTH) {
      chain.unreadable.push({ file, why: `includes nest deeper than ${MAX_INCLUDE_DEPTH}` });
      continue;
    }
    for (const included of resolved(entry.value, [path.dirname(file)], homes)) {
      readChain(included, `config included by ${file} (${entry.key}, line ${entry.line}): git reads it as configuration`, readFile, homes, chain, depth + 1);
    }
  }
}

/** A path as git takes it: `~/` under each home, relative ones under each base. `~user/` is not followed (no such lookup here). */
function resolved(value: string, bases: readonly string[], homes: readonly string[]): string[] {
  if (value.startsWith('~/') || value === '~') return homes.map((home) => path.posix.join(home, value.slice(1)));
  if (value.startsWith('~')) return [];
  if (value.startsWith('/')) return [path.posix.normalize(value)];
  return bases.map((base) => path.posix.join(base, value));
}

/** The paths one repository's config makes git run or read, each with why. */
export function referencesOf(read: readonly ReadFile[], gitDir: string, workTrees: readonly string[], homes: readonly string[]): Map<string, string> {
  const found = new Map<string, string>();
  const add = (target: string, why: string) => {
    if (!found.has(target)) found.set(target, why);
  };
  // Relative paths are taken where git runs them: the top of a work tree, or the git dir.
  const trees = new Set(workTrees);
  for (const { entries } of read) {
    for (const entry of entries) if (entry.key === 'core.worktree' && entry.value) trees.add(path.posix.resolve(gitDir, entry.value));
  }
  const bases = [...trees, gitDir];
  const visit = (key: string, value: string | null, where: string, nested: boolean) => {
    const kind = kindOf(key);
    if (value === null || value === '' || kind === undefined || kind === 'include' || kind === 'worktree') return;
    if (kind === 'hooks') {
      for (const dir of resolved(value, bases, homes)) add(dir, `the hooks folder core.hooksPath names (${where}): git runs the hooks in it`);
      return;
    }
    if (kind === 'program') {
      for (const program of resolved(value, bases, homes)) add(program, `the program ${key} names (${where}): git runs it`);
      return;
    }
    const words = commandWords(value);
    for (const word of words) for (const file of resolved(word, bases, homes)) add(file, `named in the command ${key} gives (${where}): git runs it`);
    // An alias may set config for the command it runs: `-c core.hooksPath=x commit`.
    if (!nested && key.startsWith('alias.')) {
      const raw = value.split(/\s+/);
      raw.forEach((word, index) => {
        const setting = word === '-c' ? raw[index + 1] : undefined;
        const equals = setting?.indexOf('=') ?? -1;
        if (setting && equals > 0) visit(setting.slice(0, equals).toLowerCase(), setting.slice(equals + 1), `${where}, through ${key}`, true);
      });
    }
  };
  for (const { file, entries } of read) for (const entry of entries) visit(entry.key, entry.value, `${file}, line ${entry.line}`, false);
  return found;
}
