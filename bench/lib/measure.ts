import { connectMany, runWorkload, workload, type LineClient } from './line-client.js';
import { processCpuMs } from './proc-cpu.js';
import { p50ByBucket, ratePerSecond, summarizeNs, type LatencySummary } from './stats.js';
import { formatMicros, formatNumber } from './table.js';

export type SocketServerKind = 'broker' | 'echo' | 'core';

/** One benchmark case: what to send, what every answer must start with, and how to run it. */
export interface CaseSpec {
  id: string;
  label: string;
  /** The standard `serve`, the echo server, or the product's server and core deciding at once (core-server.ts). */
  server: SocketServerKind;
  expect: string;
  /** Requests for one run: `tag` tells runs apart when each request must be new (mkdir, first touch). */
  requests(tag: string, count: number): Buffer[];
  /** Run only sequentially (one connection). */
  sequentialOnly?: boolean;
  /** Measured count, when not `n`. */
  count?: number;
  /** Warm up with at least this many requests (to cover a whole pool). */
  minWarmup?: number;
  /** Report p50 per tenth of the run (for costs that grow with the turn). */
  growth?: boolean;
  /** Before the measured run (after the warm-up). */
  beforeMeasure?(): Promise<void>;
  /** After the measured run: check the broker really did the work. */
  afterMeasure?(): Promise<void>;
}

/** One measured run of a case at one connection count. */
export interface CaseResult {
  id: string;
  label: string;
  server: SocketServerKind;
  connections: number;
  latency: LatencySummary;
  reqPerSec: number;
  elapsedMs: number;
  /** CPU time (all threads) the server process used per measured request, in µs. */
  serverCpuUs?: number;
  /** p50 by consecutive slices of the run, when the case asks for it. */
  growth?: Array<{ from: number; to: number; p50Us: number }>;
}

export interface MeasureOptions {
  /** Measured requests of the sequential (one-connection) run. */
  n: number;
  /** Measured requests of each concurrent run, spread over its connections. */
  nConcurrent: number;
  /** Unmeasured requests before the first run (later runs: 100 per connection, at most this). */
  warmup: number;
  /** Connection counts to run, 1 being the sequential run. */
  concurrency: number[];
  log: (line: string) => void;
}

/**
 * Run one case against a line server at each connection count: warm up, measure the
 * latency of every request and the wall-clock rate, and charge the server's CPU time.
 * Any answer that does not start with the expected bytes aborts the case.
 */
export async function measure(
  socketPath: string,
  serverPid: number,
  spec: CaseSpec,
  options: MeasureOptions,
): Promise<CaseResult[]> {
  const results: CaseResult[] = [];
  const connectionCounts = spec.sequentialOnly ? [1] : options.concurrency;
  for (const [runIndex, connections] of connectionCounts.entries()) {
    const total = spec.count ?? (connections === 1 ? options.n : options.nConcurrent);
    const clients: LineClient[] = await connectMany(socketPath, connections);
    try {
      const warmCount = runIndex === 0 ? Math.max(options.warmup, spec.minWarmup ?? 0) : Math.min(options.warmup, 100 * connections);
      if (warmCount > 0) {
        const warmRequests = spec.requests(`warm-k${connections}`, warmCount);
        const warm = await runWorkload(clients, workload(warmRequests, Math.min(warmCount, spec.sequentialOnly ? warmRequests.length : warmCount), spec.expect, false));
        check(spec, warm.work);
      }
      if (runIndex === 0) await spec.beforeMeasure?.();
      const requests = spec.requests(`k${connections}`, total);
      const cpuBefore = processCpuMs(serverPid);
      const run = await runWorkload(clients, workload(requests, total, spec.expect, true));
      const cpuAfter = processCpuMs(serverPid);
      check(spec, run.work);
      if (runIndex === 0) await spec.afterMeasure?.();
      const samples = run.work.samples as Float64Array;
      const result: CaseResult = {
        id: spec.id,
        label: spec.label,
        server: spec.server,
        connections,
        latency: summarizeNs(samples),
        reqPerSec: ratePerSecond(total, run.elapsedNs),
        elapsedMs: Number(run.elapsedNs) / 1e6,
        ...(cpuBefore !== undefined && cpuAfter !== undefined ? { serverCpuUs: ((cpuAfter - cpuBefore) * 1000) / total } : {}),
        ...(spec.growth ? { growth: p50ByBucket(samples, 10) } : {}),
      };
      results.push(result);
      options.log(
        `  ${spec.id} ×${connections}: p50 ${formatMicros(result.latency.p50Us)} µs, ${formatNumber(result.reqPerSec)} req/s (${formatNumber(result.elapsedMs)} ms)`,
      );
    } finally {
      for (const client of clients) client.close();
    }
  }
  return results;
}

function check(spec: CaseSpec, work: { mismatches: number; firstMismatch: string | undefined; answered: number }): void {
  if (work.mismatches > 0) {
    throw new Error(`${spec.id}: ${work.mismatches}/${work.answered} answers did not start with ${JSON.stringify(spec.expect)}; first: ${JSON.stringify(work.firstMismatch)}`);
  }
}
