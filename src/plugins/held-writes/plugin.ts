import { Stage, type Broker, type BrokerPlugin, type Outcome } from '../../core/index.js';
import { heldWritableFiles, type HeldFile } from './held-files.js';

export const PLUGIN_NAME = 'held-writes';

export interface HeldWritesOptions {
  /** The files the session's processes can still write (default: read from /proc). */
  findHeld?: (sessionId: string) => HeldFile[];
  /** Paths remembered as opened for writing through the broker (the oldest are forgotten past it). */
  maxRemembered?: number;
}

const DEFAULT_REMEMBERED = 65_536;

/**
 * A file opened for writing in one turn and still held in the next is written there
 * without a question: the broker is asked before an open, never before a write(2) (the
 * preload library, the kernel sandbox and every protocol client alike), so it was backed
 * up once, in the turn that opened it, and undoing a later turn left that turn's writes.
 * So when a turn commits, every file the session's processes can still write (held open
 * for writing, or mapped shared and writable; see heldWritableFiles) that the pipeline
 * let them open for writing is backed up into the next turn, before the commit returns
 * and before any other change: undoing the next turn brings back what the file held when
 * it began. A file is recorded in each turn it is held for writing in, as an open for
 * writing always is in its own turn, written or not. Files a process opened without the
 * broker (what its owner redirected it to) are not the broker's to keep.
 *
 * This costs nothing on the write path; the scan of /proc runs once per commit of a session
 * that opened anything for writing (about 30 µs per process on the machine). A turn is
 * opened only when something is held. An owner about to commit the last turn calls
 * `stop`, so none opens after it.
 */
export class HeldWritesPlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = PLUGIN_NAME;
  readonly name = PLUGIN_NAME;
  readonly #findHeld: (sessionId: string) => HeldFile[];
  readonly #maxRemembered: number;
  /** Resolved paths opened for writing through the broker, oldest first. */
  readonly #opened = new Set<string>();
  #stopped = false;

  constructor(options: HeldWritesOptions = {}) {
    this.#findHeld = options.findHeld ?? ((sessionId) => heldWritableFiles(sessionId));
    this.#maxRemembered = options.maxRemembered ?? DEFAULT_REMEMBERED;
  }

  apply(broker: Broker): void {
    broker.hooks.requestDone.tap({ name: this.name, stage: Stage.LATE }, (outcome) => this.#remember(outcome));
    broker.hooks.turnCommitted.tapPromise({ name: this.name, stage: Stage.LAST }, async (turn) => {
      if (this.#stopped || this.#opened.size === 0) return;
      const started = performance.now();
      const held = this.#findHeld(broker.sessionId).filter((file) => this.#opened.has(file.path));
      if (held.length === 0) return;
      const log = broker.log.child({ phase: 'held-writes', committed: turn.id });
      log.info({ files: held.length, scanMs: Math.round((performance.now() - started) * 1000) / 1000 }, 'backing up files still held for writing into the next turn');
      // Through the backup's own command, not a request: the commit holds the broker's slot
      // for changes until it returns, and it returns once these backups are made, so the
      // owner hears of the commit only when the next turn holds them.
      for (const file of held) {
        const answer = await broker.control('ModifyBackup', { targetPath: file.path });
        if (!answer.ok) log.warn({ path: file.path, pid: file.pid, error: answer.error }, 'a file still held for writing could not be backed up into the next turn');
      }
    });
  }

  /** The next commit is the last: no turn is opened after it. */
  stop(): void {
    this.#stopped = true;
  }

  #remember(outcome: Outcome): void {
    if (!outcome.ok || !outcome.request) return;
    const { operation } = outcome.request;
    if (operation === 'open') {
      const target = outcome.targets[0];
      if (target && target.access !== 'read') this.#add(target.resolved);
    } else if (operation === 'rename') {
      // A held file moved through the broker is still held, under its new name.
      const from = outcome.targets.find((t) => t.role === 'from')?.resolved;
      const to = outcome.targets.find((t) => t.role === 'to')?.resolved;
      if (from && to && this.#opened.has(from)) this.#add(to);
    }
  }

  #add(path: string): void {
    this.#opened.delete(path);
    this.#opened.add(path);
    if (this.#opened.size > this.#maxRemembered) {
      const oldest = this.#opened.values().next().value;
      if (oldest !== undefined) this.#opened.delete(oldest);
    }
  }
}
