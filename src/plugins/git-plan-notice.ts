import { closeSync, constants as C, fstatSync, lstatSync, openSync, readdirSync, readFileSync, readlinkSync, readSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { Stage, type Broker, type BrokerPlugin, type Outcome, type Turn } from '../core/index.js';
import { parseOptions } from './options.js';

/**
 * Git keeps the plan of a stopped rebase, and of a stopped cherry-pick or revert of several
 * commits, in a file it carries out at `--continue`: an `exec` line there runs on the
 * person's machine, outside any sandbox, once they continue. Git writes that plan for every
 * rebase, so writing it cannot need approval. Instead, when a turn leaves such a plan with
 * commands in it, written or replaced during the turn, its commit says so in
 * `turn.facts.notices`; `brokered-shell run` prints each notice.
 */
export const PLUGIN_NAME = 'git-plan-notice';

const optionsSchema = z.strictObject({
  /** Where the command works (the writable roots): each one's repository is looked at. */
  roots: z.array(z.string().startsWith('/')).default([]),
});
export type GitPlanNoticeOptions = z.input<typeof optionsSchema>;

/** The plans git carries out at `--continue`, by the folder it keeps each in, and how a person continues it. */
const PLANS = [
  { folder: 'rebase-merge', file: 'git-rebase-todo', what: 'a stopped rebase', resume: 'git rebase --continue', abort: 'git rebase --abort' },
  { folder: 'sequencer', file: 'todo', what: 'a stopped cherry-pick or revert', resume: 'git cherry-pick --continue or git revert --continue', abort: 'git cherry-pick --abort' },
] as const;
type Plan = (typeof PLANS)[number];

/** More than a plan of this size is not read: the notice then says to read it. */
const MAX_PLAN_BYTES = 1024 * 1024;
/** Linked worktrees looked at per repository. */
const MAX_WORKTREES = 256;
const SHOWN_LINES = 3;
const SHOWN_LINE_CHARS = 200;

/** A plan's commands: git takes `exec` or `x`, after any indentation, as a line that runs the rest in a shell. */
export function execLines(text: string): string[] {
  return text.split('\n').filter((line) => /^[ \t]*(?:exec|x)(?:[ \t]|$)/.test(line)).map((line) => line.trim());
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

/** Every plan file of the repository whose git directory is `gitDir`: its own, its common dir's, each linked worktree's. */
export function planFilesOf(gitDir: string): string[] {
  const commonText = readSmall(path.join(gitDir, 'commondir'))?.trim();
  const common = commonText ? path.resolve(gitDir, commonText) : gitDir;
  const dirs = new Set([gitDir, common]);
  let worktrees: string[] = [];
  try {
    worktrees = readdirSync(path.join(common, 'worktrees')).slice(0, MAX_WORKTREES);
  } catch {
    // No linked worktrees.
  }
  for (const name of worktrees) dirs.add(path.join(common, 'worktrees', name));
  return [...dirs].flatMap((dir) => PLANS.map((plan) => path.join(dir, plan.folder, plan.file)));
}

/** The plan file a changed path belongs to, when one of its folders is where git keeps a plan. */
export function planFileAt(changed: string): string | undefined {
  const parts = changed.split('/');
  for (let i = parts.length - 1; i > 0; i -= 1) {
    const plan = PLANS.find((p) => p.folder === parts[i]);
    if (plan) return [...parts.slice(0, i + 1), plan.file].join('/');
  }
  return undefined;
}

export class GitPlanNoticePlugin implements BrokerPlugin {
  readonly name = PLUGIN_NAME;
  readonly #roots: string[];
  /** What each plan file was when the turn began (absent: not there). */
  #before = new Map<string, string>();
  /** Plan files whose folders the turn's requests named. */
  #named = new Set<string>();

  constructor(options: GitPlanNoticeOptions = {}) {
    this.#roots = parseOptions(PLUGIN_NAME, optionsSchema, options).roots;
  }

  apply(broker: Broker): void {
    broker.hooks.turnStarted.tap(this.name, () => {
      this.#named = new Set();
      this.#before = new Map(this.#rootPlans().map((file) => [file, identity(file)]));
    });
    broker.hooks.requestDone.tap({ name: this.name, stage: Stage.LATE }, (outcome) => this.#note(outcome));
    broker.hooks.turnCommitting.tap(this.name, (turn) => this.#report(turn));
  }

  #note(outcome: Outcome): void {
    if (!outcome.ok) return;
    for (const target of outcome.targets) {
      if (target.access === 'read') continue;
      const file = planFileAt(target.resolved);
      if (file !== undefined) this.#named.add(file);
    }
  }

  #report(turn: Turn): void {
    const files = new Set([...this.#rootPlans(), ...this.#named]);
    const notices: string[] = [];
    for (const file of files) {
      const now = identity(file);
      if (now === 'absent' || now === this.#before.get(file)) continue;
      const notice = noticeFor(file);
      if (notice) notices.push(notice);
    }
    if (notices.length === 0) return;
    const earlier = Array.isArray(turn.facts.notices) ? (turn.facts.notices as unknown[]).filter((n): n is string => typeof n === 'string') : [];
    turn.facts.notices = [...earlier, ...notices];
  }

  #rootPlans(): string[] {
    const gitDirs = new Set(this.#roots.map(gitDirOf).filter((dir): dir is string => dir !== undefined));
    return [...gitDirs].flatMap(planFilesOf);
  }
}

/** What a person should know about the plan at `file` before continuing it, or undefined when it runs nothing. */
export function noticeFor(file: string): string | undefined {
  const plan = PLANS.find((p) => file.endsWith(`/${p.folder}/${p.file}`));
  if (!plan) return undefined;
  // Not followed: what a link names is the person's to read, and the command may change it later.
  const link = symlinkTarget(file);
  if (link !== undefined) return `${plan.what} left its plan as a symlink to ${link}, which git reads at ${plan.resume}: read it first, or ${plan.abort}`;
  const text = readPlan(file);
  if (text === undefined) return `${plan.what} left a plan git carries out at ${plan.resume} that could not be read: read ${file} first, or ${plan.abort}`;
  const lines = execLines(text);
  return lines.length === 0 ? undefined : `${describe(plan, lines)}; read ${file} first, or ${plan.abort}`;
}

function describe(plan: Plan, lines: string[]): string {
  const shown = lines.slice(0, SHOWN_LINES).map((line) => (line.length > SHOWN_LINE_CHARS ? `${line.slice(0, SHOWN_LINE_CHARS)}…` : line));
  const more = lines.length > SHOWN_LINES ? ` and ${lines.length - SHOWN_LINES} more` : '';
  return `${plan.what} will run ${lines.length === 1 ? 'a command' : `${lines.length} commands`} outside the sandbox at ${plan.resume}: ${shown.join(' | ')}${more}`;
}

/** Identity enough to tell a plan written or replaced since: inode, size and both times. */
function identity(file: string): string {
  const stats = lstatQuietly(file);
  return stats ? `${stats.ino}:${stats.size}:${stats.mtimeNs}:${stats.ctimeNs}` : 'absent';
}

/** What is at `file`, or undefined when nothing can be seen there (missing, a file in the way, no permission). */
function lstatQuietly(file: string) {
  try {
    return lstatSync(file, { bigint: true, throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

function symlinkTarget(file: string): string | undefined {
  try {
    return readlinkSync(file);
  } catch {
    return undefined;
  }
}

/** A regular file's text, or undefined when it is anything else, unreadable or too large. */
function readPlan(file: string): string | undefined {
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
    if (!stats.isFile() || stats.ino !== seen.ino || stats.dev !== seen.dev || stats.size > BigInt(MAX_PLAN_BYTES)) return undefined;
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
