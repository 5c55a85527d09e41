import fs from 'node:fs/promises';
import path from 'node:path';
import { BrokerError, ErrorCodes } from '../core/errors.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { firstLine, printable } from '../core/printable.js';
import { errorCode } from './fs-util.js';
import { resolveHome, sessionBackupDir, sessionIdSchema, sessionsDir, validateSessionId } from './layout.js';
import { compareTimes, sortTurns, type DamagedTurn } from './manifest-io.js';
import type { TurnManifest } from './manifest-schema.js';
import type { MetadataOps } from './metadata-ops.js';
import { SessionBackupStore } from './session-store.js';

export interface BackupHomeOptions {
  /** Store root; default `resolveHome()`. */
  home?: string;
  logger?: Logger;
  metadata?: MetadataOps;
}

export interface FoundTurn {
  store: SessionBackupStore;
  manifest: TurnManifest;
}

export interface RewindPlan {
  store: SessionBackupStore;
  /** The turn the session is rewound to before. */
  target: TurnManifest;
  /** It and every later 'turn'-kind turn of its session, newest first. */
  turns: TurnManifest[];
}

/** The ref that means "the most recently committed turn". */
export const LATEST = 'latest';

/** Candidates an ambiguous turn reference lists before saying how many more there are. */
const AMBIGUOUS_SHOWN = 10;

/** Every session's backups under one home: what the CLI lists, shows and restores from. */
export class BackupHome {
  readonly home: string;
  readonly #log: Logger;
  readonly #metadata: MetadataOps | undefined;
  readonly #stores = new Map<string, Promise<SessionBackupStore>>();

  constructor(options: BackupHomeOptions = {}) {
    this.home = path.resolve(options.home ?? resolveHome());
    this.#log = options.logger ?? silentLogger();
    this.#metadata = options.metadata;
  }

  /** Sessions that have a backup store, sorted. Invalid directory names are ignored. */
  async listSessions(): Promise<string[]> {
    let names: string[];
    try {
      names = await fs.readdir(sessionsDir(this.home));
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return [];
      throw new BrokerError(ErrorCodes.STORE_UNAVAILABLE, `cannot list sessions under ${this.home}: ${String(error)}`, {
        cause: error,
        errno: errorCode(error),
      });
    }
    const out: string[] = [];
    for (const name of names.sort()) {
      if (!sessionIdSchema.safeParse(name).success) continue;
      const stats = await fs.lstat(sessionBackupDir(this.home, name)).catch(() => undefined);
      if (stats?.isDirectory()) out.push(name);
    }
    return out;
  }

