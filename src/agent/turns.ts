import { ErrorCodes, type Broker, type Logger } from '../core/index.js';
import { normaliseMaxSizeMB } from '../backup/settings.js';
import { commitMessageFrom } from './commit-message.js';
import type { SessionConfig } from './config.js';
import type { BeginTurnOptions, EndTurnOptions, EndTurnResult, StoreUnavailablePolicy, TurnBackup, TurnInfo } from './types.js';

export interface TurnControllerOptions {
  broker: Broker;
  config: SessionConfig;
  log: Logger;
  storeUnavailable: StoreUnavailablePolicy;
  /** Resolves once the session's running calls are done (a commit waits for them). */
  idle: () => Promise<void>;
}

/**
 * The session's turns. Begin sends EnableModifyBackup through the broker's control hook
 * (backup is never left half open: when it cannot be enabled it is turned off for the
 * turn, or, with `deny-changes`, left on so changes to existing files are refused), end
 * commits with a message made from the user's message. One at a time.
 */
export class TurnController {
  readonly #broker: Broker;
  readonly #config: SessionConfig;
  readonly #log: Logger;
  readonly #storeUnavailable: StoreUnavailablePolicy;
  readonly #idle: () => Promise<void>;
  #turn: TurnInfo | undefined;
  #lastFailed: string | undefined;
  #serial: Promise<unknown> = Promise.resolve();

  constructor(options: TurnControllerOptions) {
    this.#broker = options.broker;
    this.#config = options.config;
    this.#log = options.log;
    this.#storeUnavailable = options.storeUnavailable;
    this.#idle = options.idle;
  }

  get current(): TurnInfo | undefined {
    return this.#turn ? structuredClone(this.#turn) : undefined;
  }

