import type { RunnerResult, WorkloadResult } from './compare.js';
import type { LayerReport, LayerRow } from './layers.js';
import type { BackupRow, MicroRow } from './micro.js';
import { RUNNER_LABELS } from './runners.js';
import { formatMicros, formatNumber, formatRatio, markdownTable } from './table.js';
import type { Target } from './workloads.js';

export interface BenchReport {
  date: string;
  environment: Record<string, string>;
  options: Record<string, unknown>;
  workloads: WorkloadResult[];
  micro: MicroRow[];
  backup: BackupRow[];
  /** Where a create's time goes, layer by layer (absent when not run). */
  layers?: LayerReport;
  /** Parts that could not run, with the reason. */
  notes: string[];
  elapsedS: number;
}

/** Milliseconds: two decimals below 10, one below 100, whole numbers above. */
export function formatMs(ms: number): string {
  if (!Number.isFinite(ms)) return '–';
  const size = Math.abs(ms);
  return formatNumber(ms, size < 10 ? 2 : size < 100 ? 1 : 0);
}

export function describeTarget(target: Target | undefined): string {
  if (!target) return '–';
  return target.kind === 'ratio' ? `≤ ${target.max}×` : `≤ +${target.max} ms`;
}

/** A ratio, with a third decimal where two would hide which side of its target it falls on. */
function ratioText(value: number, target: Target | undefined): string {
  const plain = formatRatio(value);
  if (target?.kind !== 'ratio' || value === target.max || plain !== formatRatio(target.max)) return plain;
  return `${value.toFixed(3)}×`;
}

const mark = (met: boolean | undefined) => (met === undefined ? '–' : met ? '✓' : '✗');

/** What a run involved besides time: broker requests and backups, or srt's wrap. */
function perRun(result: RunnerResult): string {
  if (result.requests !== undefined) return `${formatNumber(result.requests)} req, ${formatNumber(result.backups ?? 0)} backups`;
  if (result.wrapMs !== undefined) return `wrap ${formatMs(result.wrapMs)} ms`;
  return '–';
}

/** The floor runner's row in the whole-CLI workloads (see FloorRunner.cli). */
const FLOOR_CLI_LABEL = 'floor: Node spawning the command';

interface Row {
  workload: WorkloadResult;
  result: RunnerResult;
}

function workloadTable(workloads: readonly WorkloadResult[]): string {
  const rows: Row[] = workloads.flatMap((workload) => workload.runners.map((result) => ({ workload, result })));
  const failed = (r: Row) => r.result.error !== undefined;
  return markdownTable<Row>(
    [
      { header: 'workload', value: (r) => r.workload.label },
      { header: 'runner', value: (r) => (r.result.runner === 'floor' && r.workload.via === 'cli' ? FLOOR_CLI_LABEL : RUNNER_LABELS[r.result.runner]) },
      { header: 'runs', align: 'right', value: (r) => String(r.result.runsMs.length) },
      { header: 'min ms', align: 'right', value: (r) => formatMs(r.result.minMs) },
      { header: 'median ms', align: 'right', value: (r) => (failed(r) ? '–' : `**${formatMs(r.result.medianMs)}**`) },
      { header: 'max ms', align: 'right', value: (r) => formatMs(r.result.maxMs) },
      { header: '× native', align: 'right', value: (r) => (r.result.runner === 'native' && !failed(r) ? '1.00×' : r.result.ratio === undefined ? '–' : ratioText(r.result.ratio, r.workload.target)) },
      { header: 'extra ms', align: 'right', value: (r) => (r.result.extraMs === undefined ? '–' : formatMs(r.result.extraMs)) },
      { header: 'per run', align: 'right', value: (r) => perRun(r.result) },
      { header: 'target', value: (r) => (r.result.runner === 'native' ? '–' : describeTarget(r.workload.target)) },
      {
        header: 'met',
        value: (r) => {
          if (r.result.error !== undefined) return `✗ **failed**: ${r.result.error}`;
          return r.result.runner === 'native' ? '–' : mark(r.result.met);
        },
      },
    ],
    rows,
  );
}

