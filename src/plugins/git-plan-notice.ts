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
/** Entries of a folder looked at, linked worktrees per repository, and folders followed per turn. */
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

/** The merge strategy named in a sequencer's `opts` (git config syntax), if any. */
export function optsStrategy(text: string): string | undefined {
  const value = /^[ \t]*strategy[ \t]*=[ \t]*(.*?)[ \t]*$/m.exec(text)?.[1];
  return value === undefined ? undefined : value.replace(/^"(.*)"$/, '$1');
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
 * The stopped-operation folder a changed path is in or names, when that folder's parent
 * is a git directory (named `.git`, inside one, or holding a `HEAD`); undefined otherwise.
 */
export function stateFolderAt(changed: string): string | undefined {
  const parts = changed.split('/');
  for (let i = parts.length - 1; i > 1; i -= 1) {
    if (!STOPPED_STATES.some((state) => state.folder === parts[i])) continue;
    const parent = parts.slice(0, i);
    if (parent.includes('.git') || lstatQuietly(`${parent.join('/')}/HEAD`) !== undefined) return [...parent, parts[i]].join('/');
  }
  return undefined;
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

/** What continuing the operation would run: the plan's commands, a strategy that is a program. */
function programsIn(folder: string, state: StoppedState): string[] {
  const runs: string[] = [];
  let strategy: string | undefined;
  if (state.folder === 'rebase-merge') {
    const commands = execLines(readRegular(path.join(folder, 'git-rebase-todo')) ?? '');
    runs.push(...commands.slice(0, SHOWN_COMMANDS).map(shown));
    if (commands.length > SHOWN_COMMANDS) runs.push(`and ${commands.length - SHOWN_COMMANDS} more commands`);
    strategy = readRegular(path.join(folder, 'strategy'))?.trim();
  } else if (state.folder === 'sequencer') {
    strategy = optsStrategy(readRegular(path.join(folder, 'opts')) ?? '');
  }
  if (strategy && !BUILTIN_STRATEGIES.has(strategy)) runs.push(`the merge strategy ${JSON.stringify(shown(strategy))}, a program (git-merge-${shown(strategy)})`);
  return runs;
}

/** The files continuing reads what it runs from: always looked at, however many others the folder holds. */
const KEY_FILES = ['git-rebase-todo', 'strategy', 'opts', 'todo'];

/** A folder's entries and each one's identity, enough to tell one created, changed or replaced since. */
function folderIdentity(folder: string): string {
  const self = lstatQuietly(folder);
  if (!self) return 'absent';
  const parts = [identityOf(self)];
  if (self.isDirectory()) {
    const names = new Set([...KEY_FILES, ...namesIn(folder).sort().slice(0, MAX_ENTRIES)]);
    for (const name of names) parts.push(`${name}=${identityOf(lstatQuietly(path.join(folder, name)))}`);
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

/** A regular file's text, or undefined when it is anything else, unreadable or too large. */
function readRegular(file: string): string | undefined {
  // Only a regular file is opened: opening a FIFO can hang, opening a device can act.
  const seen = lstatQuietly(file);
  if (!seen?.isFile()) return undefined;
  let fd: number;
  try {
    fd = openSync(file, C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const stats = fstatSync(fd, { bigint: true });
    if (!stats.isFile() || stats.ino !== seen.ino || stats.dev !== seen.dev || stats.size > BigInt(MAX_READ_BYTES)) return undefined;
    const buffer = Buffer.alloc(Number(stats.size));
    let filled = 0;
    for (let got = -1; got !== 0 && filled < buffer.length; filled += got) got = readSync(fd, buffer, filled, buffer.length - filled, filled);
    return buffer.subarray(0, filled).toString('utf8');
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
