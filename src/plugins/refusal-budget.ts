import { z } from 'zod';

/** What a bucket needs of a refusal to count it. */
export interface CountedRefusal {
  origin: string;
  decidedBy: string;
  operation?: string;
  syscall?: { name: string };
  peer?: { pid: number };
}

/**
 * How many refusals are recorded one by one. A refused line costs its sender almost
 * nothing (a malformed line, a control command), and so does a refused syscall, so a
 * flood of them would grow the audit log as fast as they come. Each source (the kernel
 * sandbox; the socket) may have `burst` records at once and `perSecond` more each second
 * after; past that a refusal is only counted, and within `summaryMs` one record says how
 * many there were, of which operations, from which peers. A flood from one source
 * therefore never hides the other's refusals, and no refusal goes unmentioned.
 */
export const refusalBudgetSchema = z.strictObject({
  burst: z.number().int().min(1).default(1000),
  perSecond: z.number().min(0).default(20),
  summaryMs: z.number().int().min(1).default(10_000),
});
export type RefusalBudgetOptions = z.input<typeof refusalBudgetSchema>;

/** Peers named in one summary at most. */
const SUMMARY_PEERS = 16;

export interface Counted {
  count: number;
  since: string;
  operations: Record<string, number>;
  peers: Set<number>;
  origin: string;
  decidedBy: string;
}

/** One source's budget of refusal records: a token bucket, and what it counted instead. */
export class RefusalBucket {
  #tokens: number;
  #at = performance.now();
  #counted: Counted | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(
    readonly options: z.infer<typeof refusalBudgetSchema>,
    readonly flush: (counted: Counted) => void,
  ) {
    this.#tokens = options.burst;
  }

  /** Whether this refusal gets its own record; if not, it is counted for the next summary. */
  take(report: CountedRefusal): boolean {
    const now = performance.now();
    this.#tokens = Math.min(this.options.burst, this.#tokens + ((now - this.#at) / 1000) * this.options.perSecond);
    this.#at = now;
    if (this.#tokens >= 1) {
      this.#tokens -= 1;
      return true;
    }
    const counted = (this.#counted ??= { count: 0, since: new Date().toISOString(), operations: {}, peers: new Set(), origin: report.origin, decidedBy: report.decidedBy });
    counted.count += 1;
    const operation = report.syscall?.name ?? report.operation ?? 'syscall';
    counted.operations[operation] = (counted.operations[operation] ?? 0) + 1;
    if (report.peer && counted.peers.size < SUMMARY_PEERS) counted.peers.add(report.peer.pid);
    if (!this.#timer) {
      this.#timer = setTimeout(() => this.settle(), this.options.summaryMs);
      this.#timer.unref();
    }
    return false;
  }

  /** Records what was counted, if anything. */
  settle(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const counted = this.#counted;
    this.#counted = undefined;
    if (counted) this.flush(counted);
  }
}
