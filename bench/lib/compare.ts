import { execFileSync } from 'node:child_process';
import { firstLine, type RunResult, type RunnerId, type RunnerSlot } from './runners.js';
import { median, medianSorted, quantileSorted } from './stats.js';
import { startNextRound, type RoundLimit } from './budget.js';
import type { Target, Workload } from './workloads.js';

/** One runner on one workload: its measured runs, or why it could not do the workload. */
export interface RunnerResult {
  runner: RunnerId;
  runsMs: number[];
  minMs: number;
  medianMs: number;
  maxMs: number;
  /** median ÷ native median. */
  ratio?: number;
  /** median − native median. */
  extraMs?: number;
  met?: boolean;
  /** Medians per run, brokered runners: broker requests and files backed up; srt: ms in wrapWithSandbox. */
  requests?: number;
  backups?: number;
  wrapMs?: number;
  error?: string;
}

export interface WorkloadResult {
  id: string;
  label: string;
  command: string;
  via: 'library' | 'cli';
  target?: Target;
  runners: RunnerResult[];
  /** Set when the time budget ended the measured rounds early (budget.ts). */
  trimmed?: { planned: number; done: number };
}


/** Why a run did not count: a non-zero exit (the last lines of stderr), or a failed check. */
function failure(result: RunResult): string | undefined {
  if (result.code === 0) return undefined;
  const lines = result.stderrTail.split('\n').map((line) => line.trim()).filter(Boolean);
  return `exit ${String(result.code)}: ${lines.slice(-2).join(' / ').slice(0, 240) || 'no stderr'}`;
}

/**
 * Run one workload on every runner: warm-ups (not recorded), then the measured runs with
 * the runners' order rotated each round so slow drifts (page cache, other load) hit all
 * alike. A runner that fails a run is dropped from the workload with the reason. With a
 * `limit`, measured rounds stop once the next would end after its deadline (budget.ts).
 */
export async function measureWorkload(
  workload: Workload,
  slots: readonly RunnerSlot[],
  log: (line: string) => void,
  limit?: RoundLimit,
): Promise<WorkloadResult> {
  const runs = new Map<RunnerId, RunResult[]>();
  const errors = new Map<RunnerId, string>();
  for (const slot of slots) {
    runs.set(slot.id, []);
    if ('unavailable' in slot) errors.set(slot.id, `unavailable: ${slot.unavailable}`);
  }
  let expectBytes: number | undefined;
  let measured = 0;
  let lastRoundMs = 0;
  for (let i = 0; i < workload.warmup + workload.runs; i += 1) {
    const warm = i < workload.warmup;
    if (!warm && !startNextRound(measured, workload.runs, Date.now(), lastRoundMs, limit)) break;
    const roundStarted = Date.now();
    const order = slots.map((_, k) => slots[(k + i) % slots.length] as RunnerSlot);
    for (const slot of order) {
      if (!('runner' in slot) || errors.has(slot.id)) continue;
      const tag = `${slot.id}-${i}`;
      const cwd = workload.prepare(tag);
      // Write back what earlier runs (and their backups) left dirty, so no run pays for another's.
      if (workload.heavy) execFileSync('sync');
      let result: RunResult;
      try {
        result = workload.via === 'cli' ? await slot.runner.cli(workload.command, cwd) : await slot.runner.run(workload.command, cwd);
        const failed = failure(result);
        if (failed) throw new Error(failed);
        if (workload.sameStdout) {
          expectBytes ??= result.stdoutBytes;
          if (result.stdoutBytes !== expectBytes) throw new Error(`printed ${result.stdoutBytes} bytes, another runner ${expectBytes}`);
        }
        workload.check?.(cwd);
      } catch (error) {
        const reason = firstLine(error);
        errors.set(slot.id, reason);
        log(`  ${slot.id} failed ${workload.id}: ${reason}`);
        continue;
      }
      if (!warm) runs.get(slot.id)?.push(result);
    }
    lastRoundMs = Date.now() - roundStarted;
    if (!warm) measured += 1;
  }
  const nativeRuns = runs.get('native') ?? [];
  const nativeMedian = nativeRuns.length > 0 && !errors.has('native') ? median(nativeRuns.map((r) => r.wallMs)) : undefined;
  const results: RunnerResult[] = slots.map((slot) => {
    const list = runs.get(slot.id) ?? [];
    const error = errors.get(slot.id);
    if (error !== undefined || list.length === 0) {
      return { runner: slot.id, runsMs: [], minMs: Number.NaN, medianMs: Number.NaN, maxMs: Number.NaN, error: error ?? 'no runs' };
    }
    const sorted = Float64Array.from(list.map((r) => r.wallMs)).sort();
    const result: RunnerResult = {
      runner: slot.id,
      runsMs: list.map((r) => r.wallMs),
      minMs: quantileSorted(sorted, 0),
      medianMs: medianSorted(sorted),
      maxMs: quantileSorted(sorted, 1),
    };
    const pick = (key: 'requests' | 'backups' | 'wrapMs') => {
      const values = list.map((r) => r[key]).filter((v): v is number => v !== undefined);
      return values.length > 0 ? median(values) : undefined;
    };
    for (const key of ['requests', 'backups', 'wrapMs'] as const) {
      const value = pick(key);
      if (value !== undefined) result[key] = value;
    }
    if (nativeMedian !== undefined && slot.id !== 'native') {
      result.ratio = result.medianMs / nativeMedian;
      result.extraMs = result.medianMs - nativeMedian;
      if (workload.target) result.met = workload.target.kind === 'ratio' ? result.ratio <= workload.target.max : result.extraMs <= workload.target.max;
    }
    return result;
  });
  return {
    id: workload.id,
    label: workload.label,
    command: workload.command,
    via: workload.via,
    ...(workload.target ? { target: workload.target } : {}),
    runners: results,
    ...(measured < workload.runs ? { trimmed: { planned: workload.runs, done: measured } } : {}),
  };
}
