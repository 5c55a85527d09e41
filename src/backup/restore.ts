import fs from 'node:fs/promises';
import { constants as C } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { BrokerError, ErrorCodes, toBrokerError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { BlobStore } from './blob-store.js';
import { beforeStateOf, observeState, stateDifference } from './file-state.js';
import { errorCode, fsyncDir, lstatOrUndefined, removeQuietly, tempName } from './fs-util.js';
import { newTurnId } from './layout.js';
import type { BackupEntry, TurnManifest } from './manifest-schema.js';
import type { SetTimesNs, XattrAccess } from './metadata-ops.js';

export interface RestoreOptions {
  /** Only these paths (absolute); paths the turn did not touch are reported as `notInTurn`. */
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
  /** A directory stands where the file was; never replaced, even with force. */
  'occupied-by-directory',
  /** A FIFO, socket or device stands there; it cannot be rescued, so only force replaces it. */
  'occupied-by-special-file',
  /** A parent directory is now a symlink (or not a directory); never written through. */
  'parent-changed',
]);

export const restoreReportSchema = z.strictObject({
  turnId: z.string(),
  sessionId: z.string(),
  dryRun: z.boolean(),
  /** The manifest that holds what the restore replaced; restore it to undo this restore. */
  rescueTurnId: z.string().optional(),
  restored: z.array(
    z.strictObject({
      path: z.string(),
      kind: z.enum(['file', 'symlink']),
      action: z.enum(['replace', 'recreate']),
      forced: z.boolean(),
      createdParents: z.boolean(),
      /** Whether the restore put atime/mtime back to the nanosecond (absent in a dry run). */
      timesExact: z.boolean().optional(),
      /** 'not-recorded' when the backup had no xattr access; 'unavailable' when restore has none. */
      xattrs: z.enum(['restored', 'not-recorded', 'unavailable']).optional(),
    }),
  ),
  conflicts: z.array(z.strictObject({ path: z.string(), reason: conflictReasonSchema, detail: z.string() })),
  skipped: z.array(z.strictObject({ path: z.string(), reason: z.enum(['unchanged', 'too-large']), detail: z.string() })),
  failed: z.array(z.strictObject({ path: z.string(), code: z.string(), message: z.string() })),
  notInTurn: z.array(z.string()),
});
export type RestoreReport = z.infer<typeof restoreReportSchema>;
export type RestoredItem = RestoreReport['restored'][number];

/** What restore needs from the session store. */
export interface RestoreContext {
  readonly sessionId: string;
  readonly blobs: BlobStore;
  readonly log: Logger;
  readonly xattrs: XattrAccess | undefined;
  readonly setTimesNs: SetTimesNs;
  beginTurn(turnId: string, options: { kind: 'restore'; restoreOf: string; startedAt: string }): Promise<unknown>;
  /** Back up what is at `file` now into the rescue turn. */
  rescue(file: string, turnId: string): Promise<BackupEntry | undefined>;
  commitTurn(turnId: string, message: string): Promise<TurnManifest>;
}

const isRoot = () => process.geteuid?.() === 0;

/**
 * Return each path of a turn to its state before the turn. Anything that exists at a
 * path is first backed up into a 'restore' turn, so the restore itself can be undone.
 */
export async function restoreTurn(ctx: RestoreContext, manifest: TurnManifest, options: RestoreOptions = {}): Promise<RestoreReport> {
  const now = options.now ?? (() => new Date());
  const dryRun = options.dryRun === true;
  const force = options.force === true;
  const report: RestoreReport = {
    turnId: manifest.id,
    sessionId: manifest.sessionId,
    dryRun,
    restored: [],
    conflicts: [],
    skipped: [],
    failed: [],
    notInTurn: [],
  };
  const entries = await selectEntries(manifest, options.paths, report.notInTurn);
  let rescueTurnId: string | undefined;
  const openRescue = async (): Promise<string> => {
    if (rescueTurnId === undefined) {
      const id = newTurnId(now());
      await ctx.beginTurn(id, { kind: 'restore', restoreOf: manifest.id, startedAt: now().toISOString() });
      rescueTurnId = id;
    }
    return rescueTurnId;
  };

  try {
    for (const entry of entries) {
      try {
        await restoreOne(ctx, entry, { dryRun, force, report, openRescue });
      } catch (error) {
        const failure = toBrokerError(error, ErrorCodes.HOST_OP_FAILED);
        ctx.log.warn({ turnId: manifest.id, file: { path: entry.path }, err: failure }, 'restore of a path failed');
        report.failed.push({ path: entry.path, code: failure.code, message: failure.message });
      }
    }
  } finally {
    // Even after a failure, what was rescued must be findable: commit the rescue turn.
    if (rescueTurnId !== undefined) {
      await ctx.commitTurn(rescueTurnId, `restore of ${manifest.id}`);
      report.rescueTurnId = rescueTurnId;
    }
  }
  return report;
}

interface StepOptions {
  dryRun: boolean;
  force: boolean;
  report: RestoreReport;
  openRescue: () => Promise<string>;
}

