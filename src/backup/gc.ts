import fs from 'node:fs/promises';
import { constants as C } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { BrokerError, ErrorCodes } from '../core/errors.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { errorCode, fsyncDir, mkdirPrivate } from './fs-util.js';
import { BackupHome } from './backup-home.js';
import { blobRelativePath, sessionBackupDir, sha256Schema, storeLayout, validateSessionId, type StoreLayout } from './layout.js';
import type { BackupEntry, TurnManifest } from './manifest-schema.js';
import type { MetadataOps } from './metadata-ops.js';
import { SessionBackupStore } from './session-store.js';

/**
 * Blob garbage collection for one session store, and the lock that keeps prune/GC runs
 * apart.
 *
 * A blob is referenced when a committed manifest or an open turn's journal of its
 * session names it (rescue turns of restores are turns like any other). GC takes the
 * referenced set from `SessionBackupStore.referencedBlobs()`, which throws on any damaged
 * manifest or journal: a store whose references cannot all be read loses no blob.
 *
 * Concurrency with backups (the broker is another process and takes no lock): a backup
 * puts its blob in `blobs/` first and appends the journal line that names it right
 * after. GC reads the references and then sweeps `blobs/`, so a blob written between
 * the two is unreferenced in GC's eyes. Three guards, in this order:
 *
 *   1. Grace period: a blob whose mtime is younger than `graceMs` (default one hour)
 *      before GC started is never removed, referenced or not. A backup that appends its
 *      journal line within the grace period of writing its blob is always safe.
 *   2. Quarantine: an old unreferenced blob is first renamed into `gc/` (atomic), so
 *      from then on no backup can reuse it (a backup that finds the name missing writes
 *      the blob anew) and nothing can change it between the decisive look and the
 *      unlink. `gc/` is emptied back into `blobs/` at the start of every run, so a run
 *      that dies midway loses nothing.
 *   3. Second read: with every candidate in `gc/`, the references are read again; a
 *      candidate now named (a journal line that landed meanwhile), or now young, is
 *      linked back (never over a blob written meanwhile), the rest is removed.
 *
 * A deduplicated backup that REUSES an old blob does not write it, so by itself its mtime
 * would stay old and GC could take it between the backup's check and its journal line.
 * `BlobStore` therefore refreshes the mtime of a blob it reuses before checking it (a
 * missing or damaged one is written anew), which puts it under guard 1; the
 * `beforeQuarantine` seam tests that order (test/faults/blob-reuse-gc.test.ts).
 */

/** A blob younger than this (by mtime, when GC starts) is kept even if nothing names it yet. */
export const GC_GRACE_MS = 60 * 60 * 1000;

/** Temp files older than this are leftovers of a crash (as `SessionBackupStore.open` judges them). */
export const STALE_TEMP_MS = 60 * 60 * 1000;

/** Manifests of removed turns pass through here (rename in, then delete); leftovers are swept. */
export const PRUNED_DIR = 'pruned';
/** Blobs GC is deciding about; put back at the start of every run. */
export const QUARANTINE_DIR = 'gc';
/** Held (O_EXCL) by a prune or GC of the session while it runs. */
export const LOCK_FILE = 'gc.lock';

export interface MaintenancePaths {
  pruned: string;
  quarantine: string;
  lock: string;
}

export function maintenancePaths(layout: StoreLayout): MaintenancePaths {
  return {
    pruned: path.join(layout.root, PRUNED_DIR),
    quarantine: path.join(layout.root, QUARANTINE_DIR),
    lock: path.join(layout.root, LOCK_FILE),
  };
}

/** The blob an entry's content lives in (by hash), if it has one. */
export function entryBlob(entry: BackupEntry): string | undefined {
  return entry.blob !== null && entry.sha256 !== null ? entry.sha256 : undefined;
}

/** Every blob a turn names. */
export function blobsOfTurn(manifest: TurnManifest): Set<string> {
  const out = new Set<string>();
  for (const entry of manifest.files) {
    const sha = entryBlob(entry);
    if (sha !== undefined) out.add(sha);
  }
  return out;
}