  /** The store of an existing session (never creates one: TURN_NOT_FOUND for an unknown session). */
  async session(sessionId: string): Promise<SessionBackupStore> {
    const id = validateSessionId(sessionId);
    let store = this.#stores.get(id);
    if (!store) {
      store = this.#open(id);
      this.#stores.set(id, store);
      store.catch(() => this.#stores.delete(id));
    }
    return store;
  }

  async #open(sessionId: string): Promise<SessionBackupStore> {
    const stats = await fs.lstat(sessionBackupDir(this.home, sessionId)).catch(() => undefined);
    if (!stats?.isDirectory()) {
      throw new BrokerError(ErrorCodes.TURN_NOT_FOUND, `no backups for session ${sessionId} under ${this.home}`, { details: { sessionId } });
    }
    return SessionBackupStore.open({ home: this.home, sessionId, logger: this.#log, metadata: this.#metadata });
  }

  /** Turns of one session or of all, ordered by start time. */
  async listTurns(options: { sessionId?: string; damaged?: DamagedTurn[] } = {}): Promise<TurnManifest[]> {
    const sessions = options.sessionId === undefined ? await this.listSessions() : [validateSessionId(options.sessionId)];
    const out: TurnManifest[] = [];
    for (const sessionId of sessions) out.push(...(await (await this.session(sessionId)).listTurns(options.damaged)));
    return sortTurns(out);
  }

  /**
   * The readable turns, for a choice that a turn left out would make wrong (which is the
   * latest, what a prefix names, what a rewind undoes): a damaged turn in scope fails it,
   * named, instead of the choice falling on another turn.
   */
  async #turnsForChoice(options: { sessionId?: string }, choosing: string, relevant: (damaged: DamagedTurn) => boolean = () => true): Promise<TurnManifest[]> {
    const damaged: DamagedTurn[] = [];
    const turns = await this.listTurns({ ...options, damaged });
    const blocking = damaged.filter(relevant);
    if (blocking.length > 0) {
      const named = blocking.map((d) => `  ${printable(d.name)} (session ${printable(d.sessionId)}): ${printable(firstLine(d.reason))}`).join('\n');
      throw new BrokerError(ErrorCodes.BACKUP_FAILED, `cannot tell ${choosing}: a turn cannot be read\n${named}\nrepair or remove it first (a full turn id still reaches the others)`);
    }
    return turns;
  }

  /**
   * A turn by full id, unique id prefix, or 'latest' (the last committed). Unknown or
   * ambiguous refs throw TURN_NOT_FOUND; an ambiguous one lists its candidates.
   */
  async findTurn(ref: string, options: { sessionId?: string } = {}): Promise<FoundTurn> {
    if (typeof ref !== 'string' || ref.length === 0 || ref.length > 256 || ref.includes('/') || ref.includes('\0')) {
      throw new BrokerError(ErrorCodes.TURN_NOT_FOUND, `invalid turn reference ${JSON.stringify(ref)}`);
    }
    const where = options.sessionId === undefined ? `under ${this.home}` : `in session ${options.sessionId}`;
    const turns =
      ref === LATEST
        ? await this.#turnsForChoice(options, `which turn is the latest ${where}`)
        : await this.#turnsForChoice(options, `which turn ${JSON.stringify(ref)} names`, (d) => d.name.startsWith(ref));
    if (ref === LATEST) {
      const committed = turns.filter((t): t is TurnManifest & { committedAt: string } => t.committedAt !== null);
      committed.sort((a, b) => compareTimes(a.committedAt, b.committedAt) || compareTimes(a.startedAt, b.startedAt));
      const latest = committed.at(-1);
      if (!latest) throw new BrokerError(ErrorCodes.TURN_NOT_FOUND, `no committed turn ${where}`);
      return this.#found(latest);
    }
    const exact = turns.filter((t) => t.id === ref);
    const matches = exact.length > 0 ? exact : turns.filter((t) => t.id.startsWith(ref));
    if (matches.length === 1 && matches[0]) return this.#found(matches[0]);
    if (matches.length === 0) {
      throw new BrokerError(ErrorCodes.TURN_NOT_FOUND, `no turn matches ${JSON.stringify(ref)} ${where}`, { details: { ref } });
    }
    const candidates = matches.map((t) => ({ id: t.id, sessionId: t.sessionId, message: t.message }));
    const lines = candidates.slice(0, AMBIGUOUS_SHOWN).map((c) => `  ${c.id}  (session ${printable(c.sessionId)})${c.message === null ? '' : `  ${printable(firstLine(c.message))}`}`);
    if (candidates.length > AMBIGUOUS_SHOWN) lines.push(`  … and ${candidates.length - AMBIGUOUS_SHOWN} more: give more of the id`);
    const listed = lines.join('\n');
    throw new BrokerError(ErrorCodes.TURN_NOT_FOUND, `turn reference ${JSON.stringify(ref)} is ambiguous; it matches:\n${listed}`, {
      details: { ref, candidates },
    });
  }

  /**
   * The most recently committed 'restore' turn (of one session, or of all): restoring
   * it undoes the last restore (`backups restore --undo-last`). Doing that twice redoes
   * it: the undo is itself a restore with its own rescue turn.
   */
  async lastRestore(options: { sessionId?: string } = {}): Promise<FoundTurn> {
    const restores = (await this.#turnsForChoice(options, 'which restore was the last')).filter(
      (t): t is TurnManifest & { committedAt: string } => t.kind === 'restore' && t.committedAt !== null,
    );
    restores.sort((a, b) => compareTimes(a.committedAt, b.committedAt) || compareTimes(a.startedAt, b.startedAt));
    const last = restores.at(-1);
    if (!last) {
      const where = options.sessionId === undefined ? `under ${this.home}` : `in session ${options.sessionId}`;
      throw new BrokerError(ErrorCodes.TURN_NOT_FOUND, `no restore to undo ${where}`);
    }
    return this.#found(last);
  }

  /**
   * What `backups restore --to REF` undoes: the turn REF names and every later turn of
   * the same session, newest first. Restore turns are left out: a turn's rewind compares
   * each path with its state before that turn, so paths a restore already put back are
   * simply found unchanged, and a restore's rescue turn is how a rewind itself is undone.
   */
  async rewindPlan(ref: string, options: { sessionId?: string } = {}): Promise<RewindPlan> {
    const { store, manifest: target } = await this.findTurn(ref, options);
    // Turn ids begin with their start time: a damaged one named after the target may be one to undo.
    const turns = await this.#turnsForChoice({ sessionId: target.sessionId }, `what rewinding to ${target.id} undoes`, (d) => d.name > target.id);
    const from = turns.findIndex((t) => t.id === target.id);
    const later = turns.slice(from === -1 ? turns.length : from + 1).filter((t) => t.kind === 'turn');
    return { store, target, turns: [...later.reverse(), target] };
  }

  async #found(manifest: TurnManifest): Promise<FoundTurn> {
    return { store: await this.session(manifest.sessionId), manifest };
  }
}
