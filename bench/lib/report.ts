import type { ProfileEntry } from './cpu-profile.js';
import type { CaseResult } from './measure.js';
import { formatMicros, formatNumber, formatRatio, markdownTable, type Column } from './table.js';

/** The results as one markdown table, with each broker row's p50 over the echo p50 at the same connection count. */
export function resultsTable(results: readonly CaseResult[]): string {
  const echoP50 = new Map(results.filter((r) => r.server === 'echo').map((r) => [r.connections, r.latency.p50Us]));
  const columns: Array<Column<CaseResult>> = [
    { header: 'case', value: (r) => r.label },
    { header: 'conns', align: 'right', value: (r) => String(r.connections) },
    { header: 'n', align: 'right', value: (r) => formatNumber(r.latency.n) },
    { header: 'p50 µs', align: 'right', value: (r) => formatMicros(r.latency.p50Us) },
    { header: 'p90 µs', align: 'right', value: (r) => formatMicros(r.latency.p90Us) },
    { header: 'p99 µs', align: 'right', value: (r) => formatMicros(r.latency.p99Us) },
    { header: 'max µs', align: 'right', value: (r) => formatMicros(r.latency.maxUs) },
    { header: 'req/s', align: 'right', value: (r) => formatNumber(r.reqPerSec) },
    { header: 'server CPU µs/req', align: 'right', value: (r) => (r.serverCpuUs === undefined ? '–' : formatMicros(r.serverCpuUs)) },
    { header: 'p50 ÷ echo', align: 'right', value: (r) => formatRatio(r.latency.p50Us / (echoP50.get(r.connections) ?? Number.NaN)) },
  ];
  return markdownTable(columns, results);
}

export function growthTable(result: CaseResult): string {
  const rows = result.growth ?? [];
  return markdownTable(
    [
      { header: 'files already in the turn', value: (r: { from: number; to: number; p50Us: number }) => `${r.from}–${r.to - 1}` },
      { header: 'p50 µs', align: 'right', value: (r: { from: number; to: number; p50Us: number }) => formatMicros(r.p50Us) },
    ],
    rows,
  );
}

export function profileTable(title: string, entries: readonly ProfileEntry[]): string {
  return `${title}\n\n${markdownTable(
    [
      { header: 'what', value: (e: ProfileEntry) => (e.key.length > 90 ? `${e.key.slice(0, 89)}…` : e.key) },
      { header: 'ms', align: 'right', value: (e: ProfileEntry) => formatNumber(e.ms) },
      { header: 'share of busy', align: 'right', value: (e: ProfileEntry) => `${(e.share * 100).toFixed(1)}%` },
    ],
    entries,
  )}`;
}
