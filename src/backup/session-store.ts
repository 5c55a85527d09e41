import fs from 'node:fs/promises';
import path from 'node:path';
import { lstatSync, statfsSync, type BigIntStats } from 'node:fs';
import { BrokerError, ErrorCodes, errnoOf } from '../core/errors.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { readForAside, storePlaceOf, type HeldForWriting, type StorePlace } from './aside.js';
import { liveRenames, pathAfterRenames, pathBeforeRenames, treePaths } from './renames.js';
import { addsTo, leaseRecordFiles, leaseRecordsName, readNewRecords } from './lease-records.js';
import { BlobStore, SourceTooLarge, type BlobFaults } from './blob-store.js';
import { observeState } from './file-state.js';
import { buildAbsentEntry, buildDirectoryEntry, buildEntry, buildMetadataEntry, buildRenamedEntry, buildSpecialEntry, checkTargetPath, entryBase, messageOf, type EntryBase, type EntryContent } from './entry-builder.js';
import { errorCode, fileTypeOf, lstatNowOrUndefined, lstatOrUndefined, mkdirChildrenPrivate, mkdirPrivate, removeQuietly } from './fs-util.js';
import { blobRelativePath, sessionBackupDir, storeLayout, validateSessionId, validateTurnId, type StoreLayout } from './layout.js';
import { appendJournalLine, encodeEntryLine, journalHeaderOf, journalPath, journalText, writeJournal } from './journal.js';
import { readManifestFile, readManifestsIn, readTurnRecord, removeStaleJournals, writeManifest, type DamagedTurn, type TurnRecord } from './manifest-io.js';
import {
  MANIFEST_VERSION,
  isRenameRecord,
  isSpecialFileType,
  isStructureEntry,
  turnEntries,
  type AbsentEntry,
  type BackupEntry,
  type ConnectionEntry,
  type DirectoryEntry,
  type MetadataEntry,
  type RenamedEntry,
  type SpecialEntry,
  type TurnEntry,
  type TurnKind,
  type TurnManifest,
} from './manifest-schema.js';
import { readLinkQuietly, readXattrs, setTimesNsWithTouch, type MakeNode, type MetadataOps, type SetTimesNs, type XattrAccess } from './metadata-ops.js';
import { restoreTurn, rewindTurns, type RestoreContext, type RestoreOptions, type RestoreReport, type RewindReport } from './restore.js';
import {
  DEFAULT_BACKUP_SETTINGS,
  STORE_DURABILITY_UNSET,
  FILE_BACKUP_MAX_SIZE_MB,
  durabilitySchema,
  maxBytesOf,
  normaliseBackupSettings,
  type BackupSettings,
  type Durability,
  type OversizePolicy,
} from './settings.js';

export interface OpenStoreOptions {
  /** Store root (see `resolveHome`). */
  home: string;
  sessionId: string;
  logger?: Logger;
  /** Initial settings, normalised like an enable command; default: enabled, 10 MB, deny. */
  settings?: unknown;
  /** xattrs and nanosecond time setting (the native addon supplies these when built). */
  metadata?: MetadataOps;
  clock?: () => Date;
  /** Try reflink copies first (default true). */
  reflink?: boolean;
  /** When backups become durable: before each is acknowledged, or at the turn's commit (see settings.ts). Default STORE_DURABILITY_UNSET. */
  durability?: Durability;
  /** Test seam for blob writes. */
  faults?: BlobFaults;
}

export interface BackupOptions {
  turnId: string;
  /** What is about to happen to the path: open, truncate, rename, delete, … */
  operation: string;
  toolCallId?: string;
  traceId?: string;
}

export interface BeginTurnOptions {
  /** The broker's own start time, so both agree. */
  startedAt?: string;
  kind?: TurnKind;
  restoreOf?: string;
}

interface Limits {
  maxBytes: number;
  oversize: OversizePolicy;
}

/** What a capture may record for the path, depending on what it finds there. */
interface Accept {
  /** Nothing there: record an `absent` entry. */
  absent: boolean;
  /** A directory: record a `directory` entry, fdatasync'd or not. */
  directory: { sync: boolean } | false;
  /** A file or symlink: back up its content (under these limits). */
  content: Limits | false;
  /** false: a content entry is not synced on its own (the caller syncs the journal before it changes anything). */
  contentSync?: boolean;
  /**
   * true: what must be on disk before the change is fsynced. false (durability 'turn'):
   * it is written now (the page cache outlives a killed process) and the commit syncs it.
   */
  durable: boolean;
  /** The change removes or replaces the file and its performer can move it into the store (aside.ts): keep it whole where that is exact. */
  aside?: boolean;
  /** The change touches only a regular file's mode, owner, times or xattrs: keep those, not the content. */
  metadata?: boolean;
  /** The path's metadata is kept already: only a content entry (a file or symlink) may follow it. */
  afterMetadata?: boolean;
}

/** A backup kept whole: the blob its performer moves the file to, and what the settling checks. */
export interface KeptAside {
  entry: BackupEntry;
  /** Absolute path of the blob the file is to be moved to. */
  into: string;
  /** Runs once the performer is done: the blob is there, or the file (unchanged) is copied into it. */
  settle: () => Promise<void>;
}

/**
 * A turn being backed up into. Memory holds exactly what its journal holds (an entry is
 * added only once its line is written; durably, except for the lines appended without
 * their own sync, see #append), so first-version-wins needs no reads.
 */
interface OpenTurn {
  manifest: TurnManifest;
  /** Every entry of the turn by path, content and structure alike: the first state of a path wins. */
  byPath: Map<string, TurnEntry>;
  /**
   * Length of the journal when the next entry may simply be appended to it; undefined
   * when the next write must write it whole from memory: it does not exist yet, an
   * append failed, it ends in a torn line, or the turn comes from an old open manifest.
   */
  journalBytes: number | undefined;
  /** Entries were recorded without an fdatasync since the last one (see #append). */
  unsynced: boolean;
  /** Encoded lines of entries in memory whose line is not written yet (see #append). */
  deferred: string[];
  flushTimer: NodeJS.Timeout | undefined;
  /** Directories the turn renamed whole and would rename back so, in order (renames.ts). */
  renames: RenamedEntry[];
  /** Set while #expandRenames records the renamed trees path by path: other records wait for it. */
  expanding?: Promise<void> | undefined;
  /** The records files of supervisors' leases (lease-records.ts) and how much of each is read. */
  leases: Map<string, number>;
}

