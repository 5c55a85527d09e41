import { describe, expect, it } from 'vitest';
import { RunBudget, startNextRound } from '../../bench/lib/budget.js';

describe('bench time budget', () => {
  it('gives each heavy workload an equal share of what is left after the reserve', () => {
    const budget = new RunBudget(0, 540, 90);
    // 40 s used by the light workloads, four heavy ones to go: (540 − 90 − 40) / 4 s each.
    expect(budget.deadlineFor(4, 40_000)).toBe(40_000 + 102_500);
    // A workload that used less leaves more for the next: at 100 s, three to go.
    expect(budget.deadlineFor(3, 100_000)).toBe(100_000 + (450_000 - 100_000) / 3);
    // Past the end, the deadline is now: only the minimum runs.
    expect(budget.deadlineFor(1, 600_000)).toBe(600_000);
  });

  it('runs every planned round without a limit, and the minimum whatever the deadline', () => {
    expect(startNextRound(2, 3, 1_000, 999_999)).toBe(true);
    expect(startNextRound(3, 3, 1_000, 0)).toBe(false);
    const past = { deadlineMs: 0, minRuns: 2 };
    expect(startNextRound(0, 3, 1_000, 50_000, past)).toBe(true);
    expect(startNextRound(1, 3, 1_000, 50_000, past)).toBe(true);
    expect(startNextRound(2, 3, 1_000, 50_000, past)).toBe(false);
  });

  it('after the minimum, starts a round only if one as long as the last ends by the deadline', () => {
    const limit = { deadlineMs: 100_000, minRuns: 2 };
    expect(startNextRound(2, 3, 60_000, 40_000, limit)).toBe(true);
    expect(startNextRound(2, 3, 60_001, 40_000, limit)).toBe(false);
    expect(startNextRound(2, 5, 10_000, 30_000, limit)).toBe(true);
  });
});
