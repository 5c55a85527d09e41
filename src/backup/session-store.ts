import fs from 'node:fs/promises';
import path from 'node:path';
import type { BigIntStats } from 'node:fs';
import { BrokerError, ErrorCodes } from '../core/errors.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { BlobStore, SourceTooLarge, type BlobFaults } from './blob-store.js';
import { observeState } from './file-state.js';
import { buildEntry, entryBase, messageOf, type EntryBase, type EntryContent } from './entry-builder.js';
import { errorCode, lstatOrUndefined, mkdirPrivate, removeQuietly } from './fs-util.js';
import { sessionBackupDir, storeLayout, validateSessionId, validateTurnId, type StoreLayout } from './layout.js';
import { appendJournalLine, encodeEntryLine, journalHeaderOf, journalPath, journalText, writeJournal } from './journal.js';
import { readManifestFile, readManifestsIn, readTurnRecord, removeStaleJournals, writeManifest, type TurnRecord } from './manifest-io.js';
import { MANIFEST_VERSION, type BackupEntry, type TurnKind, type TurnManifest } from './manifest-schema.js';
import { readLinkQuietly, readXattrs, setTimesNsWithTouch, type MetadataOps, type SetTimesNs, type XattrAccess } from './metadata-ops.js';
import { restoreTurn, type RestoreOptions, type RestoreReport } from './restore.js';
import {
  DEFAULT_BACKUP_SETTINGS,
  FILE_BACKUP_MAX_SIZE_MB,
  maxBytesOf,
  normaliseBackupSettings,
  type BackupSettings,
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

/**
 * A turn being backed up into. Memory holds exactly what its journal holds durably (an
 * entry is added only once its line is on disk), so first-version-wins needs no reads.
 */
interface OpenTurn {
  manifest: TurnManifest;
  byPath: Map<string, BackupEntry>;
  /**
   * Length of the journal when the next entry may simply be appended to it; undefined
   * when the next write must write it whole from memory: it does not exist yet, an
   * append failed, it ends in a torn line, or the turn comes from an old open manifest.
   */
  journalBytes: number | undefined;
}

/** Temp files older than this are leftovers of a crash and are removed on open. */
const STALE_TEMP_MS = 60 * 60 * 1000;

/** After-states read at once during a commit. */
const COMMIT_CONCURRENCY = 8;

/** `items.map(fn)` with at most `limit` calls in flight; results in input order. */
async function mapInOrder<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      out[index] = await fn(items[index] as T);
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
  readonly #log: Logger;
  readonly #clock: () => Date;
  readonly #xattrs: XattrAccess | undefined;
  readonly #setTimesNs: SetTimesNs;
  #settings: BackupSettings = DEFAULT_BACKUP_SETTINGS;
  readonly #turns = new Map<string, Promise<OpenTurn>>();
  readonly #pending = new Map<string, Promise<BackupEntry | undefined>>();
  #serial: Promise<unknown> = Promise.resolve();

  private constructor(options: OpenStoreOptions, root: string) {
    this.home = options.home;
    this.sessionId = options.sessionId;
    this.root = root;
    this.layout = storeLayout(root);
    this.blobs = new BlobStore(this.layout, { reflink: options.reflink ?? true, faults: options.faults });
    this.#log = (options.logger ?? silentLogger()).child({ sessionId: options.sessionId });
    this.#clock = options.clock ?? (() => new Date());
    this.#xattrs = options.metadata?.xattrs;
    this.#setTimesNs = options.metadata?.setTimesNs ?? setTimesNsWithTouch;
    if (options.settings !== undefined) this.configure(options.settings);
  }

  /** Open (creating, 0700) the store of one session. */
  static async open(options: OpenStoreOptions): Promise<SessionBackupStore> {
    const sessionId = validateSessionId(options.sessionId);
    if (!path.isAbsolute(options.home)) {
      throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `backup home must be an absolute path, got ${JSON.stringify(options.home)}`);
    }
    const root = sessionBackupDir(path.resolve(options.home), sessionId);
    const store = new SessionBackupStore({ ...options, home: path.resolve(options.home), sessionId }, root);
    try {
      for (const dir of [store.layout.root, store.layout.blobs, store.layout.turns, store.layout.tmp]) {
        await mkdirPrivate(dir);
        await fs.chmod(dir, 0o700);
      }
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

  /** The size cap in bytes. */
  get maxBytes(): number {
    return maxBytesOf(this.#settings);
  }

  /**
   * Record when a turn started and write its journal's header (optional: the first backup
   * or the commit starts it otherwise). Only loading the turn can fail this: a journal
   * that cannot be written is logged, and the first backup tries again (and fails closed).
   */
  async beginTurn(turnId: string, options: BeginTurnOptions = {}): Promise<TurnManifest> {
    const id = validateTurnId(turnId);
    const loading = this.#turnFor(id, options);
    const turn = await loading;
    if (turn.journalBytes === undefined) {
      await this.#exclusively(async () => {
        // Unless a backup or the commit got here first.
        if (this.#turns.get(id) !== loading || turn.journalBytes !== undefined) return;
        try {
          turn.journalBytes = await writeJournal(this.layout, id, journalText(journalHeaderOf(turn.manifest), turn.manifest.files));
        } catch (error) {
          this.#log.warn({ phase: 'backup', turnId: id, err: error }, 'cannot write the journal of a new turn; the first backup will try again');
        }
      });
    }
    return turn.manifest;
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

  async #backupWith(file: string, options: BackupOptions, limits: Limits): Promise<BackupEntry | undefined> {
    const base = entryBase(file, options);
    const target = base.path;
    const turnId = validateTurnId(options.turnId);
    const key = `${turnId}\0${target}`;
    for (;;) {
      const turn = await this.#turnFor(turnId);
      if (turn.byPath.has(target)) return undefined;
      const inflight = this.#pending.get(key);
      if (!inflight) break;
      await inflight.catch(() => undefined);
    }
    // No await between the check above and this: a concurrent call for the same path waits for ours.
    const work = this.#capture(base, turnId, limits);
    this.#pending.set(key, work);
    try {
      return await work;
    } finally {
      this.#pending.delete(key);
    }
  }

  async #capture(base: EntryBase, turnId: string, limits: Limits): Promise<BackupEntry | undefined> {
    const file = base.path;
    let stats: BigIntStats | undefined;
    try {
      stats = await lstatOrUndefined(file);
    } catch (error) {
      throw new BrokerError(ErrorCodes.BACKUP_FAILED, `cannot inspect ${file}: ${messageOf(error)}`, { cause: error, errno: errorCode(error) });
    }
    if (!stats || !(stats.isFile() || stats.isSymbolicLink())) return undefined;
    let entry: BackupEntry;
    if (stats.isSymbolicLink()) {
      const linkTarget = await readLinkQuietly(file, stats, this.#setTimesNs).catch((error: unknown) => {
        throw new BrokerError(ErrorCodes.BACKUP_FAILED, `cannot read link ${file}: ${messageOf(error)}`, { cause: error });
      });
      entry = this.#build(base, stats, { kind: 'symlink', sha256: null, blob: null, xattrs: null, linkTarget });
    } else if (stats.size > BigInt(limits.maxBytes)) {
      entry = this.#oversize(base, stats, limits);
    } else {
      try {
        const stored = await this.blobs.snapshot(file, stats, limits.maxBytes);
        const xattrs = this.#readXattrs(file);
        entry = this.#build(base, stored.stats, { kind: 'file', sha256: stored.sha256, blob: stored.blob, xattrs });
      } catch (error) {
        if (!(error instanceof SourceTooLarge)) throw error;
        // It grew past the cap while we copied it: judge it by its current size.
        const grown = await lstatOrUndefined(file);
        if (!grown?.isFile()) throw new BrokerError(ErrorCodes.BACKUP_FAILED, `${file} changed during backup`, { cause: error });
        entry = this.#oversize(base, grown, limits);
      }
    }
    await this.#append(turnId, entry);
    this.#log.debug({ phase: 'backup', turnId, file: { path: file, kind: entry.kind, size: entry.size, skipped: entry.skipped } }, 'backed up');
    return entry;
  }

  #oversize(base: EntryBase, stats: BigIntStats, limits: Limits): BackupEntry {
    if (limits.oversize === 'deny') {
      throw new BrokerError(
        ErrorCodes.BACKUP_TOO_LARGE,
        `${base.path} is ${stats.size} bytes, over the backup cap of ${limits.maxBytes} bytes`,
        { details: { path: base.path, size: Number(stats.size), maxBytes: limits.maxBytes } },
      );
    }
    return { ...this.#build(base, stats, { kind: 'file', sha256: null, blob: null, xattrs: null }), skipped: 'too-large' };
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
   */
  async #append(turnId: string, entry: BackupEntry): Promise<void> {
    const line = encodeEntryLine(entry);
    await this.#exclusively(async () => {
      const turn = await this.#turnFor(turnId);
      if (turn.manifest.committedAt !== null) {
        throw new BrokerError(ErrorCodes.BACKUP_FAILED, `turn ${turnId} is already committed`);
      }
      try {
        turn.journalBytes =
          turn.journalBytes === undefined
            ? await writeJournal(this.layout, turnId, journalText(journalHeaderOf(turn.manifest), turn.manifest.files, line))
            : await appendJournalLine(journalPath(this.layout, turnId), line, turn.journalBytes);
      } catch (error) {
        // Not on disk means not backed up. Whatever the failed write left, the next one rewrites the journal from memory.
        turn.journalBytes = undefined;
        throw new BrokerError(ErrorCodes.BACKUP_FAILED, `cannot write the journal of turn ${turnId}: ${messageOf(error)}`, {
          cause: error,
          errno: errorCode(error),
        });
      }
      turn.manifest.files.push(entry);
      turn.byPath.set(entry.path, entry);
    });
  }

  /**
   * Close a turn: record what each backed-up path looks like now (so restore can tell
   * whether anyone changed it since) and the message. A turn without backups is still
   * written, with no files, so every committed turn is listed.
   */
  async commitTurn(turnId: string, message: string, options: BeginTurnOptions = {}): Promise<TurnManifest> {
    const id = validateTurnId(turnId);
    return this.#exclusively(async () => {
      const turn = await this.#turnFor(id, options);
      const { manifest } = turn;
      if (manifest.committedAt !== null) throw new BrokerError(ErrorCodes.BACKUP_FAILED, `turn ${id} is already committed`);
      // A few paths at a time: a turn of thousands of files spends its commit waiting on lstat/open/read.
      const files = await mapInOrder(manifest.files, COMMIT_CONCURRENCY, async (entry): Promise<BackupEntry> => {
        const after = await observeState(entry.path, { setTimesNs: this.#setTimesNs }).catch((error: unknown) => {
          this.#log.warn({ phase: 'commit', turnId: id, file: { path: entry.path }, err: error }, 'cannot read after-state; restore will need --force');
          return null;
        });
        return { ...entry, after };
      });
      const committed: TurnManifest = { ...manifest, files, message, committedAt: this.#clock().toISOString() };
      try {
        await writeManifest(this.layout, committed);
      } catch (error) {
        throw new BrokerError(ErrorCodes.BACKUP_FAILED, `cannot write the manifest of turn ${id}: ${messageOf(error)}`, {
          cause: error,
          errno: errorCode(error),
        });
      }
      this.#turns.delete(id);
      // The manifest supersedes the journal; one left behind by a crash here is ignored and tidied on open.
      await removeQuietly(journalPath(this.layout, id));
      this.#log.info({ phase: 'commit', turnId: id, files: files.length }, 'backup turn committed');
      return committed;
    });
  }

  /**
   * Every turn on disk, oldest start first: committed ones from their manifests, open ones
   * from their journals (committedAt null). Damaged ones are logged and left out.
   */
  async listTurns(): Promise<TurnManifest[]> {
    return readManifestsIn(this.layout, this.sessionId, { onDamaged: 'skip', log: this.#log });
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
    if (manifest.sessionId !== this.sessionId) {
      throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `turn ${manifest.id} belongs to session ${manifest.sessionId}, not ${this.sessionId}`);
    }
    return restoreTurn(
      {
        sessionId: this.sessionId,
        blobs: this.blobs,
        log: this.#log,
        xattrs: this.#xattrs,
        setTimesNs: this.#setTimesNs,
        beginTurn: (turnId, begin) => this.beginTurn(turnId, begin),
        rescue: (file, turnId) => this.#backupWith(file, { turnId, operation: 'restore' }, RESCUE_LIMITS),
        commitTurn: (turnId, message) => this.commitTurn(turnId, message),
      },
      manifest,
      options,
    );
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
      return { manifest, byPath: new Map(manifest.files.map((f) => [f.path, f])), journalBytes: appendable ? journal.wholeBytes : undefined };
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
    return { manifest: created, byPath: new Map(), journalBytes: undefined };
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