/** The inode number of what is at `file` (a renamed directory's identity, which a rename back checks). */
function inodeOf(file: string): string | undefined {
  return lstatNowOrUndefined(file)?.ino.toString();
}

/** Free space a store that ran full needs again before it takes backups (#captureUnlessFull). */
const FULL_RESERVE = 1024n * 1024n;

/** Temp files older than this are leftovers of a crash and are removed on open. */
const STALE_TEMP_MS = 60 * 60 * 1000;

/** Entries recorded without a sync are written in batches of this many lines at most… */
const DEFERRED_LINES = 256;
/** …and at most this long after the first of a batch. */
const DEFERRED_MS = 100;

/** After-states read at once during a commit. */
const COMMIT_CONCURRENCY = 8;

/** About how many items are mapped between two turns of the event loop when `fn` works synchronously. */
const ITEMS_PER_TICK = 256;

/**
 * `items.map(fn)` with at most `limit` calls in flight; results in input order. Each
 * worker lets the event loop run after its share of ITEMS_PER_TICK items (all of them
 * must pause: one paused worker alone does not stop the others' synchronous work), so a
 * long map does not hold up the broker's clients.
 */
async function mapInOrder<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  const share = Math.max(1, Math.floor(ITEMS_PER_TICK / limit));
  let next = 0;
  const worker = async () => {
    for (let done = 1; next < items.length; done += 1) {
      const index = next++;
      out[index] = await fn(items[index] as T);
      if (done % share === 0) await new Promise((resolve) => setImmediate(resolve));
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** A rescue (before a restore) must not fail for size below the largest cap anyone can set. */
const RESCUE_LIMITS: Limits = { maxBytes: FILE_BACKUP_MAX_SIZE_MB.max * 1024 * 1024, oversize: 'deny' };

/**
 * The backups of one session. The broker process owns it: it backs up each path the
 * first time a turn is about to change it, and commits the turn at the end.
 */
export class SessionBackupStore {
  readonly home: string;
  readonly sessionId: string;
  /** `<home>/workspace/sessions/<session-id>/modify_backup` */
  readonly root: string;
  readonly layout: StoreLayout;
  readonly blobs: BlobStore;
  readonly durability: Durability;
  readonly #log: Logger;
  readonly #clock: () => Date;
  readonly #xattrs: XattrAccess | undefined;
  readonly #setTimesNs: SetTimesNs;
  readonly #makeNode: MakeNode | undefined;
  readonly #heldForWriting: HeldForWriting | undefined;
  /** The store's file system and mount: only a file on them can be moved in (set when the store opens). */
  #place: StorePlace | undefined;
  /** A backup failed for want of space: none is taken until there is room again (#captureUnlessFull). */
  #full = false;
  /** Entries kept whole, waiting for their performer (see backupAside). */
  readonly #asides = new WeakMap<TurnEntry, { into: string; sha256: string; file: string; seen: BigIntStats }>();
  #settings: BackupSettings = DEFAULT_BACKUP_SETTINGS;
  readonly #turns = new Map<string, Promise<OpenTurn>>();
  readonly #pending = new Map<string, Promise<TurnEntry | undefined>>();
  #serial: Promise<unknown> = Promise.resolve();

  private constructor(options: OpenStoreOptions, root: string) {
    this.home = options.home;
    this.sessionId = options.sessionId;
    this.root = root;
    this.layout = storeLayout(root);
    this.blobs = new BlobStore(this.layout, { reflink: options.reflink ?? true, faults: options.faults });
    this.durability = options.durability ?? STORE_DURABILITY_UNSET;
    this.#log = (options.logger ?? silentLogger()).child({ sessionId: options.sessionId });
    this.#clock = options.clock ?? (() => new Date());
    this.#xattrs = options.metadata?.xattrs;
    this.#setTimesNs = options.metadata?.setTimesNs ?? setTimesNsWithTouch;
    this.#makeNode = options.metadata?.makeNode;
    this.#heldForWriting = options.metadata?.heldForWriting;
    if (options.settings !== undefined) this.configure(options.settings);
  }

  /** Open (creating, 0700) the store of one session. */
  static async open(options: OpenStoreOptions): Promise<SessionBackupStore> {
    const sessionId = validateSessionId(options.sessionId);
    if (options.durability !== undefined && !durabilitySchema.safeParse(options.durability).success) {
      throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `backup durability must be 'each' or 'turn', got ${JSON.stringify(options.durability)}`);
    }
    if (!path.isAbsolute(options.home)) {
      throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `backup home must be an absolute path, got ${JSON.stringify(options.home)}`);
    }
    const root = sessionBackupDir(path.resolve(options.home), sessionId);
    const store = new SessionBackupStore({ ...options, home: path.resolve(options.home), sessionId }, root);
    try {
      const { blobs, turns, tmp } = store.layout;
      await mkdirPrivate(store.layout.root);
      // A new session's three directories cost one sync of its root, not one each.
      await mkdirChildrenPrivate(store.layout.root, [blobs, turns, tmp]);
      for (const dir of [store.layout.root, blobs, turns, tmp]) await fs.chmod(dir, 0o700);
      store.#place = storePlaceOf(blobs);
      await store.#removeStaleTemps();
      // Tidying only (readers ignore them): never a reason to refuse the store.
      await removeStaleJournals(store.layout, sessionId).catch(() => undefined);
    } catch (error) {
      throw new BrokerError(ErrorCodes.STORE_UNAVAILABLE, `backup store ${root} cannot be opened: ${messageOf(error)}`, {
        cause: error,
        errno: errorCode(error),
      });
    }
    return store;
  }

  /** Apply an enable command (values are normalised, never rejected). */
  configure(input: unknown): BackupSettings {
    this.#settings = normaliseBackupSettings(input);
    this.#log.info({ phase: 'backup', settings: this.#settings }, 'backup settings');
    return this.#settings;
  }

  get settings(): BackupSettings {
    return this.#settings;
  }

  get enabled(): boolean {
    return this.#settings.enabled;
  }

  /** Whether the request path fsyncs each backup before acknowledging it. */
  get #durable(): boolean {
    return this.durability === 'each';
  }

  /** The size cap in bytes. */
  get maxBytes(): number {
    return maxBytesOf(this.#settings);
  }

  /**
   * Record when a turn started. Nothing is written yet: the first backup writes the
   * journal whole (header and line, synced as the durability asks), and a turn that
   * backs nothing up leaves only its manifest at the commit: there is nothing of it to
   * recover before then, and no blob for a journal to keep from the GC. Only loading the
   * turn can fail this.
   */
  async beginTurn(turnId: string, options: BeginTurnOptions = {}): Promise<TurnManifest> {
    return (await this.#turnFor(validateTurnId(turnId), options)).manifest;
  }

  /**
   * The broker is done with this store: remove the spare temp files kept for backups to
   * come (they would otherwise wait an hour to go as stale), stop making fan-out
   * directories ahead, and write the journal lines still waiting for their batch; resolves
   * once nothing of that is in flight, so its owner may remove the home. Backups still work after it.
   */
  async close(): Promise<void> {
    for (const [turnId, opening] of this.#turns) {
      const turn = await opening.catch(() => undefined);
      if (turn?.flushTimer === undefined) continue;
      clearTimeout(turn.flushTimer);
      turn.flushTimer = undefined;
      void this.#exclusively(() => this.#writeDeferred(turnId, turn));
    }
    await Promise.all([this.blobs.close(), this.#serial]);
  }

  /** Whether this store holds an open (begun, not yet committed) turn of that id. */
  hasTurn(turnId: string): boolean {
    return this.#turns.has(turnId);
  }

  /**
   * Back up `file` (absolute, symlink-resolved by the caller) before `operation` changes
   * it. Returns the new entry, or undefined when nothing new was stored: absent, a
   * directory or special file, backup disabled, or the path already backed up in this
   * turn (the first version of a path in a turn is the one kept; it is never replaced).
   */
  async backup(file: string, options: BackupOptions): Promise<BackupEntry | undefined> {
    if (!this.enabled) return undefined;
    return this.#backupWith(file, options, { maxBytes: this.maxBytes, oversize: this.#settings.oversize });
  }

  /**
   * Back up `file` before a change that removes or replaces it (an unlink, a rename over
   * it), made by a performer that can move it into the store instead (the kernel
   * supervisor): where that is exact (aside.ts) the entry names the blob its hash gives, no
   * byte is copied and the size cap does not apply; the performer moves the file to `into`
   * and `settle` must run once it is done (before any other change to it). Otherwise this
   * is `backup` (a copy; `into` absent). Undefined when `backup` would be.
   */
  async backupAside(file: string, options: BackupOptions): Promise<KeptAside | BackupEntry | undefined> {
    if (!this.enabled) return undefined;
    const limits = { maxBytes: this.maxBytes, oversize: this.#settings.oversize };
    const entry = await this.#recordOnce(file, options, { absent: false, directory: false, content: limits, durable: this.#durable, aside: true });
    if (!entry || isStructureEntry(entry)) return undefined;
    const kept = this.#asides.get(entry);
    if (!kept) return entry;
    this.#asides.delete(entry);
    return { entry, into: kept.into, settle: () => this.#settleAside(kept) };
  }

  /** The performer is done: its blob is there, or (the file still unchanged where it was) it is copied in now. */
  async #settleAside(kept: { into: string; sha256: string; file: string; seen: BigIntStats }): Promise<void> {
    if (await this.blobs.settleAside(kept.sha256, this.#durable)) return;
    const now = lstatNowOrUndefined(kept.file);
    if (!now || now.dev !== kept.seen.dev || now.ino !== kept.seen.ino) {
      this.#log.error({ phase: 'backup', file: { path: kept.file }, blob: kept.into }, 'the old version of a file kept whole is neither in the store nor where it was');
      return;
    }
    // The change did not happen (refused, or its caller gone): the file stays, and its copy becomes the blob.
    const stored = await this.blobs.snapshot(kept.file, now, Number.MAX_SAFE_INTEGER, { sync: this.#durable });
    if (stored.sha256 !== kept.sha256) {
      this.#log.error({ phase: 'backup', file: { path: kept.file }, expected: kept.sha256, found: stored.sha256 }, 'a file kept whole changed before its change was dropped');
    }
  }

  async #backupWith(file: string, options: BackupOptions, limits: Limits): Promise<BackupEntry | undefined> {
    const entry = await this.#recordOnce(file, options, { absent: false, directory: false, content: limits, durable: this.#durable });
    return entry && !isStructureEntry(entry) ? entry : undefined;
  }

  /**
   * Record that the turn is about to create `file`: an `absent` entry, so rewinding the
   * turn removes what it put there (and later versions made during the turn, like a
   * sed temp file, are never backed up: the path's first state in the turn is "absent").
   * Costs no blob and no fdatasync of its own. If something is there after all (a race),
   * it is recorded like `backup` (a file or symlink) or `recordDirectory` would.
   * Undefined when backup is off or the path is already recorded in the turn.
   */
  async recordCreated(file: string, options: BackupOptions): Promise<TurnEntry | undefined> {
    if (!this.enabled) return undefined;
    const limits = { maxBytes: this.maxBytes, oversize: this.#settings.oversize };
    return this.#recordOnce(file, options, { absent: true, directory: { sync: true }, content: limits, durable: this.#durable });
  }

  /**
   * Record the directory at `file` (mode, owner, times, xattrs) before the turn deletes,
   * renames or changes it (`sync`: made durable before returning, the default), or adds
   * or removes a name in it (its times move; `sync: false` is enough, like an absent
   * entry: a lost one only leaves times unrestored). Undefined when it is not a
   * directory, backup is off, or the path is already recorded in the turn.
   */
  async recordDirectory(file: string, options: BackupOptions & { sync?: boolean }): Promise<DirectoryEntry | undefined> {
    if (!this.enabled) return undefined;
    const entry = await this.#recordOnce(file, options, { absent: false, directory: { sync: options.sync !== false }, content: false, durable: this.#durable });
    return entry?.kind === 'directory' ? entry : undefined;
  }

  /**
   * Record that the directory `from` is about to be renamed to `to`, whole: one entry, no
   * copy of what it holds (`tree`, relative paths, only names it). A rewind renames it back
   * before anything else. Undefined when backup is off or `from` is no directory.
   */
  async recordRename(from: string, to: string, tree: readonly string[], options: BackupOptions): Promise<RenamedEntry | undefined> {
    return this.enabled ? this.#recordRename(from, to, tree, options, this.#durable) : undefined;
  }

  async #recordRename(from: string, to: string, tree: readonly string[], options: BackupOptions, durable: boolean): Promise<RenamedEntry | undefined> {
    const turnId = validateTurnId(options.turnId);
    const turn = await this.#turnFor(turnId);
    await turn.expanding;
    const base = entryBase(from, options);
    // Moving what now stands where a rename of the turn left a name empty: every rename is recorded path by path first.
    if (turn.renames.length > 0 && pathBeforeRenames(base.path, turn.renames) === undefined) await this.#expandRenames(turnId, options);
    this.#checkWhole();
    const stats = lstatNowOrUndefined(base.path);
    if (!stats?.isDirectory()) return undefined;
    const entry = buildRenamedEntry(base, checkTargetPath(to), tree, stats, this.#readXattrs(base.path), this.#clock().toISOString());
    await this.#append(turnId, entry, { sync: true, durable });
    return entry;
  }

  /**
   * The turn reuses a name one of its directory renames left empty (`mv build old && mkdir
   * build`): what is there now is new, so the renames can no longer be undone by renaming
   * back alone. Every path each renamed tree holds now is recorded on its own, as a rename
   * recorded path by path would have (its content under the name it had before the turn,
   * and its present name as created), and each rename is marked expanded.
   */
  async #expandRenames(turnId: string, options: BackupOptions): Promise<void> {
    const turn = await this.#turnFor(turnId);
    if (turn.expanding) return turn.expanding;
    const live = [...turn.renames];
    const work = (async () => {
      const as = { turnId, operation: options.operation, ...(options.toolCallId ? { toolCallId: options.toolCallId } : {}), ...(options.traceId ? { traceId: options.traceId } : {}) };
      const limits = { maxBytes: this.maxBytes, oversize: this.#settings.oversize };
      for (const [index, rename] of live.entries()) {
        for (const now of await treePaths(pathAfterRenames(rename.to, live, index + 1))) {
          const before = pathBeforeRenames(now, live) ?? now;
          // What it held before the turn, read where it is now; its present name, made by the rename.
          await this.#recordOnce(now, as, { absent: false, directory: { sync: true }, content: limits, durable: this.#durable }, before);
          if (before !== now && !turn.byPath.has(now)) await this.#append(turnId, buildAbsentEntry(entryBase(now, as), this.#clock().toISOString()), { sync: false });
        }
      }
      for (const rename of live) await this.#append(turnId, Object.assign({}, rename, { expanded: true as const, after: null }), { sync: true, durable: this.#durable });
    })();
    turn.expanding = work;
    try {
      await work;
    } finally {
      turn.expanding = undefined;
    }
  }

  /**
   * Record what `file` is before a change of its mode, owner, times or xattrs: a regular
   * file's metadata only (a later change to its content in the turn still keeps that), a
   * symlink's target, a directory's or special file's record as `backup` and
   * `recordDirectory` make them. Undefined when nothing new was recorded.
   */
  async recordMetadata(file: string, options: BackupOptions): Promise<TurnEntry | undefined> {
    if (!this.enabled) return undefined;
    const limits = { maxBytes: this.maxBytes, oversize: this.#settings.oversize };
    return this.#recordOnce(file, options, { absent: false, directory: { sync: true }, content: limits, durable: this.#durable, metadata: true });
  }

  /**
   * The first record of `file` in the turn, once: concurrent calls for the same path wait
   * for the first. A file a directory rename of the turn took along is recorded under the
   * name it had before (renames.ts); one where such a rename left an empty name first has
   * every rename of the turn recorded path by path (#expandRenames).
   */
  async #recordOnce(file: string, options: BackupOptions, accept: Accept, named?: string): Promise<TurnEntry | undefined> {
    const turnId = validateTurnId(options.turnId);
    let recordAs = named ?? file;
    if (named === undefined) {
      const turn = await this.#turnFor(turnId);
      await turn.expanding;
      if (turn.renames.length > 0) {
        const before = pathBeforeRenames(entryBase(file, options).path, turn.renames);
        if (before === undefined) await this.#expandRenames(turnId, options);
        else recordAs = before;
      }
    }
    const base = entryBase(recordAs, options);
    if (recordAs !== file) base.source = file;
    const target = base.path;
    const key = `${turnId}\0${target}`;
    let afterMetadata = false;
    for (;;) {
      const turn = await this.#turnFor(turnId);
      const recorded = turn.byPath.get(target);
      // A file whose metadata alone was kept gets its content kept too before a change to that.
      afterMetadata = recorded?.kind === 'metadata' && accept.content !== false && !accept.metadata;
      if (recorded && !afterMetadata) {
        // A directory first recorded for its times (no sync) and now about to be deleted or
        // changed: its record must be durable before the change, like a new one would be.
        if (recorded.kind === 'directory' && accept.directory && accept.directory.sync && turn.unsynced) await this.#syncJournal(turnId, accept.durable);
        return undefined;
      }
      const inflight = this.#pending.get(key);
      if (!inflight) break;
      await inflight.catch(() => undefined);
    }
    // No await between the check above and this: a concurrent call for the same path waits for ours.
    const work = this.#captureUnlessFull(base, turnId, afterMetadata ? Object.assign({}, accept, { absent: false, directory: false as const, afterMetadata: true }) : accept);
    this.#pending.set(key, work);
    try {
      return await work;
    } finally {
      this.#pending.delete(key);
    }
  }

  /**
   * Once a backup failed for want of space, the store takes none, not even one that would
   * still fit (a journal line): a turn whose records fill the disk could not write the
   * manifest at its commit, and a change should not go ahead on whichever record happens to
   * fit. It takes them again once its file system has FULL_RESERVE free.
   */
  async #captureUnlessFull(base: EntryBase, turnId: string, accept: Accept): Promise<TurnEntry | undefined> {
    if (this.#full) {
      const { bavail, bsize } = statfsSync(this.root, { bigint: true });
      if (bavail * bsize < FULL_RESERVE) throw new BrokerError(ErrorCodes.BACKUP_FAILED, `backup store ${this.root} is full`, { errno: 'ENOSPC' });
      this.#full = false;
    }
    try {
      return await this.#capture(base, turnId, accept);
    } catch (error) {
      if (errnoOf(error) === 'ENOSPC') this.#full = true;
      throw error;
    }
  }

  async #capture(base: EntryBase, turnId: string, accept: Accept): Promise<TurnEntry | undefined> {
    const file = base.source ?? base.path;
    let stats: BigIntStats | undefined;
    try {
      // Synchronous: one lstat costs less than the thread-pool round trip an async one takes.
      stats = lstatNowOrUndefined(file);
    } catch (error) {
      throw new BrokerError(ErrorCodes.BACKUP_FAILED, `cannot inspect ${file}: ${messageOf(error)}`, { cause: error, errno: errorCode(error) });
    }
    if (!stats) {
      if (!accept.absent) return undefined;
      const absent: AbsentEntry = buildAbsentEntry(base, this.#clock().toISOString());
      // No fdatasync of its own: an absent entry protects no data (losing it in a crash only
      // leaves the created file behind on rewind). The next synced append (a content backup)
      // or the commit's fsync'd manifest makes it durable; creating 10,000 files stays cheap.
      await this.#append(turnId, absent, { sync: false });
      return absent;
    }
    if (stats.isDirectory()) {
      if (!accept.directory) return undefined;
      const directory = buildDirectoryEntry(base, stats, this.#readXattrs(file), this.#clock().toISOString());
      await this.#append(turnId, directory, { sync: accept.directory.sync, durable: accept.durable });
      this.#log.debug({ phase: 'backup', turnId, file: { path: file, kind: 'directory' } }, 'recorded directory');
      return directory;
    }
    const limits = accept.content;
    if (!limits) return undefined;
    // After a metadata entry only the regular file it describes can follow, with its bytes.
    if (accept.afterMetadata && !stats.isFile()) return undefined;
    if (!(stats.isFile() || stats.isSymbolicLink())) return this.#captureSpecial(base, turnId, stats, accept);
    if (accept.metadata && stats.isFile()) return this.#captureMetadata(base, turnId, stats, accept);
    let entry: BackupEntry;
    let syncName: (() => Promise<void>) | undefined;
    if (stats.isSymbolicLink()) {
      const linkTarget = await readLinkQuietly(file, stats, this.#setTimesNs).catch((error: unknown) => {
        throw new BrokerError(ErrorCodes.BACKUP_FAILED, `cannot read link ${file}: ${messageOf(error)}`, { cause: error });
      });
      entry = this.#build(base, stats, { kind: 'symlink', sha256: null, blob: null, xattrs: null, linkTarget });
    } else {
      // Kept whole where the change lets it (no byte written, no cap), else copied: cloned
      // first, whatever its size; a real copy only up to the cap.
      const kept = accept.aside ? await this.#keepWhole(base, stats, accept) : undefined;
      if (kept) entry = kept;
      else {
        try {
          const stored = await this.blobs.snapshot(file, stats, limits.maxBytes, { sync: accept.durable, deferDirSync: true });
          syncName = stored.syncName;
          const xattrs = this.#readXattrs(file);
          entry = this.#build(base, stored.stats, { kind: 'file', sha256: stored.sha256, blob: stored.blob, xattrs });
        } catch (error) {
          if (!(error instanceof SourceTooLarge)) throw error;
          // Over the cap and not clonable (or it grew past the cap while we copied it): judge it by its current size.
          const grown = await lstatOrUndefined(file);
          if (!grown?.isFile()) throw new BrokerError(ErrorCodes.BACKUP_FAILED, `${file} changed during backup`, { cause: error });
          entry = this.#oversize(base, grown, limits);
        }
      }
    }
    // The blob's directory sync (its name) runs with the journal line's: both before the entry counts.
    await this.#append(turnId, entry, { sync: accept.contentSync !== false, durable: accept.durable, alongside: syncName });
    this.#log.debug({ phase: 'backup', turnId, file: { path: file, kind: entry.kind, size: entry.size, skipped: entry.skipped } }, 'backed up');
    return entry;
  }

  /**
   * A regular file whose mode, owner, times or xattrs alone are about to change: those are
   * kept (synced like a content backup: they are what the change loses), not its bytes.
   */
  async #captureMetadata(base: EntryBase, turnId: string, stats: BigIntStats, accept: Accept): Promise<MetadataEntry> {
    this.#checkWhole();
    const entry = buildMetadataEntry(base, stats, this.#readXattrs(base.source ?? base.path), this.#clock().toISOString());
    await this.#append(turnId, entry, { sync: accept.contentSync !== false, durable: accept.durable });
    return entry;
  }

  /** The entry of a regular file its performer moves into the store, or undefined when it must be copied (why is logged). */
  async #keepWhole(base: EntryBase, stats: BigIntStats, accept: Accept): Promise<BackupEntry | undefined> {
    if (this.#place === undefined) return undefined;
    this.#checkWhole();
    const file = base.source ?? base.path;
    const read = await readForAside(file, stats, this.#place, this.#heldForWriting, accept.durable);
    if (!read.ok) {
      this.#log.debug({ phase: 'backup', file: { path: base.path }, why: read.why }, 'copied, not kept whole');
      return undefined;
    }
    const into = await this.blobs.prepareAside(read.sha256, accept.durable);
    const entry = this.#build(base, read.stats, { kind: 'file', sha256: read.sha256, blob: blobRelativePath(read.sha256), xattrs: this.#readXattrs(file) });
    this.#asides.set(entry, { into, sha256: read.sha256, file, seen: read.stats });
    return entry;
  }

  /**
   * A backup that writes no blob (one kept whole, a metadata or rename record) still needs
   * the whole store: a store with a directory gone or replaced takes no backup at all, as
   * a copy would fail in it, so what it records is never half there.
   */
  #checkWhole(): void {
    for (const dir of [this.layout.blobs, this.layout.tmp, this.layout.turns]) {
      let whole = false;
      try {
        whole = lstatSync(dir).isDirectory();
      } catch {
        // gone
      }
      if (!whole) throw new BrokerError(ErrorCodes.BACKUP_FAILED, `backup store ${this.root} is damaged: ${dir} is not a directory`);
    }
  }

  /**
   * A FIFO, socket or device node holds no content, but a rewind must make it again:
   * its type, device number, metadata and xattrs (ACLs, trusted.*), synced like a content
   * backup (it guards what the change removes).
   */
  async #captureSpecial(base: EntryBase, turnId: string, stats: BigIntStats, accept: Accept): Promise<SpecialEntry | undefined> {
    const fileType = fileTypeOf(stats);
    if (!isSpecialFileType(fileType)) return undefined;
    const special = buildSpecialEntry(base, stats, fileType, this.#readXattrs(base.source ?? base.path), this.#clock().toISOString());
    await this.#append(turnId, special, { sync: accept.contentSync !== false, durable: accept.durable });
    this.#log.debug({ phase: 'backup', turnId, file: { path: base.path, kind: fileType } }, 'recorded special file');
    return special;
  }

  #oversize(base: EntryBase, stats: BigIntStats, limits: Limits): BackupEntry {
    if (limits.oversize === 'deny') {
      throw new BrokerError(
        ErrorCodes.BACKUP_TOO_LARGE,
        `${base.path} is ${stats.size} bytes, over the backup cap of ${limits.maxBytes} bytes`,
        { details: { path: base.path, size: Number(stats.size), maxBytes: limits.maxBytes } },
      );
    }
    return Object.assign(this.#build(base, stats, { kind: 'file', sha256: null, blob: null, xattrs: null }), { skipped: 'too-large' as const });
  }

  #readXattrs(file: string): Record<string, string> | null {
    try {
      return readXattrs(this.#xattrs, file) ?? null;
    } catch (error) {
      throw new BrokerError(ErrorCodes.BACKUP_FAILED, `cannot read extended attributes of ${file}: ${messageOf(error)}`, { cause: error });
    }
  }

  #build(base: EntryBase, stats: BigIntStats, content: EntryContent): BackupEntry {
    return buildEntry(base, stats, content, this.#clock().toISOString());
  }

  /**
   * Make an entry durable in the turn's journal before the caller may change the file:
   * one appended line and one fdatasync, whatever the size of the turn. Only then is it
   * added to memory, so a failure leaves nothing behind that the disk does not hold.
   *
   * With `sync: false` (absent entries, directories recorded for their times) the entry
   * protects no data, so it is neither synced nor written at once: it joins memory now and
   * its line is written with the next synced append (one write, one fdatasync for all),
   * when DEFERRED_LINES have gathered, or DEFERRED_MS later. A crash before that loses only
   * such entries: a rewind then leaves a created file behind or a directory's times as
   * they are. The commit writes the manifest from memory, so a committed turn has them all.
   *
   * With `durable: false` (durability 'turn') a `sync` entry's line is written at once but
   * not fdatasync'd: the page cache keeps it through a kill of this process, and the
   * commit's manifest makes it durable.
   */
  async #append(
    turnId: string,
    entry: TurnEntry,
    options: { sync: boolean; durable?: boolean; alongside?: (() => Promise<void>) | undefined } = { sync: true },
  ): Promise<void> {
    const line = encodeEntryLine(entry);
    await this.#exclusively(async () => {
      const turn = await this.#turnFor(turnId);
      if (turn.manifest.committedAt !== null) {
        throw new BrokerError(ErrorCodes.BACKUP_FAILED, `turn ${turnId} is already committed`);
      }
      if (!options.sync && turn.journalBytes !== undefined) {
        if (options.alongside) await options.alongside().catch((error: unknown) => {
          throw new BrokerError(ErrorCodes.BACKUP_FAILED, `cannot make a backup of turn ${turnId} durable: ${messageOf(error)}`, {
            cause: error,
            errno: errorCode(error),
          });
        });
        this.#remember(turn, entry);
        turn.deferred.push(line);
        turn.unsynced = true;
        if (turn.deferred.length >= DEFERRED_LINES) await this.#writeDeferred(turnId, turn);
        else this.#flushLater(turnId, turn);
        return;
      }
      await this.#writeLines(turnId, turn, line, options.durable !== false, options.alongside);
      this.#remember(turn, entry);
    });
  }

  #remember(turn: OpenTurn, entry: TurnEntry): void {
    if (isStructureEntry(entry)) (turn.manifest.structure ??= []).push(entry);
    else turn.manifest.files.push(entry);
    // A rename record stands beside the entries of its path; an expanded line takes its rename back.
    if (isRenameRecord(entry)) turn.renames = liveRenames(turn.manifest.structure ?? []);
    else turn.byPath.set(entry.path, entry);
  }

  /**
   * Append the deferred lines and `line` with one write (fdatasync'd when `sync`), or write
   * the journal whole (synced when `sync`) when it does not exist yet (a turn's first
   * backup) or an earlier write failed. Runs inside #exclusively.
   */
  async #writeLines(turnId: string, turn: OpenTurn, line: string, sync: boolean, alongside?: () => Promise<void>): Promise<void> {
    try {
      if (turn.journalBytes === undefined) {
        // Memory holds the deferred entries too: the whole journal includes them.
        const whole = journalText(journalHeaderOf(turn.manifest), turnEntries(turn.manifest), line);
        turn.journalBytes = await writeJournal(this.layout, turnId, whole, { sync, alongside });
        turn.unsynced = !sync;
      } else {
        const text = turn.deferred.join('') + line;
        turn.journalBytes = await appendJournalLine(journalPath(this.layout, turnId), text, turn.journalBytes, { sync, alongside });
        turn.unsynced = !sync;
      }
      turn.deferred = [];
    } catch (error) {
      // Not on disk means not backed up. Whatever the failed write left, the next one rewrites the journal from memory.
      turn.journalBytes = undefined;
      turn.deferred = [];
      throw new BrokerError(ErrorCodes.BACKUP_FAILED, `cannot write the journal of turn ${turnId}: ${messageOf(error)}`, {
        cause: error,
        errno: errorCode(error),
      });
    }
  }

  /** Write the deferred lines now, without a sync (inside #exclusively). A failure is only logged: the next write rewrites the journal whole. */
  async #writeDeferred(turnId: string, turn: OpenTurn): Promise<void> {
    if (turn.deferred.length === 0 || turn.manifest.committedAt !== null || this.#turns.get(turnId) === undefined) return;
    await this.#writeLines(turnId, turn, '', false).catch((error: unknown) => {
      this.#log.warn({ phase: 'backup', turnId, err: error }, 'cannot write deferred journal lines; the next backup rewrites the journal');
    });
  }

  #flushLater(turnId: string, turn: OpenTurn): void {
    if (turn.flushTimer !== undefined) return;
    turn.flushTimer = setTimeout(() => {
      turn.flushTimer = undefined;
      void this.#exclusively(() => this.#writeDeferred(turnId, turn));
    }, DEFERRED_MS);
    // A pending flush never keeps the process alive: what it would write protects no data.
    turn.flushTimer.unref();
  }

  /**
   * Write and fdatasync the journal of an open turn, making every entry recorded so far
   * durable; with `durable` false (durability 'turn') only write the deferred lines.
   */
  async #syncJournal(turnId: string, durable = true): Promise<void> {
    await this.#exclusively(async () => {
      const turn = await this.#turnFor(turnId);
      if (!turn.unsynced || (!durable && turn.deferred.length === 0)) return;
      await this.#writeLines(turnId, turn, '', durable);
    });
  }

  /**
   * A records file for a supervisor's lease in the open turn (lease-records.ts): where it
   * appends, the header line it starts with, and the blobs directory it moves files into.
   */
  async leaseRecords(turnId: string): Promise<{ file: string; header: string; blobs: string }> {
    const id = validateTurnId(turnId);
    const turn = await this.#turnFor(id);
    const file = path.join(this.layout.turns, leaseRecordsName(id));
    turn.leases.set(file, 0);
    return { file, header: JSON.stringify(journalHeaderOf(turn.manifest)), blobs: this.layout.blobs };
  }

  /**
   * Take into the turn what its supervisors recorded since the last look, in their order
   * and as any record (the first of a path wins): before the broker decides a kernel
   * request, and at the commit. Returns the entries that were new to the turn.
   */
  async ingestLeases(turnId: string): Promise<TurnEntry[]> {
    const id = validateTurnId(turnId);
    if (!this.#turns.has(id)) return [];
    return this.#exclusively(async () => this.#ingest(id, await this.#turnFor(id)));
  }

  async #ingest(turnId: string, turn: OpenTurn): Promise<TurnEntry[]> {
    const added: TurnEntry[] = [];
    for (const [file, offset] of turn.leases) {
      const read = readNewRecords(file, offset, { turnId, sessionId: this.sessionId });
      turn.leases.set(file, read.offset);
      for (const entry of read.entries) {
        if (!addsTo(turn.byPath, entry)) continue;
        // Into the journal too, unsynced: its readers then see it in its order among the broker's own.
        const line = encodeEntryLine(entry);
        this.#remember(turn, entry);
        turn.deferred.push(line);
        turn.unsynced = true;
        if (entry.kind === 'file' && entry.sha256 !== null) this.blobs.noteKept(entry.sha256, this.#durable);
        added.push(entry);
      }
    }
    if (turn.deferred.length > 0 && turn.journalBytes !== undefined) await this.#writeDeferred(turnId, turn);
    else if (turn.deferred.length > 0) await this.#writeLines(turnId, turn, '', false);
    return added;
  }

  /**
   * Close a turn: record what each backed-up path looks like now (so restore can tell
   * whether anyone changed it since) and the message. A turn without backups is still
   * written, with no files, so every committed turn is listed.
   */
  async commitTurn(turnId: string, message: string, options: BeginTurnOptions = {}, facts: { connections?: ConnectionEntry[] } = {}): Promise<TurnManifest> {
    const id = validateTurnId(turnId);
    return this.#exclusively(async () => {
      const turn = await this.#turnFor(id, options);
      const { manifest } = turn;
      if (manifest.committedAt !== null) throw new BrokerError(ErrorCodes.BACKUP_FAILED, `turn ${id} is already committed`);
      await this.#ingest(id, turn);
      // A few paths at a time: a turn of thousands of files spends its commit waiting on lstat/open/read.
      const entries = turnEntries(manifest);
      const renames = turn.renames;
      const afters = await mapInOrder(entries, COMMIT_CONCURRENCY, async (entry) => {
        // What the turn created is never hashed (size, mode, mtime and owner tell a later change): a turn that writes many new files commits cheaply.
        // A file whose metadata alone the turn changed is not hashed either: its after-state then needs no read of its bytes.
        const options = { setTimesNs: this.#setTimesNs, xattrs: this.#xattrs, ...(entry.kind === 'absent' || entry.kind === 'metadata' ? { hash: false } : {}) };
        // Where it is now: a directory the turn renamed whole took it along (a rename record: where that directory went since).
        const index = isRenameRecord(entry) ? renames.indexOf(entry) : -1;
        const now = isRenameRecord(entry) ? pathAfterRenames(entry.to, renames, index + 1) : pathAfterRenames(entry.path, renames);
        return observeState(now, options)
          .then((state) => (index >= 0 && state.type === 'other' ? Object.assign(state, { ino: inodeOf(now) }) : state))
          .catch((error: unknown) => {
            this.#log.warn({ phase: 'commit', turnId: id, file: { path: entry.path }, err: error }, 'cannot read after-state; restore will need --force');
            return null;
          });
      });
      // Object.assign, not `{ ...entry, after }`: Node 20's V8 pays a runtime call per field after a spread.
      const files = manifest.files.map((entry, index): BackupEntry => Object.assign({}, entry, { after: afters[index] ?? null }));
      const structure = (manifest.structure ?? []).map((entry, index) => Object.assign({}, entry, { after: afters[files.length + index] ?? null }));
      const committed: TurnManifest = { ...manifest, files, message, committedAt: this.#clock().toISOString() };
      if (structure.length > 0) committed.structure = structure;
      if (facts.connections && facts.connections.length > 0) committed.connections = facts.connections;
      try {
        // Blobs left unsynced (durability 'turn') are durable before the manifest naming them is.
        await this.blobs.syncPending();
        await writeManifest(this.layout, committed);
      } catch (error) {
        throw new BrokerError(ErrorCodes.BACKUP_FAILED, `cannot write the manifest of turn ${id}: ${messageOf(error)}`, {
          cause: error,
          errno: errorCode(error),
        });
      }
      this.#turns.delete(id);
      // Deferred lines are in the manifest now; the journal is about to go.
      if (turn.flushTimer !== undefined) clearTimeout(turn.flushTimer);
      turn.deferred = [];
      // The manifest supersedes the journal and the records files; one left behind by a crash here is ignored and tidied on open.
      await removeQuietly(journalPath(this.layout, id));
      for (const file of await leaseRecordFiles(this.layout, id)) await removeQuietly(file);
      this.#log.info({ phase: 'commit', turnId: id, files: files.length }, 'backup turn committed');
      return committed;
    });
  }

  /**
   * Every turn on disk, oldest start first: committed ones from their manifests, open ones
   * from their journals (committedAt null). Damaged ones are logged and left out, and
   * reported in `damaged` when it is given.
   */
  async listTurns(damaged?: DamagedTurn[]): Promise<TurnManifest[]> {
    return readManifestsIn(this.layout, this.sessionId, { onDamaged: 'skip', log: this.#log, ...(damaged ? { damaged } : {}) });
  }

  /** One turn (committed, or open from its journal); TURN_NOT_FOUND when absent, BACKUP_FAILED when damaged. */
  async readTurn(turnId: string): Promise<TurnManifest> {
    return readManifestFile(this.layout, this.sessionId, validateTurnId(turnId), this.#log);
  }

  /** A blob's bytes after checking their hash (BACKUP_FAILED on any mismatch). */
  async readBlob(sha256: string): Promise<Buffer> {
    return this.blobs.read(sha256);
  }

  /** Every blob some manifest refers to; a damaged manifest throws, so a GC never deletes blindly. */
  async referencedBlobs(): Promise<Set<string>> {
    const manifests = await readManifestsIn(this.layout, this.sessionId, { onDamaged: 'throw', log: this.#log });
    const out = new Set<string>();
    for (const manifest of manifests) for (const file of manifest.files) if (file.sha256 && file.blob) out.add(file.sha256);
    return out;
  }

  /** Put the paths a turn touched back to their state before it (see restore.ts). */
  async restore(ref: string | TurnManifest, options: RestoreOptions = {}): Promise<RestoreReport> {
    const manifest = typeof ref === 'string' ? await this.readTurn(ref) : ref;
    this.#checkOwnTurn(manifest);
    return restoreTurn(this.#restoreContext(), manifest, options);
  }

  /**
   * Undo several turns of this session, `turns` newest first, into one rescue turn
   * (restoring it undoes the whole rewind); stops at the first turn with conflicts
   * unless forced (see restore.ts).
   */
  async rewind(turns: TurnManifest[], options: RestoreOptions = {}): Promise<RewindReport> {
    for (const manifest of turns) this.#checkOwnTurn(manifest);
    return rewindTurns(this.#restoreContext(), turns, options);
  }

  #checkOwnTurn(manifest: TurnManifest): void {
    if (manifest.sessionId !== this.sessionId) {
      throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `turn ${manifest.id} belongs to session ${manifest.sessionId}, not ${this.sessionId}`);
    }
  }

  /** Rescues ignore the enabled switch, the session's cap and its durability: a restore always keeps what it replaces, on disk. */
  #restoreContext(): RestoreContext {
    const as = (turnId: string) => ({ turnId, operation: 'restore' });
    return {
      sessionId: this.sessionId,
      blobs: this.blobs,
      log: this.#log,
      xattrs: this.#xattrs,
      setTimesNs: this.#setTimesNs,
      makeNode: this.#makeNode,
      beginTurn: (turnId, begin) => this.beginTurn(turnId, begin),
      rescue: (file, turnId, options) => this.#recordOnce(file, as(turnId), { absent: false, directory: false, content: RESCUE_LIMITS, contentSync: options?.sync !== false, durable: true }),
      rescueAbsent: (file, turnId) => this.#recordOnce(file, as(turnId), { absent: true, directory: { sync: true }, content: RESCUE_LIMITS, durable: true }),
      rescueDirectory: (file, turnId, { sync }) => this.#recordOnce(file, as(turnId), { absent: false, directory: { sync }, content: false, durable: true }),
      rescueRename: (from, to, tree, turnId) => this.#recordRename(from, to, tree, as(turnId), true),
      rescueMetadata: (file, turnId) => this.#recordOnce(file, as(turnId), { absent: false, directory: false, content: RESCUE_LIMITS, durable: true, metadata: true }),
      syncRescue: (turnId) => this.#syncJournal(turnId),
      commitTurn: (turnId, message) => this.commitTurn(turnId, message),
    };
  }

  #turnFor(turnId: string, options: BeginTurnOptions = {}): Promise<OpenTurn> {
    let turn = this.#turns.get(turnId);
    if (!turn) {
      turn = this.#loadOrCreate(turnId, options);
      this.#turns.set(turnId, turn);
      // A failed load must not stick: the next call tries again.
      turn.catch(() => this.#turns.delete(turnId));
    }
    return turn;
  }

  async #loadOrCreate(turnId: string, options: BeginTurnOptions): Promise<OpenTurn> {
    let record: TurnRecord | undefined;
    try {
      record = await readTurnRecord(this.layout, this.sessionId, turnId, this.#log);
    } catch (error) {
      if (!(error instanceof BrokerError && error.code === ErrorCodes.TURN_NOT_FOUND)) throw error;
    }
    if (record) {
      // A turn reopened after a restart continues where its journal left off.
      const { manifest, journal } = record;
      if (manifest.committedAt !== null) throw new BrokerError(ErrorCodes.BACKUP_FAILED, `turn ${turnId} is already committed`);
      const appendable = journal !== undefined && !journal.tornTail;
      const entries = turnEntries(manifest);
      const byPath = new Map(entries.filter((entry) => !isRenameRecord(entry)).map((f) => [f.path, f]));
      return { manifest, byPath, journalBytes: appendable ? journal.wholeBytes : undefined, unsynced: true, deferred: [], flushTimer: undefined, renames: liveRenames(entries), leases: new Map() };
    }
    const created: TurnManifest = {
      version: MANIFEST_VERSION,
      id: turnId,
      sessionId: this.sessionId,
      kind: options.kind ?? 'turn',
      message: null,
      startedAt: options.startedAt ?? this.#clock().toISOString(),
      committedAt: null,
      files: [],
    };
    if (options.restoreOf !== undefined) created.restoreOf = validateTurnId(options.restoreOf);
    return { manifest: created, byPath: new Map(), journalBytes: undefined, unsynced: false, deferred: [], flushTimer: undefined, renames: [], leases: new Map() };
  }

  /** Journal writes and commits run one at a time. */
  #exclusively<T>(task: () => Promise<T>): Promise<T> {
    const run = this.#serial.then(task, task);
    this.#serial = run.catch(() => undefined);
    return run;
  }

  async #removeStaleTemps(): Promise<void> {
    const now = Date.now();
    for (const name of await fs.readdir(this.layout.tmp)) {
      const file = path.join(this.layout.tmp, name);
      const stats = await fs.lstat(file).catch(() => undefined);
      if (stats && now - stats.mtimeMs > STALE_TEMP_MS) await removeQuietly(file);
    }
  }
}
