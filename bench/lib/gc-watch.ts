import { PerformanceObserver, constants, type PerformanceEntry } from 'node:perf_hooks';
import v8 from 'node:v8';

export interface GcKind {
  kind: string;
  count: number;
  totalMs: number;
  maxMs: number;
  /** Why V8 says it collected, by the callback flags (`forced`, `all external memory`, …; `none` for an ordinary one). */
  flags: Record<string, number>;
}

export interface GcSummary {
  kinds: GcKind[];
  totalMs: number;
  /** V8 heap after the run: used, total, and memory held outside it (Buffers' backing stores), MiB. */
  heapUsedMiB: number;
  heapTotalMiB: number;
  externalMiB: number;
  /** What the run added to the used heap and to external memory, MiB (after − before). */
  heapGrowthMiB: number;
  externalGrowthMiB: number;
}

const KIND_NAMES = new Map<number, string>([
  [constants.NODE_PERFORMANCE_GC_MINOR, 'minor (scavenge)'],
  [constants.NODE_PERFORMANCE_GC_MAJOR, 'major (mark-compact)'],
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL, 'incremental marking'],
  [constants.NODE_PERFORMANCE_GC_WEAKCB, 'weak callbacks'],
]);

const FLAG_NAMES: Array<[number, string]> = [
  [constants.NODE_PERFORMANCE_GC_FLAGS_CONSTRUCT_RETAINED, 'construct retained'],
  [constants.NODE_PERFORMANCE_GC_FLAGS_FORCED, 'forced'],
  [constants.NODE_PERFORMANCE_GC_FLAGS_SYNCHRONOUS_PHANTOM_PROCESSING, 'synchronous phantom'],
  [constants.NODE_PERFORMANCE_GC_FLAGS_ALL_AVAILABLE_GARBAGE, 'all available garbage'],
  [constants.NODE_PERFORMANCE_GC_FLAGS_ALL_EXTERNAL_MEMORY, 'all external memory'],
  [constants.NODE_PERFORMANCE_GC_FLAGS_SCHEDULE_IDLE, 'schedule idle'],
];

function flagText(flags: number): string {
  const names = FLAG_NAMES.filter(([bit]) => (flags & bit) !== 0).map(([, name]) => name);
  return names.length > 0 ? names.join('+') : 'none';
}

const MiB = 1024 * 1024;

/** Every garbage collection of this process while `work` runs, by kind, and the heap around it. */
export async function watchGc<T>(work: () => Promise<T>): Promise<{ result: T; gc: GcSummary }> {
  const byKind = new Map<string, GcKind>();
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries() as Array<PerformanceEntry & { detail?: { kind?: number; flags?: number } }>) {
      const detail = entry.detail;
      const kind = KIND_NAMES.get(detail?.kind ?? -1) ?? `kind ${String(detail?.kind)}`;
      const row = byKind.get(kind) ?? { kind, count: 0, totalMs: 0, maxMs: 0, flags: {} };
      const why = flagText(detail?.flags ?? 0);
      row.flags[why] = (row.flags[why] ?? 0) + 1;
      row.count += 1;
      row.totalMs += entry.duration;
      row.maxMs = Math.max(row.maxMs, entry.duration);
      byKind.set(kind, row);
    }
  });
  const before = process.memoryUsage();
  observer.observe({ entryTypes: ['gc'] });
  let result: T;
  try {
    result = await work();
  } finally {
    // Entries are delivered asynchronously: let the last ones arrive.
    await new Promise((resolve) => setTimeout(resolve, 50));
    observer.disconnect();
  }
  const after = process.memoryUsage();
  const heap = v8.getHeapStatistics();
  const kinds = [...byKind.values()].sort((a, b) => b.totalMs - a.totalMs);
  return {
    result,
    gc: {
      kinds,
      totalMs: kinds.reduce((sum, k) => sum + k.totalMs, 0),
      heapUsedMiB: heap.used_heap_size / MiB,
      heapTotalMiB: heap.total_heap_size / MiB,
      externalMiB: after.external / MiB,
      heapGrowthMiB: (after.heapUsed - before.heapUsed) / MiB,
      externalGrowthMiB: (after.external - before.external) / MiB,
    },
  };
}
