import type { KernelAnswer, KernelRequest } from '../../src/sandbox/index.js';
import { quantileSorted } from './stats.js';

const EPERM = 1;
const EACCES = 13;

export type KernelHandler = (request: KernelRequest) => Promise<KernelAnswer>;

/** What the broker saw of one run: every supervisor request, timed inside the handler. */
export interface RequestSnapshot {
  requests: number;
  /** Requests per operation (`open`, `rename`, …), most frequent first. */
  byOp: Record<string, number>;
  /** Answers refusing the call (EACCES, EPERM) or a handler that threw. */
  refused: number;
  /** First few refusals, `op path → errno`, for diagnosis. */
  refusedExamples: string[];
  /** Answers by errno (0: allowed; e.g. 2: ENOENT, which git's object writes meet on purpose). */
  byErrno: Record<string, number>;
  /** Handler time (request decoded → answer ready), µs. */
  meanUs: number;
  p50Us: number;
  p99Us: number;
  maxUs: number;
  /** Sum of handler times, ms (more than busyMs when requests overlap). */
  totalMs: number;
  /** Wall time with at least one request in the handler, ms. */
  busyMs: number;
  /** Most requests in the handler at once. */
  maxInFlight: number;
  /** Mean handler µs per operation. */
  meanUsByOp: Record<string, number>;
}

/**
 * Wraps a kernel request handler (the `kernelBridge`) to count and time what passes
 * through it. Costs two `hrtime` reads and a few map updates per request.
 */
export class RequestCounter {
  #durations: number[] = [];
  #byOp = new Map<string, { count: number; ns: number }>();
  #refused = 0;
  #refusedExamples: string[] = [];
  #byErrno = new Map<number, number>();
  #inFlight = 0;
  #maxInFlight = 0;
  #busySince = 0n;
  #busyNs = 0n;

  wrap(handler: KernelHandler): KernelHandler {
    return async (request) => {
      const started = process.hrtime.bigint();
      if (this.#inFlight === 0) this.#busySince = started;
      this.#inFlight += 1;
      if (this.#inFlight > this.#maxInFlight) this.#maxInFlight = this.#inFlight;
      let answer: KernelAnswer | undefined;
      try {
        answer = await handler(request);
        return answer;
      } finally {
        const ended = process.hrtime.bigint();
        this.#inFlight -= 1;
        if (this.#inFlight === 0) this.#busyNs += ended - this.#busySince;
        const ns = Number(ended - started);
        this.#durations.push(ns);
        const entry = this.#byOp.get(request.op) ?? { count: 0, ns: 0 };
        entry.count += 1;
        entry.ns += ns;
        this.#byOp.set(request.op, entry);
        const errno = answer?.errno ?? -1;
        this.#byErrno.set(errno, (this.#byErrno.get(errno) ?? 0) + 1);
        if (errno === -1 || errno === EACCES || errno === EPERM) {
          this.#refused += 1;
          if (this.#refusedExamples.length < 5) {
            this.#refusedExamples.push(`${request.op} ${request.path}${request.to ? ` → ${request.to}` : ''}: errno ${answer?.errno ?? 'threw'}`);
          }
        }
      }
    };
  }

  /** What was counted since the last take, and start counting afresh. */
  take(): RequestSnapshot {
    const sorted = Float64Array.from(this.#durations).sort();
    let total = 0;
    for (const ns of sorted) total += ns;
    const byOpEntries = [...this.#byOp.entries()].sort((a, b) => b[1].count - a[1].count);
    const snapshot: RequestSnapshot = {
      requests: sorted.length,
      byOp: Object.fromEntries(byOpEntries.map(([op, e]) => [op, e.count])),
      refused: this.#refused,
      refusedExamples: this.#refusedExamples,
      byErrno: Object.fromEntries([...this.#byErrno.entries()].sort((a, b) => a[0] - b[0]).map(([errno, count]) => [String(errno), count])),
      meanUs: sorted.length ? total / sorted.length / 1000 : 0,
      p50Us: sorted.length ? quantileSorted(sorted, 0.5) / 1000 : 0,
      p99Us: sorted.length ? quantileSorted(sorted, 0.99) / 1000 : 0,
      maxUs: sorted.length ? (sorted[sorted.length - 1] as number) / 1000 : 0,
      totalMs: total / 1e6,
      busyMs: Number(this.#busyNs) / 1e6,
      maxInFlight: this.#maxInFlight,
      meanUsByOp: Object.fromEntries(byOpEntries.map(([op, e]) => [op, e.ns / e.count / 1000])),
    };
    this.#durations = [];
    this.#byOp = new Map();
    this.#refused = 0;
    this.#refusedExamples = [];
    this.#byErrno = new Map();
    this.#maxInFlight = 0;
    this.#busyNs = 0n;
    return snapshot;
  }
}
