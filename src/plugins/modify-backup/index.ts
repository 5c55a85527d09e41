import { z } from 'zod';
import {
  BrokerError,
  ErrorCodes,
  Stage,
  toBrokerError,
  type Broker,
  type BrokerPlugin,
  type Origin,
  type RequestContext,
} from '../../core/index.js';
import { connectionEntrySchema, keptFileCount, type BackupEntry } from '../../backup/manifest-schema.js';
import { SessionBackupStore, type BackupOptions, type OpenStoreOptions } from '../../backup/session-store.js';
import { DEFAULT_DURABILITY, durabilitySchema, normaliseBackupSettings } from '../../backup/settings.js';
import { nativeMetadataOps } from '../../native/metadata-ops.js';
import { parseOptions } from '../options.js';
import { recordPlan, type ExemptFrom, type RecordPlan } from './affected-files.js';
import { getLeaseHooks } from '../lease/hooks.js';
import { leasedOpSchema } from '../lease/schema.js';
import { getModifyBackupHooks, type BackedUpInfo, type ModifyBackupHooks } from './hooks.js';

export { getModifyBackupHooks, type BackedUpInfo, type ModifyBackupHooks } from './hooks.js';
export type { ExemptFrom } from './affected-files.js';

/** The exempt taps as one test, or none when nothing taps (then no path pays for the question). */
function exemptFrom(exempt: ModifyBackupHooks['exempt']): ExemptFrom | undefined {
  return exempt.isUsed() ? (path) => exempt.call(path) : undefined;
}

export const modifyBackupOptionsSchema = z.strictObject({
  /** Store root (`$BROKERED_SHELL_HOME` or `~/.brokered-shell`). */
  home: z.string().refine((value) => value.startsWith('/'), 'home must be absolute'),
  enabled: z.boolean().default(true),
  fileBackupMaxSizeMB: z.number().optional(),
  oversize: z.enum(['deny', 'skip']).optional(),
  /** A store option, not an enable-command setting: fixed for the session (see backup/settings.ts). */
  durability: durabilitySchema.default(DEFAULT_DURABILITY),
});
export type ModifyBackupOptions = z.input<typeof modifyBackupOptionsSchema>;

/** Log phase per origin, as the reference's troubleshooting guide names them. */
const PHASE: Record<Origin, string> = {
  'text-token': 'ipc-token-backup',
  'host-op': 'host-modify-backup',
  kernel: 'kernel-backup',
  api: 'api-backup',
};

/**
 * Backs up every existing file a request is about to change, before it changes, into
 * the session's store; commits the store's turn when the broker's turn commits. Any
 * failure throws, and the core turns a throw here into deny: no backup, no change.
 * Also answers the owner's control commands EnableModifyBackup, ModifyBackup and
 * CommitModifyBackup.
 */
