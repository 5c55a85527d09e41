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
import { readManifestFile, readManifestsIn, writeManifest } from './manifest-io.js';
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

interface OpenTurn {
  manifest: TurnManifest;
  byPath: Map<string, BackupEntry>;
}

/** Temp files older than this are leftovers of a crash and are removed on open. */
const STALE_TEMP_MS = 60 * 60 * 1000;

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

  /** Record when a turn started (optional: the first backup or the commit starts it otherwise). */
  async beginTurn(turnId: string, options: BeginTurnOptions = {}): Promise<TurnManifest> {
    return (await this.#turnFor(validateTurnId(turnId), options)).manifest;
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

  /** Add an entry and rewrite the manifest at once, so a crash loses nothing already backed up. */
  async #append(turnId: string, entry: BackupEntry): Promise<void> {
    await this.#exclusively(async () => {
      const turn = await this.#turnFor(turnId);
      if (turn.manifest.committedAt !== null) {
        throw new BrokerError(ErrorCodes.BACKUP_FAILED, `turn ${turnId} is already committed`);
      }
      turn.manifest.files.push(entry);
      turn.byPath.set(entry.path, entry);
      try {
        await writeManifest(this.layout, turn.manifest);
      } catch (error) {
        // Not on disk means not backed up: forget it so the caller's denial leaves a consistent state.
        turn.manifest.files.pop();
        turn.byPath.delete(entry.path);
        throw new BrokerError(ErrorCodes.BACKUP_FAILED, `cannot write the manifest of turn ${turnId}: ${messageOf(error)}`, {
          cause: error,
          errno: errorCode(error),
        });
      }
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
      const files = [];
      for (const entry of manifest.files) {
        const after = await observeState(entry.path, { setTimesNs: this.#setTimesNs }).catch((error: unknown) => {
          this.#log.warn({ phase: 'commit', turnId: id, file: { path: entry.path }, err: error }, 'cannot read after-state; restore will need --force');
          return null;
        });
        files.push({ ...entry, after });
      }
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
      this.#log.info({ phase: 'commit', turnId: id, files: files.length }, 'backup turn committed');
      return committed;
    });
  }

  /** Every manifest on disk, oldest start first. Damaged manifests are logged and left out. */
  async listTurns(): Promise<TurnManifest[]> {
    return readManifestsIn(this.layout, this.sessionId, { onDamaged: 'skip', log: this.#log });
  }

  /** One manifest; TURN_NOT_FOUND when absent, BACKUP_FAILED when damaged. */
  async readTurn(turnId: string): Promise<TurnManifest> {
    return readManifestFile(this.layout, this.sessionId, validateTurnId(turnId));
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
    let manifest: TurnManifest | undefined;
    try {
      manifest = await readManifestFile(this.layout, this.sessionId, turnId);
    } catch (error) {
      if (!(error instanceof BrokerError && error.code === ErrorCodes.TURN_NOT_FOUND)) throw error;
    }
    if (manifest) {
      // A turn reopened after a restart continues where its manifest left off.
      if (manifest.committedAt !== null) throw new BrokerError(ErrorCodes.BACKUP_FAILED, `turn ${turnId} is already committed`);
      return { manifest, byPath: new Map(manifest.files.map((f) => [f.path, f])) };
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
    return { manifest: created, byPath: new Map() };
  }

  /** Manifest writes and commits run one at a time. */
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
