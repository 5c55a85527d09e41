/**
 * The whole `npm run bench` must finish in a fixed time on these 2-core machines, whose
 * disks differ by an order of magnitude from one to the next (an fsync 0.2 ms on one,
 * 2.7 ms on another): the heavy workloads, seconds per brokered run, share what is left
 * of the budget, and one stops adding measured rounds once the next would not fit in its
 * share. On a quick machine nothing is trimmed; on a slow one a heavy workload keeps at
 * least `minRuns` measured runs per runner, and the report says which were trimmed.
 */
export class RunBudget {
  readonly #endMs: number;
  readonly #reserveMs: number;

  /** `budgetS` from `startMs`; `reserveS` of it kept for what runs after the heavy workloads (the microbenchmarks). */
  constructor(startMs: number, budgetS: number, reserveS: number) {
    this.#endMs = startMs + budgetS * 1000;
    this.#reserveMs = reserveS * 1000;
  }

  /** When the next heavy workload should end, `left` heavy workloads to go (it among them): an equal share of the time left. */
  deadlineFor(left: number, nowMs: number): number {
    const share = (this.#endMs - this.#reserveMs - nowMs) / Math.max(1, left);
    return nowMs + Math.max(0, share);
  }
}

/** How a workload's measured rounds are bounded: none by default. */
export interface RoundLimit {
  deadlineMs: number;
  /** Measured rounds always run, whatever the deadline. */
  minRuns: number;
}

/**
 * Whether to start measured round `done + 1`: always up to `minRuns`, then only while the
 * round fits before the deadline (each round is one run of every runner).
 */
export function startNextRound(done: number, planned: number, nowMs: number, lastRoundMs: number, limit?: RoundLimit): boolean {
  if (done >= planned) return false;
  if (!limit || done < limit.minRuns) return true;
  // The next round is expected to take as long as the last one.
  return nowMs + lastRoundMs <= limit.deadlineMs;
}