export interface BlobOnDisk {
  sha256: string;
  /** Bytes (apparent size). */
  size: number;
  mtimeMs: number;
}

/** The blobs under `blobs/` with their size and mtime (read-only). */
export async function listBlobsOnDisk(layout: StoreLayout): Promise<BlobOnDisk[]> {
  const out: BlobOnDisk[] = [];
  const fanout = await readdirIfAny(layout.blobs);
  for (const dir of fanout.sort()) {
    for (const name of (await readdirIfAny(path.join(layout.blobs, dir))).sort()) {
      if (!sha256Schema.safeParse(name).success || name.slice(0, 2) !== dir) continue;
      const stats = await fs.lstat(path.join(layout.blobs, dir, name)).catch(() => undefined);
      if (stats?.isFile()) out.push({ sha256: name, size: stats.size, mtimeMs: stats.mtimeMs });
    }
  }
  return out;
}

/** Whether GC must leave a blob alone whatever references it: written within the grace period. */
export function isRecent(mtimeMs: number, startedMs: number, graceMs: number): boolean {
  return mtimeMs >= startedMs - graceMs;
}

/** Files in `tmp/` that GC would remove (older than STALE_TEMP_MS); read-only. */
export async function staleTemps(layout: StoreLayout, nowMs: number): Promise<string[]> {
  const out: string[] = [];
  for (const name of (await readdirIfAny(layout.tmp)).sort()) {
    const stats = await fs.lstat(path.join(layout.tmp, name)).catch(() => undefined);
    if (stats && nowMs - stats.mtimeMs > STALE_TEMP_MS) out.push(name);
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// The lock

const lockContentSchema = z.strictObject({
  pid: z.number().int().positive(),
  host: z.string(),
  startedAt: z.string(),
});

export interface SessionLock {
  release(): Promise<void>;
}

/**
 * Take the maintenance lock of a session store: `gc.lock`, created with O_EXCL. Two
 * prunes or GCs of one session never run at once. A lock left by a process of this host
 * that is gone is taken over; any other holder makes this throw STORE_UNAVAILABLE.
 */
export async function acquireSessionLock(layout: StoreLayout, sessionId: string): Promise<SessionLock> {
  const file = maintenancePaths(layout).lock;
  const content = JSON.stringify({ pid: process.pid, host: os.hostname(), startedAt: new Date().toISOString() });
  for (let attempt = 0; attempt < 2; attempt++) {
    let handle: fs.FileHandle;
    try {
      handle = await fs.open(file, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o600);
    } catch (error) {
      if (errorCode(error) !== 'EEXIST') {
        throw new BrokerError(ErrorCodes.STORE_UNAVAILABLE, `cannot lock the backups of session ${sessionId}: ${String(error)}`, {
          cause: error,
          errno: errorCode(error),
        });
      }
      const holder = await readLock(file);
      if (attempt === 0 && holder !== undefined && holder.host === os.hostname() && !isAlive(holder.pid)) {
        await fs.unlink(file).catch(() => undefined); // its holder is gone
        continue;
      }
      const who = holder === undefined ? 'another process' : `process ${holder.pid} on ${holder.host} (since ${holder.startedAt})`;
      throw new BrokerError(
        ErrorCodes.STORE_UNAVAILABLE,
        `the backups of session ${sessionId} are being pruned by ${who}; if no prune is running, remove ${LOCK_FILE} in the session's modify_backup directory`,
        { details: { sessionId, ...(holder ? { pid: holder.pid } : {}) } },
      );
    }
    try {
      await handle.writeFile(content);
      await handle.sync();
    } finally {
      await handle.close();
    }
    return { release: () => fs.rm(file, { force: true }) };
  }
  throw new BrokerError(ErrorCodes.STORE_UNAVAILABLE, `cannot lock the backups of session ${sessionId}`);
}

async function readLock(file: string): Promise<z.infer<typeof lockContentSchema> | undefined> {
  try {
    const parsed = lockContentSchema.safeParse(JSON.parse(await fs.readFile(file, 'utf8')));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return errorCode(error) !== 'ESRCH';
  }
}

// ---------------------------------------------------------------------------------------
// Collection

export const gcReportSchema = z.strictObject({
  sessionId: z.string(),
  /** Unreferenced blobs removed, and their bytes. */
  blobsRemoved: z.number().int().min(0),
  bytesFreed: z.number().int().min(0),
  /** Unreferenced blobs kept: written within the grace period, or named by a turn while GC ran. */
  blobsKeptRecent: z.number().int().min(0),
  bytesKeptRecent: z.number().int().min(0),
  /** Stale temp files removed from `tmp/`. */
  tempsRemoved: z.number().int().min(0),
});
export type GcReport = z.infer<typeof gcReportSchema>;

export interface GcOptions {
  home: string;
  sessionId: string;
  /** Default GC_GRACE_MS. Measured on the system clock, like the mtimes it is compared with. */
  graceMs?: number;
  logger?: Logger;
  metadata?: MetadataOps;
  /** Test seam: runs around moving an old unreferenced blob into `gc/` (what a racing backup could do there). */
  faults?: GcFaults;
}

export interface GcFaults {
  /** After the first look found the blob old, before it is moved. */
  beforeQuarantine?(sha256: string, blobPath: string): void | Promise<void>;
  /** After it was moved, before the decisive look. */
  afterQuarantine?(sha256: string, blobPath: string): void | Promise<void>;
}

/** Collect the garbage of one (existing) session store, under its lock. */
export async function collectGarbage(options: GcOptions): Promise<GcReport> {
  const layout = sessionLayout(options.home, options.sessionId);
  await mustExist(layout, options.sessionId);
  const lock = await acquireSessionLock(layout, options.sessionId);
  try {
    return await collectLocked(options);
  } finally {
    await lock.release();
  }
}

/** The layout of a session's store (its directory may not exist). */
export function sessionLayout(home: string, sessionId: string): StoreLayout {
  return storeLayout(sessionBackupDir(path.resolve(home), sessionId));
}

/** TURN_NOT_FOUND unless the session has a backup store. */
export async function mustExist(layout: StoreLayout, sessionId: string): Promise<void> {
  const stats = await fs.lstat(layout.root).catch(() => undefined);
  if (!stats?.isDirectory()) {
    throw new BrokerError(ErrorCodes.TURN_NOT_FOUND, `no backups for session ${sessionId}`, { details: { sessionId } });
  }
}

/** The session named (TURN_NOT_FOUND when it has no store), or every session of the home. */
export async function selectSessions(home: string, sessionId: string | undefined): Promise<string[]> {
  if (sessionId === undefined) return new BackupHome({ home }).listSessions();
  const id = validateSessionId(sessionId);
  await mustExist(sessionLayout(home, id), id);
  return [id];
}

/**
 * GC proper; the caller holds the session's lock. Order: sweep `pruned/` leftovers, put
 * `gc/` back, remove stale temps, read the references (all or nothing, through the
 * store: one definition of "referenced"), then look at each unreferenced blob.
 */
export async function collectLocked(options: GcOptions): Promise<GcReport> {
  const { sessionId } = options;
  const layout = sessionLayout(options.home, sessionId);
  const log = (options.logger ?? silentLogger()).child({ phase: 'gc', sessionId });
  const graceMs = options.graceMs ?? GC_GRACE_MS;
  // Taken before the references are read: the argument for the grace period needs that order.
  const startedMs = Date.now();
  const paths = maintenancePaths(layout);
  const report: GcReport = { sessionId, blobsRemoved: 0, bytesFreed: 0, blobsKeptRecent: 0, bytesKeptRecent: 0, tempsRemoved: 0 };

  await sweepPruned(paths.pruned);
  await recoverQuarantine(layout, paths.quarantine);

  // Before the store is opened: opening removes stale temps too, without counting them.
  for (const name of await staleTemps(layout, startedMs)) {
    await fs.rm(path.join(layout.tmp, name), { force: true, recursive: true });
    report.tempsRemoved++;
  }

  const store = await SessionBackupStore.open({
    home: path.resolve(options.home),
    sessionId,
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.metadata ? { metadata: options.metadata } : {}),
  });
  const referenced = await store.referencedBlobs();
  const held: Array<{ sha256: string; home: string; held: string }> = [];
  for (const blob of await listBlobsOnDisk(layout)) {
    if (referenced.has(blob.sha256)) continue;
    // Cheap first look: a young blob is not even moved.
    if (isRecent(blob.mtimeMs, startedMs, graceMs)) {
      report.blobsKeptRecent++;
      report.bytesKeptRecent += blob.size;
      continue;
    }
    const candidate = { sha256: blob.sha256, home: path.join(layout.root, blobRelativePath(blob.sha256)), held: path.join(paths.quarantine, blob.sha256) };
    await mkdirPrivate(paths.quarantine);
    await options.faults?.beforeQuarantine?.(candidate.sha256, candidate.home);
    try {
      await fs.rename(candidate.home, candidate.held);
    } catch (error) {
      if (errorCode(error) === 'ENOENT') continue; // gone meanwhile
      throw error;
    }
    held.push(candidate);
    await options.faults?.afterQuarantine?.(candidate.sha256, candidate.home);
  }
  if (held.length === 0) return logged(log, report);

  // Read the references again now that the candidates are out of reach: a journal line that
  // landed since the first read (a backup reusing one of them) keeps its blob.
  let stillNamed: Set<string>;
  try {
    stillNamed = await store.referencedBlobs();
  } catch (error) {
    for (const c of held) await putBack(c.held, c.home);
    throw error;
  }
  for (const c of held) {
    // The decisive look, at a name no backup uses: nothing refreshes it between this and the unlink.
    const stats = await fs.lstat(c.held);
    if (stillNamed.has(c.sha256) || isRecent(stats.mtimeMs, startedMs, graceMs)) {
      await putBack(c.held, c.home);
      report.blobsKeptRecent++;
      report.bytesKeptRecent += stats.size;
      continue;
    }
    await fs.unlink(c.held);
    report.blobsRemoved++;
    report.bytesFreed += stats.size;
  }
  return logged(log, report);
}

function logged(log: Logger, report: GcReport): GcReport {
  log.info({ gc: report }, 'backup garbage collected');
  return report;
}

async function sweepPruned(dir: string): Promise<void> {
  for (const name of await readdirIfAny(dir)) await fs.rm(path.join(dir, name), { force: true, recursive: true });
}

/** Everything in `gc/` goes back to `blobs/` (a run died after moving it). */
async function recoverQuarantine(layout: StoreLayout, dir: string): Promise<void> {
  for (const name of await readdirIfAny(dir)) {
    const held = path.join(dir, name);
    if (!sha256Schema.safeParse(name).success) {
      await fs.rm(held, { force: true, recursive: true });
      continue;
    }
    await putBack(held, path.join(layout.root, blobRelativePath(name)));
  }
}

/**
 * Link `held` back to its name in `blobs/` and drop `held`. A blob written under that
 * name meanwhile wins (EEXIST): it is verified content of the same hash.
 */
async function putBack(held: string, home: string): Promise<void> {
  await mkdirPrivate(path.dirname(home));
  try {
    await fs.link(held, home);
  } catch (error) {
    if (errorCode(error) !== 'EEXIST') throw error;
  }
  await fsyncDir(path.dirname(home));
  await fs.unlink(held);
}

async function readdirIfAny(dir: string): Promise<string[]> {
  try {
    return await fs.readdir(dir);
  } catch (error) {
    if (errorCode(error) === 'ENOENT' || errorCode(error) === 'ENOTDIR') return [];
    throw error;
  }
}
