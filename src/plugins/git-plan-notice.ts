import { closeSync, constants as C, fstatSync, lstatSync, openSync, readdirSync, readFileSync, readSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { Stage, type Broker, type BrokerPlugin, type ResolvedRequest, type Turn } from '../core/index.js';
import { parseOptions } from './options.js';

/**
 * A stopped rebase, `git am`, cherry-pick or revert keeps what is left of it in a folder
 * of the git directory, and the person's `--continue` carries that out outside any
 * sandbox: the rebase plan's `exec` lines run in a shell, and a merge strategy that is
 * not git's own runs as a program (`/x` runs `git-merge-/x` from the work tree). Git
 * writes these folders for every such operation, so writing them cannot need approval.
 * Instead, when a turn leaves one that it created or changed, its commit says so in
 * `turn.facts.notices`, with the commands and strategy programs it found; `brokered-shell
 * run` prints each notice. Followed: the folders of the roots' repository (its linked
 * worktrees' and submodules' too), taken at the turn's start; any other such folder from
 * the first request of the turn that names it or moves a folder into a `.git` above it.
 * (A symlink made in such a folder asks: file-safety's git-directories.ts.)
 */
export const PLUGIN_NAME = 'git-plan-notice';

const optionsSchema = z.strictObject({
  /** Where the command works (the writable roots): each one's repository is looked at. */
  roots: z.array(z.string().startsWith('/')).default([]),
});
export type GitPlanNoticeOptions = z.input<typeof optionsSchema>;

/** The folders of a git directory a stopped operation leaves, what it is, and how a person goes on or out. */
export const STOPPED_STATES = [
  { folder: 'rebase-merge', what: 'a stopped rebase', resume: 'git rebase --continue', abort: 'git rebase --abort' },
  { folder: 'rebase-apply', what: 'a stopped rebase or am', resume: 'git rebase --continue or git am --continue', abort: 'git rebase --abort or git am --abort' },
  { folder: 'sequencer', what: 'a stopped cherry-pick or revert', resume: 'git cherry-pick --continue or git revert --continue', abort: 'git cherry-pick --abort or git revert --abort' },
] as const;
type StoppedState = (typeof STOPPED_STATES)[number];

/** Git's own merge strategies; any other name runs a program. */
const BUILTIN_STRATEGIES: ReadonlySet<string> = new Set(['ort', 'recursive', 'resolve', 'octopus', 'ours', 'subtree']);
/** Files larger than this are not read: the notice then only says the folder is there. */
const MAX_READ_BYTES = 1024 * 1024;
/** Linked worktrees and submodule folders looked at per repository, and folders followed per turn. */
const MAX_ENTRIES = 256;
const MAX_FOLDERS = 256;
/** Folders described at a commit; more are counted in one line. */
const MAX_NOTICES = 16;
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
    const raw = (setting[2] ?? '').trim();
    if (raw.endsWith('\\')) unread = true;
    values.push(configValue(raw));
  }
  return { values, unread };
}

/** A config value as git takes it: quotes removed, `\x` read as `x`, a comment outside quotes dropped. */
function configValue(raw: string): string {
  let out = '';
  let quoted = false;
  for (let i = 0; i < raw.length; i += 1) {
    const c = raw[i] as string;
    if (c === '\\' && i + 1 < raw.length) out += raw[(i += 1)];
    else if (c === '"') quoted = !quoted;
    else if (!quoted && (c === '#' || c === ';')) break;
    else out += c;
  }
  return out.trim();
}

/** A command as a person can read it whole: whitespace runs as one space, and a long one shown at both ends. */
export function shown(command: string): string {
  const flat = command.replace(/\s+/g, ' ');
  if (flat.length <= SHOWN_HEAD + SHOWN_TAIL + 20) return flat;
  return `${flat.slice(0, SHOWN_HEAD)} …(${flat.length - SHOWN_HEAD - SHOWN_TAIL} characters)… ${flat.slice(-SHOWN_TAIL)}`;
}

