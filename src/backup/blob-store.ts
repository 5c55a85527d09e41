import fs from 'node:fs/promises';
import { constants as C, existsSync, lutimesSync, renameSync, type BigIntStats } from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { BrokerError, ErrorCodes } from '../core/errors.js';
import { blobRelativePath, sha256Schema, type StoreLayout } from './layout.js';
import { SourceChanged, SourceTooLarge, pump, sameIdentity, streamCopy, unchanged } from './blob-copy.js';
import { SMALL_FILE_BYTES, copySmallToTemp, smallBlobIsIntact } from './blob-small.js';
import { SpareTemps } from './spare-temps.js';
import { FanoutDirs } from './fanout-dirs.js';
import {
  errorCode,
  fdatasyncFile,
  fdatasyncIfPresent,
  fsyncDir,
  fsyncFile,
  hashHandle,
  inBatches,
  openForSnapshot,
  removeQuietly,
  tempName,
} from './fs-util.js';

export { SourceTooLarge };

/** Test seam: runs on the finished temp copy before it is verified and named. */
export interface BlobFaults {
  afterCopy?(tmpPath: string): void | Promise<void>;
}

export interface BlobStoreOptions {
  /** Try a reflink (copy-on-write clone) first; it is an instant, stable snapshot. Default true. */
  reflink?: boolean;
  faults?: BlobFaults;
  /** Empty temp files kept ready for small backups (spare-temps.ts). Default SPARE_TEMPS; 0 turns it off. */
  spareTemps?: number;
  /** Backups that make their own fan-out directory before the rest are made ahead (fanout-dirs.ts). */
  prepareFanoutsAfter?: number;
}

/** Spares kept ready: enough for a burst of backups while the pool makes more. */
const SPARE_TEMPS = 8;

export interface StoredBlob {
  sha256: string;
  size: number;
  /** Relative to the store root. */
  blob: string;
  /** The file's metadata from the copy that succeeded (taken before reading it). */
  stats: BigIntStats;
  /**
   * With `deferDirSync`: the fsync of the blob's directory (its new name), not started.
   * The caller must run it, and see it succeed, before it acknowledges the backup.
   */
  syncName?: () => Promise<void>;
}


export interface SnapshotOptions {
  /**
   * true (default): the blob is durable when this returns. false: it is written, verified
   * and named, but left for `syncPending` (durability 'turn', see settings.ts).
   */
  sync?: boolean;
  /**
   * With `sync`: return the fsync of the blob's directory as `syncName` instead of running
   * it, so the caller can run it with its own sync (the journal's) once it has written what
   * that sync covers: then one journal commit of the file system serves both. The blob's
   * content is synced before its rename either way.
   */
  deferDirSync?: boolean;
}

/** Blobs synced at once by `syncPending`. */
const SYNC_CONCURRENCY = 16;

/** How many times a file that keeps changing under us is copied before we give up. */
const COPY_ATTEMPTS = 3;


/**
 * Content-addressed storage. A blob gets its final name only once it is complete and its
 * hash checked (and fsynced, unless left for `syncPending`), so a kill at any moment
 * leaves under `blobs/` only files that match their name. After a power cut an unsynced
 * one may not: every reader verifies the hash, so such a blob is never trusted.
 */
export class BlobStore {
  readonly #layout: StoreLayout;
  readonly #faults: BlobFaults | undefined;
  readonly #reflink: boolean;
  /** Devices of source file systems from which a clone into the store failed: copied from then on. */
  readonly #cannotClone = new Set<bigint>();
  readonly #spares: SpareTemps;
  readonly #fanouts: FanoutDirs;
  /** Blobs written or reused without a sync since the last `syncPending` (durability 'turn'). */
  readonly #unsynced = new Set<string>();

  constructor(layout: StoreLayout, options: BlobStoreOptions = {}) {
    this.#layout = layout;
    this.#faults = options.faults;
    this.#reflink = options.reflink ?? true;
    this.#spares = new SpareTemps(layout.tmp, options.spareTemps ?? SPARE_TEMPS);
    this.#fanouts = new FanoutDirs(layout.blobs, { prepareAfter: options.prepareFanoutsAfter });
  }