async function restoreOne(ctx: RestoreContext, entry: BackupEntry, step: StepOptions): Promise<void> {
  const { report, force } = step;
  if (entry.skipped === 'too-large' || (entry.kind === 'file' && entry.sha256 === null)) {
    report.skipped.push({ path: entry.path, reason: 'too-large', detail: 'the file was over the size cap; only its metadata was recorded' });
    return;
  }
  const parent = await checkParent(entry.path);
  if (!parent.ok) {
    report.conflicts.push({ path: entry.path, reason: 'parent-changed', detail: parent.detail });
    return;
  }
  const current = await observeState(entry.path, { setTimesNs: ctx.setTimesNs });
  if (stateDifference(beforeStateOf(entry), current) === undefined) {
    report.skipped.push({ path: entry.path, reason: 'unchanged', detail: 'already as it was before the turn' });
    return;
  }
  if (current.type === 'other' && current.fileType === 'directory') {
    report.conflicts.push({ path: entry.path, reason: 'occupied-by-directory', detail: 'a directory is there now; remove it first' });
    return;
  }
  let forced = false;
  const difference = entry.after === null ? 'the turn was never committed' : stateDifference(entry.after, current);
  if (difference !== undefined) {
    if (!force) {
      const reason = entry.after === null ? 'not-committed' : 'changed-since-turn';
      report.conflicts.push({ path: entry.path, reason, detail: difference });
      return;
    }
    forced = true;
  }
  if (current.type === 'other') {
    if (!force) {
      report.conflicts.push({ path: entry.path, reason: 'occupied-by-special-file', detail: `a ${current.fileType} is there now` });
      return;
    }
    forced = true;
  }
  const action = current.type === 'absent' ? 'recreate' : 'replace';
  const createdParents = parent.missing !== undefined;
  if (step.dryRun) {
    report.restored.push({ path: entry.path, kind: entry.kind, action, forced, createdParents });
    return;
  }
  if (current.type === 'file' || current.type === 'symlink') {
    // Nothing is replaced before it is safe in the rescue turn; a failed rescue stops this path.
    await ctx.rescue(entry.path, await step.openRescue());
  } else {
    await step.openRescue();
  }
  if (parent.missing !== undefined) await fs.mkdir(parent.missing, { recursive: true });
  const written = entry.kind === 'symlink' ? await writeSymlink(ctx, entry) : await writeFile(ctx, entry);
  report.restored.push({ path: entry.path, kind: entry.kind, action, forced, createdParents, ...written });
  ctx.log.info({ file: { path: entry.path, action, forced } }, 'restored');
}

/** The manifest's entries, or those for `paths`; unknown paths go to `notInTurn`. */
async function selectEntries(manifest: TurnManifest, paths: string[] | undefined, notInTurn: string[]): Promise<BackupEntry[]> {
  if (paths === undefined) return manifest.files;
  const byPath = new Map(manifest.files.map((f) => [f.path, f]));
  const chosen = new Set<BackupEntry>();
  for (const requested of paths) {
    const resolved = path.resolve(requested);
    const entry = byPath.get(resolved) ?? byPath.get(await canonicalParentForm(resolved));
    if (entry) chosen.add(entry);
    else notInTurn.push(requested);
  }
  // Keep manifest order: it is the order the turn changed things in.
  return manifest.files.filter((f) => chosen.has(f));
}

/** Manifests hold symlink-resolved paths; a person may name the file through a link. */
async function canonicalParentForm(file: string): Promise<string> {
  try {
    return path.join(await fs.realpath(path.dirname(file)), path.basename(file));
  } catch {
    return file;
  }
}

type ParentCheck = { ok: true; missing: string | undefined } | { ok: false; detail: string };

/**
 * The recorded path was symlink-resolved, so its parent must still resolve to itself.
 * If a directory was swapped for a symlink since, writing "into" it would land
 * elsewhere: refuse. Missing parents (a deleted directory) are recreated.
 */
async function checkParent(file: string): Promise<ParentCheck> {
  const parent = path.dirname(file);
  let existing = parent;
  for (;;) {
    const stats = await lstatOrUndefined(existing);
    if (stats) {
      if (!stats.isDirectory()) return { ok: false, detail: `${existing} is not a directory (${stats.isSymbolicLink() ? 'a symlink' : 'another file'})` };
      break;
    }
    if (existing === path.dirname(existing)) return { ok: false, detail: 'no existing ancestor directory' };
    existing = path.dirname(existing);
  }
  const real = await fs.realpath(existing);
  if (real !== existing) return { ok: false, detail: `${existing} now resolves to ${real}` };
  return { ok: true, missing: existing === parent ? undefined : parent };
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
      xattrs = restoreXattrs(ctx.xattrs, tmp, entry);
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
  if (entry.linkTarget === undefined) throw new BrokerError(ErrorCodes.BACKUP_FAILED, `no link target was recorded for ${entry.path}`);
  const dir = path.dirname(entry.path);
  const tmp = path.join(dir, tempName('.bsh-restore-'));
  try {
    await fs.symlink(entry.linkTarget, tmp);
    const identity = await fs.lstat(tmp, { bigint: true });
    if (isRoot()) await fs.lchown(tmp, entry.uid, entry.gid);
    const timesExact = await restoreTimes(ctx, tmp, entry);
    await renameIfOurs(tmp, identity, entry.path);
    return { timesExact };
  } catch (error) {
    await removeQuietly(tmp);
    throw error;
  }
}

function restoreXattrs(xattrs: XattrAccess | undefined, file: string, entry: BackupEntry): Written['xattrs'] {
  if (entry.xattrs === null) return 'not-recorded';
  if (!xattrs) return Object.keys(entry.xattrs).length === 0 ? 'restored' : 'unavailable';
  for (const [name, value] of Object.entries(entry.xattrs)) xattrs.set(file, name, Buffer.from(value, 'base64'));
  return 'restored';
}

/** Set atime/mtime (symlinks themselves, not their targets) and check they took to the nanosecond. */
async function restoreTimes(ctx: RestoreContext, file: string, entry: BackupEntry): Promise<boolean> {
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