/**
 * What the floor runner says about each target: whether the sandbox alone, with a broker
 * that decides nothing, already misses it (then no work on the broker can meet it on this
 * machine), and what the broker adds over that floor, per run and per request. For the
 * whole-CLI row the floor is Node starting and spawning the command.
 */
export function floorFindings(workloads: readonly WorkloadResult[]): string[] {
  const lines: string[] = [];
  for (const workload of workloads) {
    const of = (id: string) => workload.runners.find((r) => r.runner === id && r.error === undefined);
    const floor = of('floor');
    const brokered = of('seccomp');
    if (!workload.target || !floor || floor.ratio === undefined || floor.extraMs === undefined) continue;
    const target = describeTarget(workload.target);
    const measure = workload.target.kind === 'ratio' ? ratioText(floor.ratio, workload.target) : `+${formatMs(floor.extraMs)} ms`;
    const cannot = workload.via === 'cli' ? 'no command-line tool in Node can meet it here' : "no change to the broker's pipeline can meet it here";
    const verdict = floor.met ? `within ${target}` : `**already misses ${target}**: ${cannot}`;
    let line = `${workload.id}: the floor is ${measure} native, ${verdict}`;
    if (brokered) {
      const brokerMs = brokered.medianMs - floor.medianMs;
      if (workload.via === 'cli') line += `; the rest of the CLI adds ${formatMs(brokerMs)} ms over it`;
      // Read workloads ask the broker nothing: what is left is a turn's begin and commit, and noise.
      else if (brokered.requests === 0) line += `; no request reached the broker (seccomp − floor: ${formatMs(brokerMs)} ms)`;
      else {
        const perRequest = brokered.requests ? `, ${formatMicros((brokerMs * 1000) / brokered.requests)} µs per request` : '';
        line += `; the broker adds ${formatMs(brokerMs)} ms over it${perRequest}`;
      }
    }
    const durable = of('floor-backup');
    if (durable?.ratio !== undefined && durable.extraMs !== undefined && workload.via !== 'cli' && (durable.backups ?? 0) > 0) {
      const durableMeasure = workload.target.kind === 'ratio' ? ratioText(durable.ratio, workload.target) : `+${formatMs(durable.extraMs)} ms`;
      const durableVerdict = durable.met ? `within ${target}` : `**already misses ${target}**: not reachable while every backup is synced before its change`;
      line += `; with the durable backups the store's contract requires (${formatNumber(durable.backups ?? 0)} per run) and nothing else, the floor is ${durableMeasure} native, ${durableVerdict}`;
    }
    lines.push(`${line}.`);
  }
  return lines;
}

/**
 * The socket row's floor: the product's server and core with one plugin deciding at once
 * (core-server.ts). If it misses the target, no change to the plugins can meet it.
 */
export function socketFloorFinding(rows: readonly MicroRow[]): string | undefined {
  const row = (id: string) => rows.find((r) => r.id === id);
  const core = row('socket-core');
  const full = row('socket-token-read');
  const echo = row('socket-echo');
  if (!core || core.maxP50Us === undefined) return undefined;
  const target = `p50 ≤ ${core.maxP50Us} µs`;
  const verdict = core.p50Us <= core.maxP50Us ? `within ${target}` : `**already misses ${target}**: no change to the plugins can meet it here`;
  const parts = [`socket: the server and core with no standard plugin answer a text token at p50 ${formatMicros(core.p50Us)} µs, ${verdict}`];
  if (full) parts.push(`the standard plugins add ${formatMicros(full.p50Us - core.p50Us)} µs`);
  if (echo) parts.push(`the echo server (no broker) answers at ${formatMicros(echo.p50Us)} µs`);
  return `${parts.join('; ')}.`;
}

function microTable(rows: readonly MicroRow[]): string {
  return markdownTable<MicroRow>(
    [
      { header: 'benchmark', value: (r) => r.label },
      { header: 'n', align: 'right', value: (r) => formatNumber(r.n) },
      { header: 'p50 µs', align: 'right', value: (r) => formatMicros(r.p50Us) },
      { header: 'p99 µs', align: 'right', value: (r) => formatMicros(r.p99Us) },
      { header: 'mean µs', align: 'right', value: (r) => formatMicros(r.meanUs) },
      { header: 'req/s', align: 'right', value: (r) => formatNumber(r.reqPerSec) },
      { header: 'target', value: (r) => (r.maxP50Us === undefined ? '–' : `p50 ≤ ${r.maxP50Us} µs`) },
      { header: 'met', value: (r) => (r.maxP50Us === undefined ? '–' : mark(r.p50Us <= r.maxP50Us)) },
    ],
    rows,
  );
}

