import type { Socket } from 'node:net';

/** Why a connection is not read from; it reads again once no reason is left. */
export type PauseReason = 'unread-answers' | 'queued-lines' | 'closing';

export interface AnswerFlowOptions {
  /** Bytes of answers Node may hold for the client before the connection stops reading and answering. */
  maxUnsentBytes: number;
  /** How long the answers may stay over the bound before the connection is dropped. */
  graceMs: number;
  /** Called once when the grace runs out, with the bytes still unsent; the socket is destroyed after it. */
  onDrop: (unsentBytes: number) => void;
}

/**
 * The answers of one connection, kept bounded. Node holds whatever the kernel's socket
 * buffer cannot take, without limit: a client that writes requests and never reads the
 * answers would make the broker buffer them for ever. So once more than `maxUnsentBytes`
 * wait, the connection stops reading (the client's own writes then block in the kernel)
 * and produces no further answer (`ready` waits) until the client has read them back
 * under the bound; if it has not within `graceMs`, it is dropped. The other connections
 * are not held meanwhile: nothing of the broker waits on this one.
 */
export class AnswerFlow {
  readonly #socket: Socket;
  readonly #options: AnswerFlowOptions;
  readonly #paused = new Set<PauseReason>();
  #grace: NodeJS.Timeout | undefined;
  #waiting: Array<() => void> = [];

  constructor(socket: Socket, options: AnswerFlowOptions) {
    this.#socket = socket;
    this.#options = options;
    socket.on('drain', () => this.#check());
    socket.once('close', () => {
      clearTimeout(this.#grace);
      this.#grace = undefined;
      this.#release();
    });
  }

  /** Bytes of answers written that Node has not handed to the kernel yet. */
  get unsentBytes(): number {
    return this.#socket.writableLength;
  }

  /** Whether the answers are over the bound (the connection neither reads nor answers). */
  get stalled(): boolean {
    return this.#grace !== undefined;
  }

  /** Writes an answer; `sent` is called once it has left Node (or the socket is gone). */
  write(data: string | Buffer, sent: () => void): void {
    this.#socket.write(data, () => {
      sent();
      this.#check();
    });
    this.#check();
  }

  /** Settles once the next answer may be produced: the answers are under the bound, or the connection is gone. */
  ready(): Promise<void> {
    if (!this.stalled || this.#socket.destroyed) return Promise.resolve();
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  pause(reason: PauseReason): void {
    this.#paused.add(reason);
    this.#socket.pause();
  }

  resume(reason: PauseReason): void {
    if (!this.#paused.delete(reason) || this.#paused.size > 0 || this.#socket.destroyed) return;
    this.#socket.resume();
  }

  #check(): void {
    if (this.#socket.destroyed) return;
    const over = this.#socket.writableLength > this.#options.maxUnsentBytes;
    if (over && this.#grace === undefined) {
      this.pause('unread-answers');
      this.#grace = setTimeout(() => {
        this.#grace = undefined;
        this.#options.onDrop(this.#socket.writableLength);
        this.#socket.destroy();
      }, this.#options.graceMs);
      this.#grace.unref();
    } else if (!over && this.#grace !== undefined) {
      clearTimeout(this.#grace);
      this.#grace = undefined;
      this.resume('unread-answers');
      this.#release();
    }
  }

  #release(): void {
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const resolve of waiting) resolve();
  }
}