/** The git directory of the repository `dir` is in (its `.git` folder, or where a `.git` file points), if any. */
export function gitDirOf(dir: string): string | undefined {
  for (let at = dir; ; at = path.dirname(at)) {
    const dotGit = path.join(at, '.git');
    const stats = lstatQuietly(dotGit);
    if (stats?.isDirectory()) return dotGit;
    if (stats?.isFile()) {
      const pointer = /^gitdir:[ \t]*(.+?)[ \t]*$/m.exec(readSmall(dotGit) ?? '');
      return pointer?.[1] ? path.resolve(at, pointer[1]) : undefined;
    }
    if (at === path.dirname(at)) return undefined;
  }
}

/** Every stopped-operation folder of the repository whose git directory is `gitDir`: its own, its common dir's, each linked worktree's. */
export function stateFoldersOf(gitDir: string): string[] {
  const commonText = readSmall(path.join(gitDir, 'commondir'))?.trim();
  const common = commonText ? path.resolve(gitDir, commonText) : gitDir;
  const dirs = new Set([gitDir, common]);
  for (const name of namesIn(path.join(common, 'worktrees')).slice(0, MAX_ENTRIES)) dirs.add(path.join(common, 'worktrees', name));
  for (const dir of [...dirs]) for (const module of submoduleGitDirs(dir)) dirs.add(module);
  return [...dirs].flatMap((dir) => STOPPED_STATES.map((state) => path.join(dir, state.folder)));
}

/** The submodules' git dirs under `gitDir`'s `modules` (a submodule's name may hold slashes; nested ones too), a bounded number. */
function submoduleGitDirs(gitDir: string): string[] {
  const found: string[] = [];
  const queue = [path.join(gitDir, 'modules')];
  for (let looked = 0; queue.length > 0 && looked < MAX_ENTRIES; looked += 1) {
    const dir = queue.shift() as string;
    if (lstatQuietly(path.join(dir, 'HEAD'))) {
      found.push(dir);
      queue.push(path.join(dir, 'modules'));
      continue;
    }
    for (const name of namesIn(dir)) if (lstatQuietly(path.join(dir, name))?.isDirectory()) queue.push(path.join(dir, name));
  }
  return found;
}

/**
 * The stopped-operation folder a changed path is in or names, when that folder's parent is
 * a git directory: it holds a `HEAD` and `objects` (a repository's, a submodule's) or
 * `commondir` (a linked worktree's). A reflog's or a remote's `HEAD` folder is none, so a
 * branch called `sequencer` is not taken for one.
 */
export function stateFolderAt(changed: string): string | undefined {
  const parts = changed.split('/');
  for (let i = parts.length - 1; i > 1; i -= 1) {
    if (!STOPPED_STATES.some((state) => state.folder === parts[i])) continue;
    const parent = parts.slice(0, i).join('/');
    if (isGitDirectory(parent)) return `${parent}/${parts[i]}`;
  }
  return undefined;
}

function isGitDirectory(dir: string): boolean {
  return lstatQuietly(`${dir}/HEAD`) !== undefined && (lstatQuietly(`${dir}/objects`) !== undefined || lstatQuietly(`${dir}/commondir`) !== undefined);
}

export class GitPlanNoticePlugin implements BrokerPlugin {
  readonly name = PLUGIN_NAME;
  readonly #roots: string[];
  /** Each followed folder as it was before the turn changed it (`absent`: not there). */
  #before = new Map<string, string>();
  /** Folders the turn named past the limit: not looked at, and said so. */
  #unfollowed = 0;

  constructor(options: GitPlanNoticeOptions = {}) {
    this.#roots = parseOptions(PLUGIN_NAME, optionsSchema, options).roots;
  }

