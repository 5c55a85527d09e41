import net from 'node:net';

const NEWLINE = 0x0a;

/**
 * A closed-loop workload shared by one or more connections: each connection takes the
 * next request index, sends it, waits for its one-line answer, records the latency at
 * that index and takes the next. Requests are pre-encoded so the measured loop
 * allocates nothing of its own beyond the timestamps.
 */
export interface Workload {
  /** Pre-encoded request lines (each ending in `\n`); request `i` sends `requests[i % length]`. */
  readonly requests: readonly Buffer[];
  /** Requests to send in total. */
  readonly total: number;
  /** Every answer must start with these bytes (e.g. `SANDBOX\n`, `{"ok":true`). */
  readonly expect: Buffer;
  /** Latency of request `i` in ns, when recorded. */
  readonly samples: Float64Array | undefined;
  next: number;
  answered: number;
  mismatches: number;
  firstMismatch: string | undefined;
}

export function workload(requests: readonly Buffer[], total: number, expect: string | Buffer, record: boolean): Workload {
  if (requests.length === 0) throw new Error('a workload needs at least one request');
  return {
    requests,
    total,
    expect: typeof expect === 'string' ? Buffer.from(expect) : expect,
    samples: record ? new Float64Array(total) : undefined,
    next: 0,
    answered: 0,
    mismatches: 0,
    firstMismatch: undefined,
  };
}

/**
 * One persistent connection to a line server with at most one request in flight
 * (send a line, wait for its answer): exactly how the sandbox's clients talk.
 */
export class LineClient {
  readonly #socket: net.Socket;
  #work: Workload | undefined;
  #index = -1;
  #sentAt = 0n;
  /** Bytes of an answer split across chunks (rare: answers are tiny). */
  #partial: Buffer | undefined;
  #done: (() => void) | undefined;
  #fail: ((error: Error) => void) | undefined;

  private constructor(socket: net.Socket) {
    this.#socket = socket;
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('error', (error) => this.#fail?.(error));
    socket.on('close', () => this.#fail?.(new Error(`connection closed with request ${this.#index} unanswered`)));
  }

  static connect(socketPath: string): Promise<LineClient> {
    return new Promise((resolve, reject) => {
      const socket = net.createConnection(socketPath);
      socket.once('error', reject);
      socket.once('connect', () => {
        socket.off('error', reject);
        resolve(new LineClient(socket));
      });
    });
  }

  /** Take requests from `work` until it is exhausted. */
  run(work: Workload): Promise<void> {
    if (this.#work) throw new Error('this client is already running a workload');
    return new Promise<void>((resolve, reject) => {
      this.#work = work;
      this.#done = () => {
        this.#work = undefined;
        this.#done = undefined;
        this.#fail = undefined;
        resolve();
      };
      this.#fail = (error) => {
        this.#work = undefined;
        this.#done = undefined;
        this.#fail = undefined;
        reject(error);
      };
      this.#sendNext(work);
    });
  }

  close(): void {
    this.#fail = undefined;
    this.#socket.destroy();
  }

  #sendNext(work: Workload): void {
    const index = work.next;
    if (index >= work.total) {
      this.#index = -1;
      this.#done?.();
      return;
    }
    work.next = index + 1;
    this.#index = index;
    const request = work.requests[index % work.requests.length] as Buffer;
    this.#sentAt = process.hrtime.bigint();
    this.#socket.write(request);
  }

  #onData(chunk: Buffer): void {
    const now = process.hrtime.bigint();
    const work = this.#work;
    if (!work || this.#index < 0) return;
    const newline = chunk.indexOf(NEWLINE);
    if (newline === -1) {
      this.#partial = this.#partial ? Buffer.concat([this.#partial, chunk]) : chunk;
      return;
    }
    let answer = chunk;
    if (this.#partial) {
      answer = Buffer.concat([this.#partial, chunk]);
      this.#partial = undefined;
    }
    if (work.samples) work.samples[this.#index] = Number(now - this.#sentAt);
    work.answered += 1;
    if (answer.indexOf(NEWLINE) !== answer.length - 1) {
      this.#fail?.(new Error(`more than one answer line for one request: ${JSON.stringify(answer.toString('utf8', 0, 300))}`));
      return;
    }
    const { expect } = work;
    if (answer.length < expect.length || answer.compare(expect, 0, expect.length, 0, expect.length) !== 0) {
      work.mismatches += 1;
      work.firstMismatch ??= answer.toString('utf8', 0, Math.min(answer.length, 300));
    }
    this.#sendNext(work);
  }
}

export interface RunResult {
  elapsedNs: bigint;
  work: Workload;
}

/** Run `work` over the given connections at once; elapsed wall time from first send to last answer. */
export async function runWorkload(clients: readonly LineClient[], work: Workload): Promise<RunResult> {
  const started = process.hrtime.bigint();
  await Promise.all(clients.map((client) => client.run(work)));
  return { elapsedNs: process.hrtime.bigint() - started, work };
}

export async function connectMany(socketPath: string, count: number): Promise<LineClient[]> {
  const clients: LineClient[] = [];
  for (let i = 0; i < count; i += 1) clients.push(await LineClient.connect(socketPath));
  return clients;
}