  begin(options: BeginTurnOptions): Promise<TurnInfo> {
    return this.#exclusively(async () => {
      if (this.#turn) {
        this.#log.warn({ phase: 'turn', turnId: this.#turn.turnId }, 'a new turn begins while one is open: committing the open one first');
        await this.#end({});
      }
      return this.#begin(options);
    });
  }

  /** The open turn, or a new one with an empty user message (calls outside any turn). */
  ensure(): Promise<TurnInfo> {
    if (this.#turn) return Promise.resolve(this.#turn);
    return this.#exclusively(async () => this.#turn ?? this.#begin({ userMessage: '' }));
  }

  end(options: EndTurnOptions = {}): Promise<EndTurnResult> {
    return this.#exclusively(() => this.#end(options));
  }

  async #begin(options: BeginTurnOptions): Promise<TurnInfo> {
    const turn = await this.#broker.beginTurn();
    const configured = this.#config.fileBackup;
    const wanted = {
      enabled: options.fileBackup?.enabled ?? configured.enabled,
      maxSizeMB: normaliseMaxSizeMB(options.fileBackup?.maxSizeMB ?? configured.maxSizeMB),
      oversize: configured.oversize,
    };
    const backup = await this.#enableBackup(wanted, turn.id);
    const info: TurnInfo = {
      turnId: turn.id,
      sessionId: this.#broker.sessionId,
      userMessage: options.userMessage,
      startedAt: turn.startedAt,
      backup,
      continued: turn.id === this.#lastFailed,
    };
    this.#turn = info;
    this.#log.info({ phase: 'turn', turnId: info.turnId, backup, continued: info.continued }, 'turn started');
    return structuredClone(info);
  }

  async #enableBackup(wanted: { enabled: boolean; maxSizeMB: number; oversize: 'deny' | 'skip' }, turnId: string): Promise<TurnBackup> {
    const settings = { fileBackupMaxSizeMB: wanted.maxSizeMB, oversize: wanted.oversize };
    if (!wanted.enabled) {
      await this.#disable(settings, turnId, 'file backup is disabled');
      return { ...wanted, enabled: false, reason: 'file backup is disabled' };
    }
    const answer = await this.#broker.control('EnableModifyBackup', { enabled: true, ...settings });
    if (answer.ok) {
      const maxSizeMB = typeof answer.fileBackupMaxSizeMB === 'number' ? answer.fileBackupMaxSizeMB : wanted.maxSizeMB;
      return { ...wanted, maxSizeMB, enabled: true };
    }
    const why = typeof answer.error === 'string' ? answer.error : 'EnableModifyBackup failed';
    if (this.#storeUnavailable === 'deny-changes') {
      const reason = `file backup cannot be enabled (${why}); changes to existing files are refused this turn`;
      this.#log.error({ phase: 'turn', turnId, error: why }, reason);
      return { ...wanted, enabled: false, reason, refusesChanges: true };
    }
    const reason = `file backup is off for this turn: it cannot be enabled (${why})`;
    await this.#disable(settings, turnId, reason);
    this.#log.warn({ phase: 'turn', turnId, error: why }, reason);
    return { ...wanted, enabled: false, reason };
  }

  async #disable(settings: Record<string, unknown>, turnId: string, reason: string): Promise<void> {
    const answer = await this.#broker.control('EnableModifyBackup', { enabled: false, ...settings });
    if (!answer.ok && answer.errorCode !== ErrorCodes.UNKNOWN_COMMAND) {
      // Still on and unusable: every change to an existing file is refused (closed, never half open).
      this.#log.error({ phase: 'turn', turnId, error: answer.error, reason }, 'file backup could not be turned off; changes to existing files are refused');
    }
  }

  async #end(options: EndTurnOptions): Promise<EndTurnResult> {
    const turn = this.#turn;
    const message = options.message ?? commitMessageFrom(turn?.userMessage ?? '');
    if (!turn) return { ok: false, files: 0, message, error: 'no turn is open' };
    await this.#idle();
    this.#turn = undefined;
    try {
      let answer = await this.#broker.control('CommitModifyBackup', { commitMsg: message });
      if (!answer.ok && answer.errorCode === ErrorCodes.UNKNOWN_COMMAND) {
        // No backup plugin: the broker's turn is still closed (audit and other taps see it).
        const committed = await this.#broker.commitTurn(message);
        answer = { ok: true, turnId: committed.id, files: 0, notices: committed.facts.notices };
      }
      if (!answer.ok) throw new Error(typeof answer.error === 'string' ? answer.error : 'CommitModifyBackup failed');
      this.#lastFailed = undefined;
      const files = typeof answer.files === 'number' ? answer.files : 0;
      const unsaved = strings(answer.unsaved);
      const notices = strings(answer.notices);
      const exempted = counts(answer.exempted);
      const turnId = typeof answer.turnId === 'string' ? answer.turnId : turn.turnId;
      this.#log.info({ phase: 'turn', turnId, files, unsaved: unsaved.length, exempted, commitMsg: message }, 'turn committed');
      return {
        ok: true,
        turnId,
        files,
        message,
        ...(unsaved.length > 0 ? { unsaved } : {}),
        ...(notices.length > 0 ? { notices } : {}),
        ...(Object.keys(exempted).length > 0 ? { exempted } : {}),
      };
    } catch (failure) {
      const error = failure instanceof Error ? failure.message : String(failure);
      this.#lastFailed = turn.turnId;
      this.#log.error({ phase: 'turn', turnId: turn.turnId, error }, 'the turn could not be committed; its backups stay in the store, and the next turn continues it');
      return { ok: false, turnId: turn.turnId, files: 0, message, error };
    }
  }

  #exclusively<T>(task: () => Promise<T>): Promise<T> {
    const run = this.#serial.then(task, task);
    this.#serial = run.catch(() => undefined);
    return run;
  }
}

/** The counts of a control answer's `{ name: count }` field (none when it is not one). */
function counts(value: unknown): Record<string, number> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return {};
  return Object.fromEntries(Object.entries(value).filter((entry): entry is [string, number] => Number.isSafeInteger(entry[1]) && entry[1] > 0));
}

/** The strings of a control answer's list field (none when it is not a list). */
function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : [];
}
