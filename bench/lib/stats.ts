/** Latency summary of one measured case; latencies in microseconds. */
export interface LatencySummary {
  n: number;
  minUs: number;
  meanUs: number;
  p50Us: number;
  p90Us: number;
  p99Us: number;
  maxUs: number;
}

/**
 * The value at quantile `q` (0..1) of an ascending array, nearest-rank (no
 * interpolation: every reported value is one that was actually observed).
 */
export function quantileSorted(sorted: ArrayLike<number>, q: number): number {
  const n = sorted.length;
  if (n === 0) return Number.NaN;
  const rank = Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1));
  return sorted[rank] as number;
}

/** The median of an ascending array; with an even count the mean of the middle two (a run budget may leave two). */
export function medianSorted(sorted: ArrayLike<number>): number {
  const n = sorted.length;
  if (n === 0) return Number.NaN;
  const upper = sorted[n >> 1] as number;
  return n % 2 === 1 ? upper : ((sorted[(n >> 1) - 1] as number) + upper) / 2;
}

/** The median of any values (see medianSorted). */
export function median(values: readonly number[]): number {
  return medianSorted(Float64Array.from(values).sort());
}

/** Summarise latencies given in nanoseconds (only the first `count` entries are used). */
export function summarizeNs(samplesNs: Float64Array, count = samplesNs.length): LatencySummary {
  const sorted = Float64Array.from(samplesNs.subarray(0, count)).sort();
  let total = 0;
  for (const value of sorted) total += value;
  const us = (ns: number) => ns / 1000;
  return {
    n: count,
    minUs: us(quantileSorted(sorted, 0)),
    meanUs: us(count === 0 ? Number.NaN : total / count),
    p50Us: us(quantileSorted(sorted, 0.5)),
    p90Us: us(quantileSorted(sorted, 0.9)),
    p99Us: us(quantileSorted(sorted, 0.99)),
    maxUs: us(count === 0 ? Number.NaN : (sorted[count - 1] as number)),
  };
}

/** Requests per second from a count and an elapsed time in nanoseconds. */
export function ratePerSecond(count: number, elapsedNs: bigint | number): number {
  const ns = Number(elapsedNs);
  return ns > 0 ? (count * 1e9) / ns : Number.NaN;
}

/**
 * Split samples (in the order they were taken) into `buckets` consecutive slices and
 * return the p50 of each, in µs: shows whether a cost grows as a run goes on.
 */
export function p50ByBucket(samplesNs: Float64Array, buckets: number, count = samplesNs.length): Array<{ from: number; to: number; p50Us: number }> {
  const out: Array<{ from: number; to: number; p50Us: number }> = [];
  for (let b = 0; b < buckets; b += 1) {
    const from = Math.floor((b * count) / buckets);
    const to = Math.floor(((b + 1) * count) / buckets);
    if (to <= from) continue;
    const slice = Float64Array.from(samplesNs.subarray(from, to)).sort();
    out.push({ from, to, p50Us: quantileSorted(slice, 0.5) / 1000 });
  }
  return out;
}
