import { describe, expect, it } from 'vitest';
import { median, medianSorted } from '../../bench/lib/stats.js';

describe('bench median', () => {
  it('is the middle run of an odd count, the mean of the middle two of an even one', () => {
    expect(median([30, 10, 20])).toBe(20);
    expect(median([979, 4676])).toBe(2827.5);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([7])).toBe(7);
    expect(median([])).toBeNaN();
    // Already sorted, as the workload table has its runs: the same answer without sorting again.
    expect(medianSorted(Float64Array.from([1, 2, 3, 4]))).toBe(2.5);
  });
});