export class ModifyBackupPlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = 'modify-backup';
  readonly name = ModifyBackupPlugin.PLUGIN_NAME;
  readonly #options: z.infer<typeof modifyBackupOptionsSchema>;
  readonly #storeOptions: Partial<OpenStoreOptions>;
  #store: Promise<SessionBackupStore> | undefined;
  /**
   * Whether backups are taken, as the options and the last EnableModifyBackup said. Off
   * needs no store: an owner that cannot open the store turns backup off for the turn
   * (changes then proceed without backups) rather than leave it half open.
   */
  #enabled: boolean;
  /** The distinct paths exempt taps kept out of the open turn, by name. */
  #exempted: { turnId: string; paths: Map<string, Set<string>> } | undefined;

  constructor(options: ModifyBackupOptions, storeOptions: Partial<OpenStoreOptions> = {}) {
    this.#options = parseOptions(this.name, modifyBackupOptionsSchema, options);
    this.#storeOptions = storeOptions;
    this.#enabled = this.#options.enabled;
  }

  /** The session's store, opened on first use; a failed open is retried next time. */
  store(broker: Broker): Promise<SessionBackupStore> {
    if (!this.#store) {
      const { fileBackupMaxSizeMB, oversize, durability } = this.#options;
      const enabled = this.#enabled;
      const settings: Record<string, unknown> = { enabled };
      if (fileBackupMaxSizeMB !== undefined) settings.fileBackupMaxSizeMB = fileBackupMaxSizeMB;
      if (oversize) settings.oversize = oversize;
      const options: OpenStoreOptions = Object.assign({ metadata: nativeMetadataOps() }, this.#storeOptions, {
        home: this.#options.home,
        sessionId: broker.sessionId,
        logger: broker.log,
      });
      options.durability = durability;
      options.settings = settings;
      this.#store = SessionBackupStore.open(options);
      this.#store.catch(() => {
        this.#store = undefined;
      });
    }
    return this.#store;
  }

  apply(broker: Broker): void {
    const { exempt } = getModifyBackupHooks(broker);
    broker.hooks.preModifyBackup.tapPromise({ name: this.name, stage: Stage.NORMAL }, async (resolved, _decision, context) => {
      const turnId = broker.currentTurn?.id;
      if (!turnId) throw new BrokerError(ErrorCodes.BACKUP_FAILED, 'no open turn to back up into');
      if (!this.#enabled) return;
      const plan = await recordPlan(resolved, exemptFrom(exempt));
      this.#countExempted(turnId, plan.exempted);
      if (plan.content.length + plan.metadata.length + plan.renames.length + plan.directories.length + plan.created.length + plan.parents.length === 0) return;
      const { request } = resolved;
      // Made only when something is logged: a child logger per request cost more than the rest of this tap.
      const log = () => context.log.child({ phase: PHASE[request.origin] });
      // Content and directories are what a rewind brings back: no store, no change. A request
      // that only creates paths risks nothing without one: it goes ahead unrecorded (its
      // creations then survive a rewind), as creating a file always could.
      const guardsData = plan.content.length + plan.metadata.length + plan.renames.length + plan.directories.length > 0;
      const store = guardsData
        ? await this.#openOrFail(broker)
        : await this.store(broker).catch((error: unknown) => {
            log().warn({ err: error, created: plan.created }, 'backup store unavailable: creations are not recorded');
            return undefined;
          });
      if (!store?.enabled) return;
      const as: BackupOptions & { sync?: boolean } = { turnId, operation: request.operation };
      if (request.toolCallId) as.toolCallId = request.toolCallId;
      if (request.traceId) as.traceId = request.traceId;
      // The store keeps the first state of a path in a turn: a path recorded as created is
      // never backed up later in the turn (a sed temp file, a file written then renamed away),
      // since restoring it would resurrect a file that did not exist before the turn.
      // Records without their own fdatasync (created paths, parents' times) go before the
      // synced ones where they can: a later fdatasync of the journal makes them durable too.
      for (const path of plan.created) await store.recordCreated(path, as);
      for (const path of plan.directories) await store.recordDirectory(path, as);
      // Object.assign, not `{ ...as, sync }`: Node 20's V8 pays a runtime call per field after a spread.
      const unsynced = Object.assign({}, as, { sync: false });
      for (const path of plan.parents) await store.recordDirectory(path, unsynced);
      for (const path of plan.metadata) await store.recordMetadata(path, as);
      for (const rename of plan.renames) await store.recordRename(rename.from, rename.to, rename.tree, as);
      // The file the change removes or replaces goes to the store whole when its performer can move it there.
      const aside = request.options.movesAside === true && context.handover && context.whenPerformed ? plan.victim : undefined;
      for (const path of plan.content) {
        const entry = aside?.path === path ? await this.#keepAside(store, path, aside.role, as, context) : await store.backup(path, as);
        if (broker.log.isLevelEnabled('info')) log().info({ path, sha256: entry?.sha256, size: entry?.size, first: entry !== undefined }, 'backed up before change');
        if (entry) {
          this.#publish(broker, entry, {
            turnId,
            operation: request.operation,
            requestId: context.requestId,
            origin: request.origin,
            ...(request.toolCallId ? { toolCallId: request.toolCallId } : {}),
          });
        }
      }
    });

    // What a supervisor records under a lease, and where; the changes it may then decide.
    getLeaseHooks(broker).contribute.tapPromise(this.name, async (lease) => {
      const store = this.#enabled ? await this.store(broker).catch(() => undefined) : undefined;
      if (!store?.enabled) {
        // Nothing is recorded: the supervisor has nothing to write either.
        if (!this.#enabled) lease.ops.push(...leasedOpSchema.options);
        return;
      }
      const turn = await broker.beginTurn();
      await store.beginTurn(turn.id, { startedAt: turn.startedAt });
      const records = await store.leaseRecords(turn.id);
      lease.store = { turnId: turn.id, journal: records.file, header: records.header, blobs: records.blobs, durability: store.durability };
      // Durably backed up before each change ('each'): only what records no data (creations) is left to the supervisor.
      lease.ops.push(...(store.durability === 'each' ? (['create', 'mkdir', 'link'] as const) : leasedOpSchema.options));
    });
    getLeaseHooks(broker).catchUp.tapPromise(this.name, async () => {
      const turnId = broker.currentTurn?.id;
      const store = turnId ? await this.#store?.catch(() => undefined) : undefined;
      if (!turnId || !store) return;
      for (const entry of await store.ingestLeases(turnId)) getLeaseHooks(broker).leased.call(entry);
    });

    broker.hooks.close.tapPromise(this.name, async () => {
      const store = await this.#store?.catch(() => undefined);
      await store?.close();
    });

    broker.hooks.turnStarted.tapPromise(this.name, async (turn) => {
      const store = await this.store(broker).catch(() => undefined);
      if (this.#enabled && store?.enabled) await store.beginTurn(turn.id, { startedAt: turn.startedAt });
    });

    broker.hooks.turnCommitting.tapPromise(this.name, async (turn) => {
      // Counted first: a turn that changed only exempt paths may have no store turn at all.
      const exempted = this.#exempted?.turnId === turn.id ? this.#exempted.paths : undefined;
      this.#exempted = undefined;
      if (exempted) turn.facts.exempted = Object.fromEntries([...exempted].map(([by, paths]) => [by, paths.size]));
      // A store that never opened holds nothing of this turn (every backup would have
      // failed, and with it the change): there is nothing to commit and nothing lost.
      const store = await this.store(broker).catch(() => undefined);
      if (!store?.hasTurn(turn.id)) return;
      // The turn's connections (NetworkPlugin) are kept with it; a list that does not check is left out.
      const connections = z.array(connectionEntrySchema).safeParse(turn.facts.connections ?? []);
      const manifest = await store.commitTurn(turn.id, turn.message ?? '', {}, connections.success ? { connections: connections.data } : {});
      // A file over the size cap under `oversize: skip` has an entry but no content: not a backup.
      const unsaved = manifest.files.filter((file) => file.skipped === 'too-large').map((file) => file.path);
      // A FIFO, socket or device the turn removed or changed is recorded so it can be made again, and a
      // file whose metadata alone changed has that kept: backups too (a file counts once).
      turn.facts.backups = keptFileCount(manifest, { unsaved: false });
      turn.facts.unsaved = unsaved;
    });

    broker.hooks.control.for('EnableModifyBackup').tapPromise(this.name, async (payload) => {
      const requested = normaliseBackupSettings(payload);
      if (!requested.enabled) {
        // Turning backup off always succeeds, store or no store.
        this.#enabled = false;
        const store = await this.store(broker).catch(() => undefined);
        return Object.assign({ ok: true }, store ? store.configure(requested) : requested, { storeAvailable: store !== undefined });
      }
      const store = await this.#openOrFail(broker);
      const settings = store.configure(requested);
      this.#enabled = true;
      const turn = broker.currentTurn;
      if (settings.enabled && turn) await store.beginTurn(turn.id, { startedAt: turn.startedAt });
      return { ok: true, ...settings };
    });

    broker.hooks.control.for('ModifyBackup').tapPromise(this.name, async (payload) => {
      const targetPath = payload.targetPath;
      if (typeof targetPath !== 'string' || !targetPath.startsWith('/')) {
        return { ok: false, error: 'ModifyBackup needs an absolute targetPath', errorCode: ErrorCodes.BAD_REQUEST };
      }
      if (!this.#enabled) return { ok: true, backedUp: false };
      const store = await this.#openOrFail(broker);
      const turn = await broker.beginTurn();
      const entry = await store.backup(targetPath, { turnId: turn.id, operation: 'modify' });
      if (entry) this.#publish(broker, entry, { turnId: turn.id, operation: 'modify' });
      return { ok: true, backedUp: entry !== undefined };
    });

    broker.hooks.control.for('CommitModifyBackup').tapPromise(this.name, async (payload) => {
      const message = typeof payload.commitMsg === 'string' ? payload.commitMsg : '';
      const turn = await broker.commitTurn(message);
      return {
        ok: true,
        turnId: turn.id,
        files: turn.facts.backups ?? 0,
        unsaved: turn.facts.unsaved ?? [],
        notices: turn.facts.notices ?? [],
        exempted: turn.facts.exempted ?? {},
      };
    });
  }

  /** A backup its performer completes by moving the file into the store; the copy when it cannot. */
  async #keepAside(store: SessionBackupStore, path: string, role: 'path' | 'to', as: BackupOptions, context: RequestContext): Promise<BackupEntry | undefined> {
    const kept = await store.backupAside(path, as);
    if (!kept || !('into' in kept)) return kept;
    if (context.handover) context.handover.aside = { role, into: kept.into };
    context.whenPerformed?.(kept.settle);
    return kept.entry;
  }

  /** Paths of the open turn an exempt tap kept out of it, by the tap's name: counted at the commit, never listed. */
  #countExempted(turnId: string, exempted: RecordPlan['exempted']): void {
    if (exempted.length === 0) return;
    if (this.#exempted?.turnId !== turnId) this.#exempted = { turnId, paths: new Map() };
    const { paths } = this.#exempted;
    for (const { path, by } of exempted) {
      let named = paths.get(by);
      if (!named) paths.set(by, (named = new Set()));
      named.add(path);
    }
  }

  #publish(broker: Broker, entry: BackupEntry, info: BackedUpInfo): void {
    try {
      getModifyBackupHooks(broker).backedUp.call(entry, info);
    } catch (error) {
      // The backup is made; a listener's failure must not turn it into a denial.
      broker.log.error({ phase: 'backup', err: error, path: entry.path }, 'a backedUp listener failed');
    }
  }

  async #openOrFail(broker: Broker): Promise<SessionBackupStore> {
    try {
      return await this.store(broker);
    } catch (error) {
      throw new BrokerError(ErrorCodes.STORE_UNAVAILABLE, `backup store unavailable: ${toBrokerError(error).message}`, { cause: error });
    }
  }
}
