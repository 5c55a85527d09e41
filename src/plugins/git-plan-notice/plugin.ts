import path from 'node:path';
import { z } from 'zod';
import { Stage, type Broker, type BrokerPlugin, type ResolvedRequest, type Turn } from '../../core/index.js';
import { parseOptions } from '../options.js';
import { noticeFor } from './notice.js';
import { folderIdentity, gitDirOf, isGitDirectory, markedGitDirectory, stateFolderAt, stateFoldersIn, stateFoldersOf } from './state.js';

/**
 * A stopped rebase, `git am`, cherry-pick or revert keeps what is left of it in a folder
 * of the git directory, and the person's `--continue` carries that out outside any
 * sandbox: the rebase plan's `exec` lines run in a shell, and a merge strategy that is
 * not git's own runs as a program (`/x` runs `git-merge-/x` from the work tree). Git
 * writes these folders for every such operation, so writing them cannot need approval.
 * Instead, when a turn leaves one that it created or changed, its commit says so in
 * `turn.facts.notices`, with the commands and strategy programs it found; `brokered-shell
 * run` prints each notice, and `backups restore` the same for what it writes in a git
 * directory. Followed: the folders of the roots' repository (its linked worktrees' and
 * submodules' too), taken at the turn's start; any other such folder from the first
 * request of the turn that names it, moves a folder into a `.git` above it, or changes
 * its git directory's `HEAD`, `objects` or `commondir`. Whether a folder's parent is a
 * git directory is asked at the commit. (A symlink made in such a folder asks:
 * file-safety's git-directories.ts.)
 */
export const PLUGIN_NAME = 'git-plan-notice';

const optionsSchema = z.strictObject({
  /** Where the command works (the writable roots): each one's repository is looked at. */
  roots: z.array(z.string().startsWith('/')).default([]),
});
export type GitPlanNoticeOptions = z.input<typeof optionsSchema>;

/** Folders followed per turn besides the roots' own; past that a turn's notice says how many more there were. */
const MAX_FOLDERS = 256;
/** Folders described at a commit; more are counted in one line. */
const MAX_NOTICES = 16;
/** Folders past the limit named in its notice. */
const SHOWN_UNFOLLOWED = 5;

export class GitPlanNoticePlugin implements BrokerPlugin {
  readonly name = PLUGIN_NAME;
  readonly #roots: string[];
  /** Each followed folder as it was before the turn changed it (`absent`: not there). */
  #before = new Map<string, string>();
  /** Folders the turn named past the limit: not looked at, and said so (a few of them by name). */
  #unfollowed = 0;
  #unfollowedNamed: string[] = [];
  /** Folders of the roots' repository, followed from the turn's start: not counted against the limit. */
  #rootCount = 0;

  constructor(options: GitPlanNoticeOptions = {}) {
    this.#roots = parseOptions(PLUGIN_NAME, optionsSchema, options).roots;
  }

  apply(broker: Broker): void {
    broker.hooks.turnStarted.tap(this.name, () => {
      this.#before = new Map(this.#rootFolders().map((folder) => [folder, folderIdentity(folder)]));
      this.#rootCount = this.#before.size;
      this.#unfollowed = 0;
      this.#unfollowedNamed = [];
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
      // A folder that this change may make a git directory (its HEAD, objects or commondir):
      // what it holds of a stopped operation is new to the person if it is none yet.
      const marked = markedGitDirectory(target.resolved);
      if (marked !== undefined) {
        const becomes = !isGitDirectory(marked);
        for (const folder of stateFoldersIn(marked)) this.#take(folder, becomes);
      }
      // A folder moved into a git directory (a git dir of its own, say) brings what is in it.
      if (movesFolder && target.role === 'to' && folder === undefined && target.resolved.split('/').includes('.git')) {
        for (const folder of stateFoldersIn(target.resolved)) this.#take(folder);
      }
    }
  }

  /** Follow `folder` from now, as it is now (as absent when `isNew`), unless it is followed already. */
  #take(folder: string, isNew = false): void {
    const followed = this.#before.has(folder);
    if (followed && !isNew) return;
    if (!followed && this.#before.size - this.#rootCount >= MAX_FOLDERS) {
      this.#unfollowed += 1;
      if (this.#unfollowedNamed.length < SHOWN_UNFOLLOWED) this.#unfollowedNamed.push(folder);
      return;
    }
    this.#before.set(folder, isNew ? 'absent' : folderIdentity(folder));
  }

  #report(turn: Turn): void {
    // Whether a folder is a git directory is asked now, when the person would continue.
    const left = [...this.#before].filter(([folder, before]) => {
      const now = folderIdentity(folder);
      return now !== 'absent' && now !== before && isGitDirectory(path.dirname(folder));
    });
    const notices = left.slice(0, MAX_NOTICES).map(([folder]) => noticeFor(folder));
    if (left.length > MAX_NOTICES) notices.push(`and ${left.length - MAX_NOTICES} more stopped git operations the command left: ${left.slice(MAX_NOTICES).map(([folder]) => folder).join(', ')}`);
    if (this.#unfollowed > 0) {
      const some = this.#unfollowedNamed.join(', ') + (this.#unfollowed > this.#unfollowedNamed.length ? ', …' : '');
      notices.push(`the command changed ${this.#unfollowed} more places where git keeps a stopped rebase, am, cherry-pick or revert than were looked at (${MAX_FOLDERS}): ${some}; read what git would continue in each repository there before continuing it`);
    }
    if (notices.length === 0) return;
    const earlier = Array.isArray(turn.facts.notices) ? (turn.facts.notices as unknown[]).filter((n): n is string => typeof n === 'string') : [];
    turn.facts.notices = [...earlier, ...notices];
  }

  #rootFolders(): string[] {
    const gitDirs = new Set(this.#roots.map(gitDirOf).filter((dir): dir is string => dir !== undefined));
    return [...gitDirs].flatMap(stateFoldersOf);
  }
}

