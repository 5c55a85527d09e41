import fs from 'node:fs/promises';
import { constants as C } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { BrokerError, ErrorCodes, toBrokerError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { BlobStore } from './blob-store.js';
import { beforeStateOf, describeState, directoryTimesDiffer, isDirectoryState, stateDifference } from './file-state.js';
import { errorCode, fsyncDir, lstatOrUndefined, removeQuietly, tempName } from './fs-util.js';
import { newTurnId } from './layout.js';
import type { AfterState, BackupEntry, DirectoryEntry, MetadataEntry, SpecialEntry, TurnEntry, TurnManifest } from './manifest-schema.js';
import { restorableEntries } from './restore-entries.js';
import { xattrNames, type MakeNode, type NodeSpec, type SetTimesNs, type XattrAccess } from './metadata-ops.js';
import { diskParents, overlayView, realMove, realView, type TreeView } from './restore-view.js';
import { isBlocked, planRenameBacks, renameBack, renameBackPaths, renamesOf, type RenameBack } from './restore-renames.js';

export interface RestoreOptions {
  /** Only these paths (absolute) and what lies under them; paths the turn did not touch are reported as `notInTurn`. */
  paths?: string[];
  /** Change nothing; report what would happen. */
  dryRun?: boolean;
  /** Restore paths that changed since the turn (or whose turn was never committed). */
  force?: boolean;
  /** Clock for the rescue turn's id and times. */
  now?: () => Date;
}

export const conflictReasonSchema = z.enum([
  /** The path is not what the turn left there: someone changed it since. */
  'changed-since-turn',
  /** The turn was never committed, so there is nothing to compare with. */
  'not-committed',
  /** A directory stands where the file was and the turn did not leave it there empty; never replaced, even with force. */
  'occupied-by-directory',
  /** A device node stands there and only root could make it again after a rescue, so only force replaces it. */
  'occupied-by-special-file',
  /** A parent directory is now a symlink (or not a directory); never written through. */
  'parent-changed',
  /** A directory the turn created still holds something the rewind does not remove; never removed, even with force. */
  'not-empty',
]);
export type ConflictReason = z.infer<typeof conflictReasonSchema>;

export const restoredItemSchema = z.strictObject({
  path: z.string(),
  /** What the path holds after the restore ('absent': the restore removed what the turn created; 'special': a FIFO, socket or device). */
  kind: z.enum(['file', 'symlink', 'directory', 'special', 'absent']),
  /** replace: something else was there; recreate: nothing was; remove: the turn created it; metadata: a directory's mode, owner, xattrs or times. */
  action: z.enum(['replace', 'recreate', 'remove', 'metadata']),
  forced: z.boolean(),
  createdParents: z.boolean(),
  /** Whether the restore put atime/mtime back to the nanosecond (absent in a dry run and for removals). */
  timesExact: z.boolean().optional(),
  /** 'not-recorded' when the backup had no xattr access; 'unavailable' when restore has none. */
  xattrs: z.enum(['restored', 'not-recorded', 'unavailable']).optional(),
});

export const restoreReportSchema = z.strictObject({
  turnId: z.string(),
  sessionId: z.string(),
  dryRun: z.boolean(),
  /** The manifest that holds what the restore replaced or removed; restore it to undo this restore. */
  rescueTurnId: z.string().optional(),
  restored: z.array(restoredItemSchema),
  conflicts: z.array(z.strictObject({ path: z.string(), reason: conflictReasonSchema, detail: z.string() })),
  skipped: z.array(
    z.strictObject({
      path: z.string(),
      reason: z.enum(['unchanged', 'too-large']),
      detail: z.string(),
      /** Set for paths recorded without content ('absent': the turn created it; 'directory'). */
      kind: z.enum(['absent', 'directory']).optional(),
    }),
  ),
  failed: z.array(z.strictObject({ path: z.string(), code: z.string(), message: z.string() })),
  notInTurn: z.array(z.string()),
});
export type RestoreReport = z.infer<typeof restoreReportSchema>;
export type RestoredItem = RestoreReport['restored'][number];

/** Several turns of one session undone newest first (`backups restore --to TURN`). */
export const rewindReportSchema = z.strictObject({
  sessionId: z.string(),
  /** The oldest turn rewound: the tree is meant to be as it was before it. */
  to: z.string(),
  dryRun: z.boolean(),
  /** One rescue turn for the whole rewind: restoring it undoes all of it. */
  rescueTurnId: z.string().optional(),
  /** One report per turn, in the order they were rewound (newest first). */
  turns: z.array(restoreReportSchema),
  /** Every turn was rewound with no conflict and no failure. */
  complete: z.boolean(),
  /** The turn that stopped the rewind: its conflicts (nothing of it was changed) or failures. Older turns were not touched. */
  stoppedAt: z.string().optional(),
  /** Requested paths no turn of the rewind touched: then nothing at all was done. */
  notInTurn: z.array(z.string()),
});
export type RewindReport = z.infer<typeof rewindReportSchema>;

/** What restore needs from the session store. */
export interface RestoreContext {
  readonly sessionId: string;
  readonly blobs: BlobStore;
  readonly log: Logger;
  readonly xattrs: XattrAccess | undefined;
  readonly setTimesNs: SetTimesNs;
  /** Makes a special file again; without it such a path fails (reported). */
  readonly makeNode: MakeNode | undefined;
  beginTurn(turnId: string, options: { kind: 'restore'; restoreOf: string; startedAt: string }): Promise<unknown>;
  /** Back up what is at `file` now (a file or symlink with its content, or a special file) into the rescue turn; `sync: false` leaves the journal's fdatasync to `syncRescue`. */
  rescue(file: string, turnId: string, options?: { sync: boolean }): Promise<unknown>;
  /** Record in the rescue turn that nothing is at `file` now (the restore is about to create it). */
  rescueAbsent(file: string, turnId: string): Promise<unknown>;
  /** Record the directory at `file` (mode, owner, times, xattrs) in the rescue turn. */
  rescueDirectory(file: string, turnId: string, options: { sync: boolean }): Promise<unknown>;
  /** Record the mode, owner, times and xattrs of the file at `file` in the rescue turn (its content stays as it is). */
  rescueMetadata(file: string, turnId: string): Promise<unknown>;
  /** Record in the rescue turn that the directory at `from` (holding `tree`) is about to be renamed to `to`. */
  rescueRename(from: string, to: string, tree: readonly string[], turnId: string): Promise<unknown>;
  /** Make everything recorded in the rescue turn so far durable. */
  syncRescue(turnId: string): Promise<unknown>;
  commitTurn(turnId: string, message: string): Promise<TurnManifest>;
}

const isRoot = () => process.geteuid?.() === 0;

/** The turn a restore keeps what it replaces or removes in, opened on the first change. */
class RescueTurn {
  #id: string | undefined;
  constructor(
    private readonly ctx: RestoreContext,
    private readonly restoreOf: string,
    private readonly now: () => Date,
  ) {}

  get id(): string | undefined {
    return this.#id;
  }

  async open(): Promise<string> {
    if (this.#id === undefined) {
      const id = newTurnId(this.now());
      await this.ctx.beginTurn(id, { kind: 'restore', restoreOf: this.restoreOf, startedAt: this.now().toISOString() });
      this.#id = id;
    }
    return this.#id;
  }

  /** Directories this apply added or removed names in, with their times before the first change. */
  readonly #touched = new Map<string, { atimeNs: bigint; mtimeNs: bigint }>();

  /** The directory a name is added to or removed from: its times are about to move. */
  async parentOf(file: string): Promise<void> {
    const dir = path.dirname(file);
    await this.ctx.rescueDirectory(dir, await this.open(), { sync: false });
    if (!this.#touched.has(dir)) {
      const stats = await lstatOrUndefined(dir);
      if (stats?.isDirectory()) this.#touched.set(dir, { atimeNs: stats.atimeNs, mtimeNs: stats.mtimeNs });
    }
  }

  /**
   * A restore's own temp files and renames move the times of the directories they happen
   * in. Put back the times those directories had before it, except where the plan set
   * them (`handled`: directories the turn recorded).
   */
  async settle(handled: ReadonlySet<string>): Promise<void> {
    for (const [dir, times] of this.#touched) {
      if (handled.has(dir)) continue;
      const stats = await lstatOrUndefined(dir);
      if (!stats?.isDirectory()) continue;
      await this.ctx.setTimesNs(dir, times.atimeNs, times.mtimeNs, { noFollow: true }).catch((error: unknown) => {
        this.ctx.log.warn({ file: { path: dir }, err: error }, 'cannot put back the times of a directory');
      });
    }
    this.#touched.clear();
  }

  /** Record that nothing is at `file` yet: the restore is about to create it. */
  async recordAbsent(file: string): Promise<void> {
    await this.ctx.rescueAbsent(file, await this.open());
  }

  async commit(message: string): Promise<string | undefined> {
    if (this.#id !== undefined) await this.ctx.commitTurn(this.#id, message);
    return this.#id;
  }
}

function emptyReport(manifest: TurnManifest, dryRun: boolean): RestoreReport {
  return { turnId: manifest.id, sessionId: manifest.sessionId, dryRun, restored: [], conflicts: [], skipped: [], failed: [], notInTurn: [] };
}

/**
 * Return each path of a turn to its state before the turn: files and symlinks get
 * their content and metadata back, what the turn created is removed, directories it
 * deleted come back with their mode and times. Paths changed since the turn are left
 * alone (conflicts) unless forced; the others are restored. Everything replaced or
 * removed is first kept in a 'restore' turn, so the restore itself can be undone.
 */
export async function restoreTurn(ctx: RestoreContext, manifest: TurnManifest, options: RestoreOptions = {}): Promise<RestoreReport> {
  const rescue = new RescueTurn(ctx, manifest.id, options.now ?? (() => new Date()));
  const dryRun = options.dryRun === true;
  const plan = await planTurn(ctx, manifest, options, realView({ setTimesNs: ctx.setTimesNs, xattrs: ctx.xattrs }));
  if (dryRun) return plan.report;
  try {
    await applyPlan(ctx, plan, rescue);
  } finally {
    // Even after a failure, what was rescued must be findable: commit the rescue turn.
    const id = await rescue.commit(`restore of ${manifest.id}`);
    if (id !== undefined) plan.report.rescueTurnId = id;
  }
  return plan.report;
}

/**
 * Undo several turns of one session, newest first (`turns` in that order), each through
 * the same plan and apply as `restoreTurn`, into one shared rescue turn (its first record
 * of a path is the state before the whole rewind, so restoring it undoes all of it).
 * Stops before a turn that has conflicts (unless forced) and after one that failed.
 */
export async function rewindTurns(ctx: RestoreContext, turns: TurnManifest[], options: RestoreOptions = {}): Promise<RewindReport> {
  const oldest = turns.at(-1);
  if (!oldest) throw new BrokerError(ErrorCodes.INVALID_OPTIONS, 'nothing to rewind');
  const dryRun = options.dryRun === true;
  const force = options.force === true;
  const rescue = new RescueTurn(ctx, oldest.id, options.now ?? (() => new Date()));
  const observe = { setTimesNs: ctx.setTimesNs, xattrs: ctx.xattrs };
  const view = dryRun ? overlayView(observe) : realView(observe);
  const report: RewindReport = { sessionId: oldest.sessionId, to: oldest.id, dryRun, turns: [], complete: true, notInTurn: [] };
  if (options.paths !== undefined) {
    // A mistyped path must not leave a half-done rewind: every name must match some turn first.
    for (const requested of options.paths) {
      const matched = [];
      for (const manifest of turns) matched.push(...(await selectEntries(manifest, [requested], [])));
      if (matched.length === 0) report.notInTurn.push(requested);
    }
    if (report.notInTurn.length > 0) {
      report.complete = false;
      return report;
    }
  }
  try {
    for (const manifest of turns) {
      const plan = await planTurn(ctx, manifest, { dryRun, force, ...(options.paths ? { paths: options.paths } : {}) }, view);
      // A path may belong to some of the turns only.
      plan.report.notInTurn = [];
      report.turns.push(plan.report);
      if (plan.report.conflicts.length > 0 && !force) {
        // Nothing of this turn is changed: what would have been restored is not reported as restored.
        plan.report.restored = [];
        report.complete = false;
        report.stoppedAt = manifest.id;
        break;
      }
      if (dryRun) assumeApplied(view, plan);
      else await applyPlan(ctx, plan, rescue);
      if (plan.report.failed.length > 0) {
        report.complete = false;
        report.stoppedAt = manifest.id;
        break;
      }
    }
  } finally {
    const message = turns.length === 1 ? `restore of ${oldest.id}` : `rewind of ${turns.length} turns to before ${oldest.id}`;
    const id = await rescue.commit(message);
    if (id !== undefined) {
      report.rescueTurnId = id;
      for (const turn of report.turns) turn.rescueTurnId = id;
    }
  }
  return report;
}

/** What will be done to one path. */
interface Step {
  entry: TurnEntry;
  /** The path as the plan found it. */
  current: AfterState;
  action: RestoredItem['action'];
  forced: boolean;
  /** Something of another type stands there and is removed (rescued) first. */
  clear: boolean;
  /** Directories: put atime/mtime back (not when something changed its names since the turn). */
  setTimes: boolean;
  createdParents: boolean;
  /** Set when an earlier phase failed for this path: later phases leave it alone. */
  failed?: boolean;
}

interface Plan {
  manifest: TurnManifest;
  report: RestoreReport;
  /** Directories the turn renamed whole, to rename back first, in this order (restore-renames.ts). */
  renameBacks: RenameBack[];
  steps: Step[];
}

const depth = (file: string) => file.split('/').length;

/** Entries of the turn, or those at or under `paths`; requested paths that match nothing go to `notInTurn`. */
async function selectEntries(manifest: TurnManifest, paths: string[] | undefined, notInTurn: string[]): Promise<TurnEntry[]> {
  const entries = restorableEntries(manifest);
  if (paths === undefined) return entries;
  const chosen = new Set<TurnEntry>();
  for (const requested of paths) {
    const forms = new Set([path.resolve(requested), await canonicalParentForm(path.resolve(requested))]);
    const matches = entries.filter((entry) => [...forms].some((form) => entry.path === form || entry.path.startsWith(form === '/' ? '/' : `${form}/`)));
    if (matches.length === 0) notInTurn.push(requested);
    for (const entry of matches) chosen.add(entry);
  }
  // Keep manifest order: it is the order the turn changed things in.
  return entries.filter((entry) => chosen.has(entry));
}

/** Manifests hold symlink-resolved paths; a person may name the file through a link. */
async function canonicalParentForm(file: string): Promise<string> {
  try {
    return path.join(await fs.realpath(path.dirname(file)), path.basename(file));
  } catch {
    return file;
  }
}

/** Decide, for every selected path, what the restore does; nothing is changed. Deepest paths first, so a directory knows whether it will be empty. */
async function planTurn(ctx: RestoreContext, manifest: TurnManifest, options: RestoreOptions, given: TreeView): Promise<Plan> {
  const report = emptyReport(manifest, options.dryRun === true);
  const selected = await selectEntries(manifest, options.paths, report.notInTurn);
  // Directories renamed whole go back first: what else the turn recorded is planned on the tree as that leaves it.
  const renames = renamesOf(selected);
  const view = renames.length > 0 && given.move === realMove ? overlayView({ setTimesNs: ctx.setTimesNs, xattrs: ctx.xattrs }) : given;
  const backs = await planRenameBacks(renames, view, options.force === true);
  for (const conflict of backs.conflicts) report.conflicts.push({ path: conflict.path, reason: 'changed-since-turn', detail: conflict.detail });
  const entries: TurnEntry[] = [];
  for (const entry of selected) {
    if (entry.kind === 'renamed') continue;
    if (isBlocked(entry, backs.blocked)) report.conflicts.push({ path: entry.path, reason: 'parent-changed', detail: 'a directory the turn renamed away from here stays where it is (see its conflict)' });
    else entries.push(entry);
  }
  if (report.dryRun) for (const back of backs.backs) report.restored.push(...renameBackItems(back));
  const order = entries.map((entry, index) => ({ entry, index })).sort((a, b) => depth(b.entry.path) - depth(a.entry.path) || a.index - b.index);
  /** Paths the plan leaves with nothing at them. */
  const gone = new Set<string>();
  const byEntry = new Map<TurnEntry, Step>();
  const willBeEmpty = async (dir: string) => (await view.children(dir)).every((name) => gone.has(path.join(dir, name)));
  // A path under a directory the turn removed and something else now stands in for waits
  // until that directory's own step is planned: if it brings the directory back, the path
  // comes back inside it in the same restore.
  const directories = new Map(entries.filter((entry) => entry.kind === 'directory').map((entry) => [entry.path, entry]));
  const waiting: Array<{ entry: TurnEntry; blocker: string; detail: string }> = [];
  const context: PlanContext = {
    force: options.force === true,
    report,
    view,
    willBeEmpty,
    awaitParent: (entry, blocker, detail) => directories.has(blocker) && waiting.push({ entry, blocker, detail }) > 0,
  };
  const plan = async (entry: TurnEntry, ctx: PlanContext) => {
    try {
      const step = await planOne(entry, ctx);
      if (!step) return;
      byEntry.set(entry, step);
      if (step.action === 'remove') gone.add(entry.path);
    } catch (error) {
      const failure = toBrokerError(error, ErrorCodes.HOST_OP_FAILED);
      report.failed.push({ path: entry.path, code: failure.code, message: failure.message });
    }
  };
  for (const { entry } of order) await plan(entry, context);
  for (const { entry, blocker, detail } of waiting) {
    const parentStep = byEntry.get(directories.get(blocker) as TurnEntry);
    if (parentStep?.action === 'replace' && parentStep.clear) await plan(entry, { ...context, awaitParent: undefined, replacedParent: blocker });
    else report.conflicts.push({ path: entry.path, reason: 'parent-changed', detail });
  }
  const steps = entries.flatMap((entry) => byEntry.get(entry) ?? []);
  if (report.dryRun) for (const step of steps) report.restored.push(restoredItem(step));
  return { manifest, report, renameBacks: backs.backs, steps };
}

/** What a rename back does, as restore reports it: the names it takes away from `to` (the turn made them there) and brings back. */
function renameBackItems(back: RenameBack): RestoredItem[] {
  const { removed, recreated } = renameBackPaths(back.entry);
  const base = { forced: back.forced, createdParents: false };
  return [
    ...removed.map((file): RestoredItem => ({ path: file, kind: 'absent', action: 'remove', ...base })),
    ...recreated.map((item): RestoredItem => ({ path: item.path, kind: item.directory ? 'directory' : 'file', action: 'recreate', ...base })),
  ];
}

interface PlanContext {
  force: boolean;
  report: RestoreReport;
  view: TreeView;
  willBeEmpty: (dir: string) => Promise<boolean>;
  /** An ancestor is not a directory now: true when the path waits for that ancestor's own step. */
  awaitParent?: (entry: TurnEntry, blocker: string, detail: string) => boolean;
  /** An ancestor whose step removes what stands there and makes it a directory again. */
  replacedParent?: string;
}

async function planOne(entry: TurnEntry, plan: PlanContext): Promise<Step | undefined> {
  const { report, force } = plan;
  const structural = entry.kind === 'absent' || entry.kind === 'directory' ? { kind: entry.kind } : {};
  if ((entry.kind === 'file' || entry.kind === 'symlink') && (entry.skipped === 'too-large' || (entry.kind === 'file' && entry.sha256 === null))) {
    report.skipped.push({ path: entry.path, reason: 'too-large', detail: 'the file was over the size cap; only its metadata was recorded' });
    return undefined;
  }
  const checked = await checkParent(entry.path, plan.view);
  let parent: { missing: string | undefined };
  if (checked.ok) parent = checked;
  else if (checked.blocker !== undefined && checked.blocker === plan.replacedParent) parent = { missing: path.dirname(entry.path) };
  else {
    if (checked.blocker === undefined || !plan.awaitParent?.(entry, checked.blocker, checked.detail)) {
      report.conflicts.push({ path: entry.path, reason: 'parent-changed', detail: checked.detail });
    }
    return undefined;
  }
  const current = await plan.view.observe(entry.path);
  const before = beforeStateOf(entry);
  if (stateDifference(before, current) === undefined && !directoryTimesDiffer(before, current)) {
    const detail = entry.kind === 'absent' ? 'nothing is there, as before the turn' : 'already as it was before the turn';
    report.skipped.push({ path: entry.path, reason: 'unchanged', detail, ...structural });
    return undefined;
  }
  let forced = false;
  const difference = entry.after === null ? 'the turn was never committed' : stateDifference(entry.after, current);
  if (difference !== undefined) {
    if (!force) {
      report.conflicts.push({ path: entry.path, reason: entry.after === null ? 'not-committed' : 'changed-since-turn', detail: difference });
      return undefined;
    }
    forced = true;
  }
  const step: Step = { entry, current, action: 'replace', forced, clear: false, setTimes: false, createdParents: parent.missing !== undefined };
  const conflict = (reason: ConflictReason, detail: string) => {
    report.conflicts.push({ path: entry.path, reason, detail });
    return undefined;
  };
  const isDirectory = isDirectoryState(current);
  // Known now, so a dry run says what the real run would meet.
  if (entry.kind === 'special' && !canMakeAgain(entry.fileType)) {
    throw new BrokerError(ErrorCodes.HOST_OP_FAILED, `making the ${entry.fileType} ${entry.path} again needs root (CAP_MKNOD)`);
  }
  switch (entry.kind) {
    case 'file':
    case 'symlink':
    case 'special':
      if (isDirectory) {
        // Only a directory the turn itself left there, and that the rewind empties, gives way.
        if (difference !== undefined) return conflict('occupied-by-directory', 'a directory is there now; remove it first');
        if (!(await plan.willBeEmpty(entry.path))) return conflict('occupied-by-directory', 'the directory the turn put there holds files it did not create');
        step.clear = true;
      } else if (current.type === 'other' && !canMakeAgain(current.fileType)) {
        if (!force) return conflict('occupied-by-special-file', `a ${current.fileType} is there now`);
        step.forced = true;
      }
      step.action = current.type === 'absent' ? 'recreate' : 'replace';
      return step;
    case 'absent':
      if (isDirectory && !(await plan.willBeEmpty(entry.path))) {
        return conflict('not-empty', 'the directory the turn created holds something the turn did not create');
      }
      step.action = 'remove';
      return step;
    case 'metadata':
      // Only the metadata was kept: it goes back onto the file that is there, which holds what it held then.
      if (current.type !== 'file') {
        throw new BrokerError(ErrorCodes.HOST_OP_FAILED, `${entry.path}: the turn kept only its mode, owner, times and xattrs, and no regular file is there to put them on`);
      }
      // Forced over a change since the turn: only if that change cannot have touched the bytes (the same file, size and mtime).
      if (forced && !sameBytesLikely(entry.after, current)) {
        throw new BrokerError(ErrorCodes.HOST_OP_FAILED, `${entry.path}: it may hold other bytes than when the turn ended, and the turn kept only its metadata`);
      }
      step.action = 'metadata';
      return step;
    case 'directory':
      if (isDirectory) {
        step.action = 'metadata';
        // Its times moved with every name added or removed: put them back only if nothing but the turn did that.
        step.setTimes = forced || (entry.after !== null && !directoryTimesDiffer(entry.after, current));
      } else {
        step.action = current.type === 'absent' ? 'recreate' : 'replace';
        step.clear = current.type !== 'absent';
        step.setTimes = true;
      }
      return step;
  }
}

/** A file that is the same inode, of the same size and mtime as at the commit: nothing wrote its bytes since, as far as can be told without them. */
function sameBytesLikely(after: AfterState | null, current: AfterState): boolean {
  if (after?.type !== 'file' || current.type !== 'file') return false;
  return after.size === current.size && after.mtimeNs === current.mtimeNs && (after.ino === undefined || after.ino === current.ino);
}

/** Whether a special file of this type can be made (again): devices need root (CAP_MKNOD). */
function canMakeAgain(fileType: string): boolean {
  return fileType === 'fifo' || fileType === 'socket' || ((fileType === 'char-device' || fileType === 'block-device') && isRoot());
}

/** `blocker`: the ancestor that stands there as something other than a directory. */
type ParentCheck = { ok: true; missing: string | undefined } | { ok: false; detail: string; blocker?: string };

/**
 * The recorded path was symlink-resolved, so its parent must still resolve to itself.
 * If a directory was swapped for a symlink since, writing "into" it would land
 * elsewhere: refuse. Missing parents (a deleted directory) are recreated. Looked at through
 * `view`: a dry run of several turns sees the directories the newer turns' steps bring back.
 */
async function checkParent(file: string, view: Pick<TreeView, 'kindOf' | 'realpath'>): Promise<ParentCheck> {
  const parent = path.dirname(file);
  let existing = parent;
  for (;;) {
    const kind = await view.kindOf(existing);
    if (kind !== 'absent') {
      if (kind !== 'directory') return { ok: false, detail: `${existing} is not a directory (${kind === 'symlink' ? 'a symlink' : 'another file'})`, blocker: existing };
      break;
    }
    if (existing === path.dirname(existing)) return { ok: false, detail: 'no existing ancestor directory' };
    existing = path.dirname(existing);
  }
  const real = await view.realpath(existing);
  if (real !== existing) return { ok: false, detail: `${existing} now resolves to ${real}` };
  return { ok: true, missing: existing === parent ? undefined : parent };
}

/** The state a step leaves its path in (dry runs of several turns build on it). */
function assumeApplied(view: TreeView, plan: Plan): void {
  for (const step of plan.steps) view.assume(step.entry.path, beforeStateOf(step.entry));
}

function restoredItem(step: Step, written: Written = {}): RestoredItem {
  return {
    path: step.entry.path,
    kind: step.entry.kind === 'metadata' ? 'file' : step.entry.kind === 'renamed' ? 'directory' : step.entry.kind,
    action: step.action,
    forced: step.forced,
    createdParents: step.createdParents,
    ...written,
  };
}

/**
 * Carry out a plan, in an order that works for any mix of changes:
 *   0. record directories whose metadata will be put back (their times move in 1–3);
 *   1. remove what the turn created, and what stands in the way, deepest first;
 *   2. recreate deleted directories, shallowest first (0700 until step 4);
 *   3. write files and symlinks (manifest order);
 *   4. put directories' owner, xattrs, mode and times back.
 * Every path replaced, removed or created is recorded in the rescue turn first (and the
 * directory it sits in, whose times move). A failure is reported and stops only its path.
 */
async function applyPlan(ctx: RestoreContext, plan: Plan, rescue: RescueTurn): Promise<void> {
  const recordedModes = new Map<string, number>();
  for (const entry of restorableEntries(plan.manifest)) if (entry.kind === 'directory') recordedModes.set(entry.path, entry.mode);
  const { report, steps } = plan;
  const attempt = async (step: Step, work: () => Promise<void>) => {
    if (step.failed) return;
    try {
      await work();
    } catch (error) {
      step.failed = true;
      const failure = toBrokerError(error, ErrorCodes.HOST_OP_FAILED);
      ctx.log.warn({ turnId: plan.manifest.id, file: { path: step.entry.path }, err: failure }, 'restore of a path failed');
      report.failed.push({ path: step.entry.path, code: failure.code, message: failure.message });
    }
  };
  for (const back of plan.renameBacks) {
    try {
      const { entry } = back;
      await ensureParents(rescue, entry.path, recordedModes);
      const turnId = await rescue.open();
      await rescue.parentOf(entry.to);
      await rescue.parentOf(entry.path);
      // Kept first: the old name as empty (the restore makes it), then the rename the restore makes, so undoing the restore renames it again.
      await rescue.recordAbsent(entry.path);
      await ctx.rescueRename(entry.to, entry.path, entry.tree, turnId);
      await renameBack(back);
      report.restored.push(...renameBackItems(back));
      ctx.log.info({ file: { path: entry.path, from: entry.to }, forced: back.forced }, 'renamed back');
    } catch (error) {
      const failure = toBrokerError(error, ErrorCodes.HOST_OP_FAILED);
      report.failed.push({ path: back.entry.path, code: failure.code, message: failure.message });
      // What it holds cannot be restored where it is not.
      for (const step of steps) if (isBlocked(step.entry, [back.entry.path])) step.failed = true;
    }
  }
  const deepestFirst = [...steps].sort((a, b) => depth(b.entry.path) - depth(a.entry.path));
  const shallowestFirst = [...deepestFirst].reverse();
  const directories = steps.filter((s): s is Step & { entry: DirectoryEntry } => s.entry.kind === 'directory');

  for (const step of directories) {
    if (step.action === 'metadata') await attempt(step, async () => void (await ctx.rescueDirectory(step.entry.path, await rescue.open(), { sync: true })));
  }
  // Removals in two passes: keep everything first (one fdatasync of the rescue journal for all), then remove.
  const removals = deepestFirst.filter((step) => step.action === 'remove' || step.clear);
  const kept = new Map<Step, Identity | undefined>();
  for (const step of removals) await attempt(step, async () => void kept.set(step, await keepForRemoval(ctx, rescue, step)));
  if (kept.size > 0) await ctx.syncRescue(await rescue.open());
  for (const step of removals) {
    if (!kept.has(step)) continue;
    await attempt(step, async () => {
      await removeKept(step, kept.get(step));
      if (step.action === 'remove') {
        report.restored.push(restoredItem(step));
        ctx.log.info({ file: { path: step.entry.path }, forced: step.forced }, 'removed what the turn created');
      }
    });
  }
  for (const step of shallowestFirst) {
    if (step.entry.kind !== 'directory' || step.action === 'metadata') continue;
    await attempt(step, async () => {
      step.createdParents = await ensureParents(rescue, step.entry.path, recordedModes);
      await rescue.parentOf(step.entry.path);
      await rescue.recordAbsent(step.entry.path);
      await fs.mkdir(step.entry.path, { mode: 0o700 });
    });
  }
  for (const step of steps) {
    const { entry } = step;
    if (entry.kind !== 'file' && entry.kind !== 'symlink' && entry.kind !== 'special') continue;
    await attempt(step, async () => {
      step.createdParents = await ensureParents(rescue, entry.path, recordedModes);
      await rescue.parentOf(entry.path);
      const now = await lstatOrUndefined(entry.path);
      // Nothing is replaced before it is safe in the rescue turn; a failed rescue stops this path.
      if (now && !now.isDirectory()) await ctx.rescue(entry.path, await rescue.open());
      else await rescue.recordAbsent(entry.path);
      const written = entry.kind === 'symlink' ? await writeSymlink(ctx, entry) : entry.kind === 'special' ? await writeSpecial(ctx, entry) : await writeFile(ctx, entry);
      report.restored.push(restoredItem(step, written));
      ctx.log.info({ file: { path: entry.path, action: step.action, forced: step.forced } }, 'restored');
    });
  }
  for (const step of steps) {
    const { entry } = step;
    if (entry.kind !== 'metadata') continue;
    await attempt(step, async () => {
      // What it is now is kept first, so undoing the restore puts it back.
      await ctx.rescueMetadata(entry.path, await rescue.open());
      const written = await restoreFileMetadata(ctx, entry);
      report.restored.push(restoredItem(step, written));
      ctx.log.info({ file: { path: entry.path, action: step.action, forced: step.forced } }, 'restored metadata');
    });
  }
  const timesSet = new Set<string>();
  for (const step of deepestFirst) {
    if (step.entry.kind !== 'directory') continue;
    const entry = step.entry;
    await attempt(step, async () => {
      const written = await restoreDirectory(ctx, entry, step.setTimes);
      if (step.setTimes) timesSet.add(entry.path);
      report.restored.push(restoredItem(step, written));
      ctx.log.info({ file: { path: entry.path, action: step.action, forced: step.forced } }, 'restored directory');
    });
  }
  await rescue.settle(timesSet);
}

interface Identity {
  dev: bigint;
  ino: bigint;
  mtimeNs: bigint;
  size: bigint;
  directory: boolean;
}

/**
 * Keep what stands at a path in the rescue turn before it is removed: a file or symlink
 * with its content, a directory (its contents go first, deepest paths first) with its
 * metadata, a special file with its type and metadata. It must still be what the plan saw.
 * Returns its identity (undefined: nothing is there any more).
 */
async function keepForRemoval(ctx: RestoreContext, rescue: RescueTurn, step: Step): Promise<Identity | undefined> {
  const file = step.entry.path;
  const stats = await lstatOrUndefined(file);
  if (!stats) return undefined;
  const typeNow = stats.isDirectory() ? 'directory' : stats.isFile() ? 'file' : stats.isSymbolicLink() ? 'symlink' : 'other';
  const planned = isDirectoryState(step.current) ? 'directory' : step.current.type;
  if (typeNow !== planned) {
    throw new BrokerError(ErrorCodes.HOST_OP_FAILED, `${file} changed during the restore: expected ${describeState(step.current)}`);
  }
  const turnId = await rescue.open();
  await rescue.parentOf(file);
  if (typeNow === 'directory') await ctx.rescueDirectory(file, turnId, { sync: false });
  else await ctx.rescue(file, turnId, { sync: false });
  return { dev: stats.dev, ino: stats.ino, mtimeNs: stats.mtimeNs, size: stats.size, directory: typeNow === 'directory' };
}

/** Remove what was kept, if it is still the same (a directory: empty by now). */
async function removeKept(step: Step, kept: Identity | undefined): Promise<void> {
  if (!kept) return;
  const file = step.entry.path;
  const now = await lstatOrUndefined(file);
  if (!now) return;
  const same = now.dev === kept.dev && now.ino === kept.ino && (kept.directory || (now.mtimeNs === kept.mtimeNs && now.size === kept.size));
  if (!same) throw new BrokerError(ErrorCodes.HOST_OP_FAILED, `${file} changed during the restore; left alone`);
  if (kept.directory) await fs.rmdir(file);
  else await fs.unlink(file);
}

/**
 * Create the missing directories above `file` (a directory the manifest recorded gets its
 * recorded mode, another the default one), each recorded as absent in the rescue turn so
 * undoing the restore removes them again. Returns whether any was created.
 */
async function ensureParents(rescue: RescueTurn, file: string, recordedModes: ReadonlyMap<string, number>): Promise<boolean> {
  const parent = await checkParent(file, diskParents);
  if (!parent.ok) throw new BrokerError(ErrorCodes.HOST_OP_FAILED, `not restoring ${file}: ${parent.detail}`);
  if (parent.missing === undefined) return false;
  const missing: string[] = [];
  for (let dir = parent.missing; !(await lstatOrUndefined(dir)); dir = path.dirname(dir)) missing.unshift(dir);
  for (const dir of missing) {
    await rescue.parentOf(dir);
    await rescue.recordAbsent(dir);
    const recorded = recordedModes.get(dir);
    // A directory the turn recorded comes back with its own mode, even when only a file in
    // it was asked for: a private one (0700) must not reappear open to everyone.
    const made = await fs.mkdir(dir, recorded === undefined ? {} : { mode: 0o700 }).then(
      () => true,
      (error: unknown) => {
        if (errorCode(error) !== 'EEXIST') throw error;
        return false;
      },
    );
    if (made && recorded !== undefined) await fs.chmod(dir, recorded & 0o7777);
  }
  return true;
}

type Written = Pick<RestoredItem, 'timesExact' | 'xattrs'>;

/**
 * Content from the verified blob, then owner, xattrs, mode and times on a temp file
 * beside the target, then rename over it. Owner and mode go through our own fd, so a
 * temp name swapped for a symlink cannot redirect them; the rename checks it is still ours.
 */
async function writeFile(ctx: RestoreContext, entry: BackupEntry): Promise<Written> {
  const sha256 = entry.sha256;
  if (sha256 === null) throw new BrokerError(ErrorCodes.BACKUP_FAILED, `no content was saved for ${entry.path}`);
  const dir = path.dirname(entry.path);
  const tmp = path.join(dir, tempName('.bsh-restore-'));
  try {
    const handle = await fs.open(tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o600);
    let xattrs: Written['xattrs'];
    let identity: { dev: bigint; ino: bigint };
    try {
      const size = await ctx.blobs.copyTo(sha256, handle);
      if (size !== entry.size) throw new BrokerError(ErrorCodes.BACKUP_FAILED, `blob ${sha256} has ${size} bytes, the manifest says ${entry.size}`);
      await handle.sync();
      identity = await handle.stat({ bigint: true });
      // chown first: it clears setuid/setgid and file capabilities, which xattrs and chmod then set.
      if (isRoot()) await handle.chown(entry.uid, entry.gid);
      // xattrs before chmod: a non-root owner cannot set user.* xattrs on a read-only file.
      xattrs = restoreXattrs(ctx.xattrs, tmp, entry.xattrs, presentXattrs(ctx.xattrs, tmp));
      await handle.chmod(entry.mode);
    } finally {
      await handle.close();
    }
    const timesExact = await restoreTimes(ctx, tmp, entry);
    await renameIfOurs(tmp, identity, entry.path);
    return { timesExact, xattrs };
  } catch (error) {
    await removeQuietly(tmp);
    throw error;
  }
}

/** Rename only the inode we created: a temp name replaced behind our back is never moved into place. */
async function renameIfOurs(tmp: string, identity: { dev: bigint; ino: bigint }, target: string): Promise<void> {
  const now = await fs.lstat(tmp, { bigint: true });
  if (now.dev !== identity.dev || now.ino !== identity.ino) {
    throw new BrokerError(ErrorCodes.HOST_OP_FAILED, `temp file ${tmp} was replaced during restore`);
  }
  await fs.rename(tmp, target);
  await fsyncDir(path.dirname(target));
}

async function writeSymlink(ctx: RestoreContext, entry: BackupEntry): Promise<Written> {
  const linkTarget = entry.linkTarget;
  if (linkTarget === undefined) throw new BrokerError(ErrorCodes.BACKUP_FAILED, `no link target was recorded for ${entry.path}`);
  return placeMade(ctx, entry, async (tmp) => {
    await fs.symlink(linkTarget, tmp);
    // The identity first: if the name is swapped before the chown, the rename below refuses it.
    const identity = await fs.lstat(tmp, { bigint: true });
    if (isRoot()) await fs.lchown(tmp, entry.uid, entry.gid);
    return { identity };
  });
}

/**
 * A FIFO, socket or device node made again: type, device number, owner, xattrs and exact
 * mode set by one native call on the node it made, never on a name swapped in meanwhile.
 */
async function writeSpecial(ctx: RestoreContext, entry: SpecialEntry): Promise<Written> {
  const makeNode = ctx.makeNode;
  if (!makeNode) throw new BrokerError(ErrorCodes.HOST_OP_FAILED, `cannot make the ${entry.fileType} ${entry.path} again: no native addon`);
  return placeMade(ctx, entry, async (tmp) => {
    const spec: NodeSpec = { fileType: entry.fileType, mode: entry.mode, rdev: entry.rdev };
    if (isRoot()) spec.owner = { uid: entry.uid, gid: entry.gid };
    // xattrs other than user.* (ACLs, trusted.*) are what a special file can carry; setting them needs the addon.
    if (entry.xattrs) spec.xattrs = entry.xattrs;
    const identity = makeNode(tmp, spec);
    // The node may have inherited its directory's default ACL: only what was recorded stays.
    const extra = entry.xattrs === null ? [] : presentXattrs(ctx.xattrs, tmp).filter((name) => !(name in (entry.xattrs ?? {})));
    if (extra.length > 0 && !ctx.xattrs?.remove) throw new BrokerError(ErrorCodes.HOST_OP_FAILED, `${entry.path}: cannot remove the xattrs it inherited (${extra.join(', ')})`);
    for (const name of extra) ctx.xattrs?.remove?.(tmp, name);
    return { identity, xattrs: entry.xattrs === null ? 'not-recorded' : 'restored' };
  });
}

/**
 * `make` creates a node without content on a temp name beside the target and returns
 * its identity; its times are set, then it is renamed over the target if the temp name
 * still holds that node.
 */
async function placeMade(
  ctx: RestoreContext,
  entry: BackupEntry | SpecialEntry,
  make: (tmp: string) => Promise<{ identity: { dev: bigint; ino: bigint }; xattrs?: Written['xattrs'] }>,
): Promise<Written> {
  const tmp = path.join(path.dirname(entry.path), tempName('.bsh-restore-'));
  try {
    const { identity, xattrs } = await make(tmp);
    const timesExact = await restoreTimes(ctx, tmp, entry);
    await renameIfOurs(tmp, identity, entry.path);
    return xattrs === undefined ? { timesExact } : { timesExact, xattrs };
  } catch (error) {
    await removeQuietly(tmp);
    throw error;
  }
}

/**
 * A directory's owner, xattrs and mode through a descriptor opened without following a
 * symlink (a directory swapped for a link is never changed through it), then its times.
 */
async function restoreDirectory(ctx: RestoreContext, entry: DirectoryEntry, setTimes: boolean): Promise<Written> {
  const handle = await fs.open(entry.path, C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW);
  let xattrs: Written['xattrs'];
  try {
    if (isRoot()) await handle.chown(entry.uid, entry.gid);
    const present = entry.xattrs === null ? [] : presentXattrs(ctx.xattrs, entry.path);
    xattrs = restoreXattrs(ctx.xattrs, entry.path, entry.xattrs, present);
    await handle.chmod(entry.mode);
  } finally {
    await handle.close();
  }
  return { xattrs, ...(setTimes ? { timesExact: await restoreTimes(ctx, entry.path, entry) } : {}) };
}

/**
 * A file's owner, xattrs, mode and times, the turn having kept no more of it, through a
 * descriptor of the regular file that is there (never through a symlink swapped in).
 */
async function restoreFileMetadata(ctx: RestoreContext, entry: MetadataEntry): Promise<Written> {
  const handle = await fs.open(entry.path, C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK);
  let xattrs: Written['xattrs'];
  try {
    if (!(await handle.stat()).isFile()) throw new BrokerError(ErrorCodes.HOST_OP_FAILED, `${entry.path} is no longer a regular file`);
    if (isRoot()) await handle.chown(entry.uid, entry.gid);
    const present = entry.xattrs === null ? [] : presentXattrs(ctx.xattrs, entry.path);
    xattrs = restoreXattrs(ctx.xattrs, entry.path, entry.xattrs, present);
    await handle.chmod(entry.mode);
  } finally {
    await handle.close();
  }
  return { xattrs, timesExact: await restoreTimes(ctx, entry.path, entry) };
}

/**
 * Set the recorded xattrs; remove those in `present` that were not recorded: a directory
 * kept in place may have gained some, and a fresh temp file inherits its directory's
 * default ACL (`system.posix_acl_access`), which a command may have set to let others
 * read what is restored there.
 */
function restoreXattrs(access: XattrAccess | undefined, file: string, recorded: Record<string, string> | null, present: string[]): Written['xattrs'] {
  if (recorded === null) return 'not-recorded';
  const extra = present.filter((name) => !(name in recorded));
  if (!access) return Object.keys(recorded).length === 0 ? 'restored' : 'unavailable';
  if (extra.length > 0 && !access.remove) return 'unavailable';
  for (const name of extra) access.remove?.(file, name);
  for (const [name, value] of Object.entries(recorded)) access.set(file, name, Buffer.from(value, 'base64'));
  return 'restored';
}

/** The names of the xattrs `file` has now (none on a file system without them). */
function presentXattrs(access: XattrAccess | undefined, file: string): string[] {
  return xattrNames(access, file) ?? [];
}

/** Set atime/mtime (symlinks themselves, not their targets) and check they took to the nanosecond. */
async function restoreTimes(ctx: RestoreContext, file: string, entry: { path: string; atimeNs: string; mtimeNs: string }): Promise<boolean> {
  const atimeNs = BigInt(entry.atimeNs);
  const mtimeNs = BigInt(entry.mtimeNs);
  try {
    await ctx.setTimesNs(file, atimeNs, mtimeNs, { noFollow: true });
  } catch (error) {
    ctx.log.warn({ file: { path: entry.path }, err: error, errno: errorCode(error) }, 'cannot restore times');
    return false;
  }
  const stats = await fs.lstat(file, { bigint: true });
  return stats.atimeNs === atimeNs && stats.mtimeNs === mtimeNs;
}