function backupTable(rows: readonly BackupRow[]): string {
  return markdownTable<BackupRow>(
    [
      { header: 'backup', value: (r) => (r.mode === 'copy' ? 'copy (reflink off)' : 'reflink (FICLONE)') },
      { header: 'where', value: (r) => r.where },
      { header: 'files × size', align: 'right', value: (r) => (r.files === undefined ? '–' : `${r.files} × ${r.fileMiB} MiB`) },
      { header: 'ms / MiB (median)', align: 'right', value: (r) => (r.unavailable ?? (r.msPerMiB === undefined ? '–' : formatMs(r.msPerMiB))) },
      { header: 'MiB/s', align: 'right', value: (r) => (r.mibPerSec === undefined ? (r.unavailable ? 'n/a' : '–') : formatNumber(r.mibPerSec, 0)) },
    ],
    rows,
  );
}

function layerTable(rows: readonly LayerRow[]): string {
  return markdownTable<LayerRow>(
    [
      { header: 'layer', value: (r) => r.label },
      { header: 'runs', align: 'right', value: (r) => String(r.runs) },
      { header: 'µs / create (min / median / max)', align: 'right', value: (r) => `${formatMicros(r.minUs)} / **${formatMicros(r.medianUs)}** / ${formatMicros(r.maxUs)}` },
      { header: '+ µs over the layer above', align: 'right', value: (r) => (r.extraUs === undefined ? '–' : formatMicros(r.extraUs)) },
      { header: 'broker process CPU µs / create', align: 'right', value: (r) => (r.brokerCpuUs === undefined ? '–' : formatMicros(r.brokerCpuUs)) },
    ],
    rows,
  );
}

/** The whole report as markdown: environment, the side-by-side table, the microbenchmarks. */
export function renderBenchReport(report: BenchReport): string {
  const env = report.environment;
  const parts = [
    `## npm run bench — ${report.date.slice(0, 16).replace('T', ' ')} UTC`,
    [
      `Node ${env.node}, ${env.cpus} × ${env.cpu}, Linux ${env.kernel}, ${env.fs} temp dir (${env.reflink}); product ${env.revision}.`,
      `Load: other processes used ${env.otherLoad} of the machine's CPU time during the run (load average ${env.loadavg}). Run time ${formatNumber(report.elapsedS, 0)} s.`,
      `Runs per runner: ${String(report.options.runs)} (read), ${String(report.options.heavyRuns)} (sed/create/git/tar), ${String(report.options.startupRuns)} (startup, library), ${String(report.options.cliRuns)} (startup, CLI), after ${String(report.options.warmup)} warm-up run(s); scale ${String(report.options.scale)}. Times are wall-clock, min / median / max; × native and extra compare medians.`,
      ...(env.placement ? [`Trees: ${env.placement}.`] : []),
    ].join('\n'),
  ];
  if (report.workloads.length > 0) parts.push('### Workloads', workloadTable(report.workloads));
  const socketFinding = socketFloorFinding(report.micro);
  const findings = [...floorFindings(report.workloads), ...(socketFinding ? [socketFinding] : [])];
  if (findings.length > 0) parts.push('### Floors against the targets', findings.map((line) => `- ${line}`).join('\n'));
  if (report.micro.length > 0) parts.push('### Broker microbenchmarks', microTable(report.micro));
  if (report.backup.length > 0) parts.push('### Backup cost per MiB', backupTable(report.backup));
  if (report.layers) parts.push(`### Where a create's time goes (a C loop of exclusive creates on ${report.layers.place})`, layerTable(report.layers.rows));
  if (report.notes.length > 0) parts.push('### Notes', report.notes.map((note) => `- ${note}`).join('\n'));
  return `${parts.join('\n\n')}\n`;
}