  apply(broker: Broker): void {
    broker.hooks.turnStarted.tap(this.name, () => {
      this.#before = new Map(this.#rootFolders().map((folder) => [folder, folderIdentity(folder)]));
      this.#unfollowed = 0;
    });
    // Before the operation: a folder elsewhere is taken as it was when the turn first names it.
    broker.hooks.decided.tap({ name: this.name, stage: Stage.LATE }, (_decision, resolved) => this.#follow(resolved));
    broker.hooks.turnCommitting.tap(this.name, (turn) => this.#report(turn));
  }

  #follow(resolved: ResolvedRequest): void {
    const movesFolder = resolved.request.operation === 'rename' && resolved.targets.some((t) => t.role === 'from' && t.kind === 'directory');
    for (const target of resolved.targets) {
      if (target.access === 'read') continue;
      const folder = stateFolderAt(target.resolved);
      if (folder !== undefined) this.#take(folder);
      // A folder moved into a git directory (a git dir of its own, say) brings what is in it.
      if (movesFolder && target.role === 'to' && folder === undefined && target.resolved.split('/').includes('.git')) {
        for (const state of STOPPED_STATES) this.#take(path.join(target.resolved, state.folder));
      }
    }
  }

  /** Follow `folder` from now, as it is now, unless it is followed already. */
  #take(folder: string): void {
    if (this.#before.has(folder)) return;
    if (this.#before.size >= MAX_FOLDERS) {
      this.#unfollowed += 1;
      return;
    }
    this.#before.set(folder, folderIdentity(folder));
  }

  #report(turn: Turn): void {
    const left = [...this.#before].filter(([folder, before]) => {
      const now = folderIdentity(folder);
      return now !== 'absent' && now !== before;
    });
    const notices = left.slice(0, MAX_NOTICES).map(([folder]) => noticeFor(folder));
    if (left.length > MAX_NOTICES) notices.push(`and ${left.length - MAX_NOTICES} more stopped git operations the command left: ${left.slice(MAX_NOTICES).map(([folder]) => folder).join(', ')}`);
    if (this.#unfollowed > 0) notices.push(`the command changed ${this.#unfollowed} more places where git keeps a stopped rebase, am, cherry-pick or revert than were looked at (${MAX_FOLDERS}): read what git would continue in each repository there before continuing it`);
    if (notices.length === 0) return;
    const earlier = Array.isArray(turn.facts.notices) ? (turn.facts.notices as unknown[]).filter((n): n is string => typeof n === 'string') : [];
    turn.facts.notices = [...earlier, ...notices];
  }

  #rootFolders(): string[] {
    const gitDirs = new Set(this.#roots.map(gitDirOf).filter((dir): dir is string => dir !== undefined));
    return [...gitDirs].flatMap(stateFoldersOf);
  }
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
    const strategy = read('strategy')?.trim();
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

/** The files continuing reads what it runs from: always looked at, however many others the folder holds. */
const KEY_FILES = ['git-rebase-todo', 'strategy', 'opts', 'todo'];
/** Entries of a stopped-operation folder looked at one by one; a folder with more is taken as changed each time. */
const MAX_WATCHED_ENTRIES = 10_000;

/** A folder's entries and each one's identity, enough to tell one created, changed or replaced since. */
function folderIdentity(folder: string): string {
  const self = lstatQuietly(folder);
  if (!self) return 'absent';
  const parts = [identityOf(self)];
  if (self.isDirectory()) {
    const names = namesIn(folder);
    // Too many to look at each: never taken as unchanged.
    if (names.length > MAX_WATCHED_ENTRIES) return `${parts[0]}\nunwatched ${names.length} ${process.hrtime.bigint()}`;
    for (const name of new Set([...KEY_FILES, ...names.sort()])) parts.push(`${name}=${identityOf(lstatQuietly(path.join(folder, name)))}`);
  }
  return parts.join('\n');
}

function identityOf(stats: ReturnType<typeof lstatQuietly>): string {
  return stats ? `${stats.mode}:${stats.ino}:${stats.size}:${stats.mtimeNs}:${stats.ctimeNs}` : 'absent';
}

/** What is at `file`, or undefined when nothing can be seen there (missing, a file in the way, no permission). */
function lstatQuietly(file: string) {
  try {
    return lstatSync(file, { bigint: true, throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

function namesIn(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
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

/** A small regular file's text (`.git` pointer, `commondir`), never through a symlink. */
function readSmall(file: string): string | undefined {
  try {
    const stats = lstatSync(file);
    return stats.isFile() && stats.size <= 4096 ? readFileSync(file, 'utf8') : undefined;
  } catch {
    return undefined;
  }
}