  /** The store is closing: remove the spare temp files, make nothing more ahead, and wait for what is in flight. */
  async close(): Promise<void> {
    await Promise.all([this.#spares.stop(), this.#fanouts.stop()]);
  }

  /** The fan-out directories (for tests and benchmarks). */
  get fanouts(): FanoutDirs {
    return this.#fanouts;
  }

  absolutePath(sha256: string): string {
    return path.join(this.#layout.root, blobRelativePath(sha256Schema.parse(sha256)));
  }

  /**
   * Snapshot the regular file at `file` (which `seen` describes) into a blob. Throws
   * SourceTooLarge when it grew past `maxBytes`, BACKUP_FAILED when it kept changing
   * or anything else went wrong.
   */
  async snapshot(file: string, seen: BigIntStats, maxBytes: number, options: SnapshotOptions = {}): Promise<StoredBlob> {
    const sync = options.sync !== false;
    let lastChange: unknown;
    for (let attempt = 0; attempt < COPY_ATTEMPTS; attempt++) {
      const small = seen.size <= BigInt(SMALL_FILE_BYTES);
      const spare = small ? this.#spares.take() : undefined;
      const tmp = spare ?? path.join(this.#layout.tmp, tempName('b-'));
      try {
        const { sha256, size, stats } = small
          ? await copySmallToTemp(file, seen, { path: tmp, spare: spare !== undefined }, maxBytes, this.#faults?.afterCopy)
          : await this.#copyToTemp(file, seen, tmp, maxBytes);
        return Object.assign(await this.#commitTemp(tmp, sha256, size, sync, options.deferDirSync === true), { stats });
      } catch (error) {
        await removeQuietly(tmp);
        if (error instanceof SourceTooLarge) throw error;
        if (!(error instanceof SourceChanged)) throw asBackupFailure(error, file);
        lastChange = error;
        const again = await fs.lstat(file, { bigint: true }).catch(() => undefined);
        if (!again?.isFile()) throw new BrokerError(ErrorCodes.BACKUP_FAILED, `${file} changed type or vanished during backup`, { cause: error });
        seen = again;
      }
    }
    throw new BrokerError(ErrorCodes.BACKUP_FAILED, `${file} kept changing while it was being backed up`, { cause: lastChange });
  }

  async #copyToTemp(
    file: string,
    seen: BigIntStats,
    tmp: string,
    maxBytes: number,
  ): Promise<{ sha256: string; size: number; stats: BigIntStats }> {
    const source = await openForSnapshot(file);
    try {
      const before = await source.stat({ bigint: true });
      if (!before.isFile() || !sameIdentity(before, seen)) throw new SourceChanged(`${file} was replaced`);
      let sourceHash: string | undefined;
      // A clone shares the file's blocks: nothing is copied, so the cap is for real copies only.
      if (!(this.#reflink && !this.#cannotClone.has(before.dev) && (await this.#tryReflink(file, tmp, before.dev)))) {
        if (before.size > BigInt(maxBytes)) throw new SourceTooLarge(`${file} is ${before.size} bytes`);
        sourceHash = await streamCopy(source, tmp, maxBytes);
      }
      await this.#faults?.afterCopy?.(tmp);
      const after = await source.stat({ bigint: true });
      const current = await fs.lstat(file, { bigint: true });
      if (!unchanged(before, after) || !sameIdentity(current, before)) throw new SourceChanged(`${file} changed during copy`);
      // Hash what we are about to keep; for a stream copy it must equal what we read.
      const copy = await fs.open(tmp, C.O_RDONLY | C.O_NOFOLLOW);
      let verified: { sha256: string; size: number };
      try {
        verified = await hashHandle(copy);
      } finally {
        await copy.close();
      }
      if (verified.size !== Number(before.size) || (sourceHash !== undefined && verified.sha256 !== sourceHash)) {
        throw new BrokerError(ErrorCodes.BACKUP_FAILED, `the copy of ${file} does not match what was read`);
      }
      return Object.assign(verified, { stats: before });
    } finally {
      await source.close();
    }
  }

  /** A copy-on-write clone when the file systems can; false when they cannot. */
  async #tryReflink(file: string, tmp: string, sourceDevice: bigint): Promise<boolean> {
    try {
      await fs.copyFile(file, tmp, C.COPYFILE_EXCL | C.COPYFILE_FICLONE_FORCE);
    } catch (error) {
      const code = errorCode(error);
      if (code === 'ENOTSUP' || code === 'EOPNOTSUPP' || code === 'EXDEV' || code === 'EINVAL' || code === 'ENOSYS' || code === 'ENOTTY') {
        await removeQuietly(tmp);
        // Says enough about cloning from this file system, not from others: a file on a tmpfs
        // /tmp (EXDEV) must not turn clones off for a workspace on the store's own file system.
        this.#cannotClone.add(sourceDevice);
        return false;
      }
      throw error;
    }
    const handle = await fs.open(tmp, C.O_RDWR | C.O_NOFOLLOW);
    try {
      await handle.chmod(0o600);
    } finally {
      await handle.close();
    }
    return true;
  }

  /**
   * Give a verified temp file its final name (fsync it, rename, fsync the directory), or
   * reuse an intact blob that already has it (see #reusable): then the temp is dropped
   * unsynced. A damaged or vanished blob of that name is replaced by the verified temp.
   */
  async #commitTemp(tmp: string, sha256: string, size: number, sync: boolean, deferDirSync: boolean): Promise<Omit<StoredBlob, 'stats'>> {
    const relative = blobRelativePath(sha256);
    const final = path.join(this.#layout.root, relative);
    if (await this.#reusable(final, sha256, size, sync)) {
      await removeQuietly(tmp);
    } else {
      if (sync) await fsyncFile(tmp);
      await this.#nameBlob(tmp, final, sync);
    }
    if (!sync) {
      this.#unsynced.add(final);
      return { sha256, size, blob: relative };
    }
    // A reused blob's name is synced too: the snapshot that made it may have left that sync
    // to a caller that failed before running it. Cheap when the directory is already durable.
    const dir = path.dirname(final);
    if (deferDirSync) return { sha256, size, blob: relative, syncName: () => fsyncDir(dir) };
    await fsyncDir(dir);
    return { sha256, size, blob: relative };
  }

  /** Rename a verified temp to its blob name, in a fan-out directory made if need be. */
  async #nameBlob(tmp: string, final: string, sync: boolean): Promise<void> {
    const dir = path.dirname(final);
    // Unsynced, a new fan-out directory is made durable with the blob (syncPending syncs blobs/).
    await this.#fanouts.ensure(dir, sync);
    try {
      // Replaces a damaged blob of the same name too: the new one is verified.
      renameSync(tmp, final);
    } catch (error) {
      // A directory known to exist can only be missing if someone removed it: make it again, once.
      if (errorCode(error) !== 'ENOENT' || !existsSync(tmp)) throw error;
      this.#fanouts.forget(dir);
      await this.#fanouts.ensure(dir, sync);
      renameSync(tmp, final);
    }
  }

  /**
   * Make every blob snapshotted with `sync: false` so far durable: fdatasync each, then
   * fsync their directories (the renames) and `blobs/` (new fan-out directories). A turn's commit calls this before it writes
   * its manifest. On failure the blobs stay pending, and the commit fails.
   */
  async syncPending(): Promise<number> {
    const files = [...this.#unsynced];
    if (files.length === 0) return 0;
    for (const file of files) this.#unsynced.delete(file);
    try {
      const dirs = [...new Set(files.map((file) => path.dirname(file))), this.#layout.blobs];
      // A blob gone meanwhile has nothing left to sync; a restore that needs it says so (as under 'each').
      await inBatches(files, SYNC_CONCURRENCY, fdatasyncIfPresent);
      await inBatches(dirs, SYNC_CONCURRENCY, fsyncDir);
    } catch (error) {
      for (const file of files) this.#unsynced.add(file);
      throw new BrokerError(ErrorCodes.BACKUP_FAILED, `cannot make ${files.length} backups durable: ${error instanceof Error ? error.message : String(error)}`, {
        cause: error,
        errno: errorCode(error),
      });
    }
    return files.length;
  }

  /**
   * Where a file kept whole goes (its blob's name), its fan-out directory made (durably
   * with `sync`) so the performer's rename finds it.
   */
  async prepareAside(sha256: string, sync: boolean): Promise<string> {
    const final = this.absolutePath(sha256);
    await this.#fanouts.ensure(path.dirname(final), sync);
    return final;
  }

  /**
   * After the performer is done with a file kept whole: true when its blob is there (moved
   * in, or there before with the same content), made private like every blob and, unsynced,
   * left for `syncPending`. False when nothing is there: the performer did not move it.
   */
  async settleAside(sha256: string, sync: boolean): Promise<boolean> {
    const final = this.absolutePath(sha256);
    try {
      // Its name is ours alone now; its mode was the old file's.
      await fs.chmod(final, 0o600);
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return false;
      throw error;
    }
    if (!sync) this.#unsynced.add(final);
    return true;
  }

  /** A blob another process (a supervisor's lease) put in place: unsynced, it is left for `syncPending`. */
  noteKept(sha256: string, synced: boolean): void {
    if (!synced) this.#unsynced.add(this.absolutePath(sha256));
  }

  /** Blobs waiting for `syncPending`. */
  get pendingSyncs(): number {
    return this.#unsynced.size;
  }

  /**
   * Whether the blob at `final` can serve this backup: present, touched, intact, and (when
   * `sync`) durable. The touch comes first: GC (gc.ts) spares every blob younger than its
   * grace period, and a reused blob is named by no journal line until after this backup
   * returns. It goes by name, so it either lands on the blob before GC can move it (the
   * move keeps the fresh mtime, and GC's decisive look puts it back) or finds the name gone
   * (false: the blob is written anew). The blob may have been written unsynced (durability
   * 'turn', maybe by another process): the fdatasync of one already on disk waits for
   * nothing (the touch changed only its times).
   */
  async #reusable(final: string, sha256: string, size: number, sync: boolean): Promise<boolean> {
    // The usual answer, "no such blob", without an Error built and thrown for it (a thrown
    // ENOENT cost more than the rest of this check). A blob that goes between the two
    // calls is caught below as before.
    if (!existsSync(final)) return false;
    const now = new Date();
    try {
      lutimesSync(final, now, now);
      const intact = size <= SMALL_FILE_BYTES ? smallBlobIsIntact(final, sha256) : await this.#isIntact(final, sha256);
      if (!intact) return false;
      if (sync) await fdatasyncFile(final);
      return true;
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return false;
      throw error;
    }
  }

  async #isIntact(final: string, sha256: string): Promise<boolean> {
    let handle: fs.FileHandle;
    try {
      handle = await fs.open(final, C.O_RDONLY | C.O_NOFOLLOW);
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return false;
      throw error;
    }
    try {
      return (await hashHandle(handle)).sha256 === sha256;
    } finally {
      await handle.close();
    }
  }

  /** The whole blob, after checking its hash. A damaged or missing blob throws BACKUP_FAILED. */
  async read(sha256: string): Promise<Buffer> {
    const file = this.absolutePath(sha256);
    let data: Buffer;
    try {
      data = await fs.readFile(file, { flag: C.O_RDONLY | C.O_NOFOLLOW });
    } catch (error) {
      throw new BrokerError(ErrorCodes.BACKUP_FAILED, `blob ${sha256} cannot be read`, { cause: error, errno: errorCode(error) });
    }
    const actual = createHash('sha256').update(data).digest('hex');
    if (actual !== sha256) throw damaged(sha256, actual);
    return data;
  }

  /**
   * Stream a blob into `target` while hashing; throws BACKUP_FAILED when the bytes do
   * not hash to `sha256`. The caller discards `target` then: it never gets a real name.
   */
  async copyTo(sha256: string, target: fs.FileHandle): Promise<number> {
    let source: fs.FileHandle;
    try {
      source = await fs.open(this.absolutePath(sha256), C.O_RDONLY | C.O_NOFOLLOW);
    } catch (error) {
      throw new BrokerError(ErrorCodes.BACKUP_FAILED, `blob ${sha256} cannot be read`, { cause: error, errno: errorCode(error) });
    }
    try {
      const hash = createHash('sha256');
      const size = await pump(source, target, (chunk) => hash.update(chunk), Number.MAX_SAFE_INTEGER);
      const actual = hash.digest('hex');
      if (actual !== sha256) throw damaged(sha256, actual);
      return size;
    } finally {
      await source.close();
    }
  }

  /** Names of the blobs on disk (for a future GC to diff against manifest references). */
  async list(): Promise<string[]> {
    const out: string[] = [];
    const fanout = await fs.readdir(this.#layout.blobs).catch(() => [] as string[]);
    for (const dir of fanout) {
      const names = await fs.readdir(path.join(this.#layout.blobs, dir)).catch(() => [] as string[]);
      out.push(...names.filter((n) => sha256Schema.safeParse(n).success));
    }
    return out.sort();
  }
}

function damaged(expected: string, actual: string): BrokerError {
  return new BrokerError(ErrorCodes.BACKUP_FAILED, `blob ${expected} is damaged (its content hashes to ${actual})`, {
    details: { expected, actual },
  });
}

function asBackupFailure(error: unknown, file: string): BrokerError {
  if (error instanceof BrokerError) return error;
  const text = error instanceof Error ? error.message : String(error);
  return new BrokerError(ErrorCodes.BACKUP_FAILED, `backup of ${file} failed: ${text}`, { cause: error, errno: errorCode(error) });
}
