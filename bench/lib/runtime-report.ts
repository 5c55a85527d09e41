/**
 * Types and markdown of bench/kernel-runtime.ts: the results table, the broker-side
 * detail table and the profile sections.
 */
import type { CliPhases } from './cli-phases.js';
import type { ProfileEntry } from './cpu-profile.js';
import type { GcSummary } from './gc-watch.js';
import type { HeapEntry } from './heap-profile.js';
import { PERF_HZ, symbolIncrease, type KernelShare } from './perf.js';
import type { SyscallRow } from './strace.js';
import { formatNumber, formatRatio, markdownTable, type Column } from './table.js';

export interface KernelRuntimeOptions {
  /** Measured runs per side for the read cases (each after the warm-up). */
  runs: number;
  /** Measured runs per side for the cases that write (sed, create, git): seconds each when brokered. */
  heavyRuns: number;
  /** Unrecorded runs per side before the measured ones. */
  warmup: number;
  readFiles: number;
  sedFiles: number;
  createFiles: number;
  gitFiles: number;
  /** Runs per side for library-level startup (`true`). */
  startupRuns: number;
  /** Runs per side for the whole-CLI startup. */
  cliRuns: number;
  only?: RegExp;
  /** After measuring: CPU profile and strace of the cases that miss their target. */
  profile: boolean;
  /** Profile these cases instead of the ones that miss. */
  profileOnly?: RegExp;
  /** Keep the .cpuprofile files and strace summaries here. */
  profileDir?: string;
  log(line: string): void;
}

export type Target = { kind: 'ratio'; max: number } | { kind: 'extra-ms'; max: number };
export type Side = 'native' | 'brokered';


export interface SideStats {
  n: number;
  minMs: number;
  medianMs: number;
  maxMs: number;
  /** Medians of CPU: this process (the broker side) and reaped children (command, + supervisor when brokered). */
  selfCpuMs: number;
  childCpuMs: number;
}

export interface CaseResult {
  id: string;
  label: string;
  command: string;
  brokeredPath: 'library' | 'cli';
  nativeLabel: string;
  target?: Target;
  native: SideStats;
  brokered: SideStats;
  ratio: number;
  extraMs: number;
  met?: boolean;
  nativeRunsMs: number[];
  brokeredRunsMs: number[];
  /** Library-level runs only. */
  requests?: {
    /** Median per run. */
    perRun: number;
    byOp: Record<string, number>;
    refused: number;
    refusedExamples: string[];
    /** Answers by errno per run (0 allowed). */
    byErrno: Record<string, number>;
    /** Handler time, all measured runs together. */
    meanUs: number;
    p50Us: number;
    p99Us: number;
    /** Median per run of the wall time with a request in the handler. */
    busyMs: number;
    maxInFlight: number;
    meanUsByOp: Record<string, number>;
    backups: number;
    commitMs: number;
  };
}

export interface CpuSummary {
  busyMs: number;
  totalMs: number;
  selfByArea: ProfileEntry[];
  selfByFunction: ProfileEntry[];
  inclusiveOwn: ProfileEntry[];
}

export interface ProfileReport {
  id: string;
  label: string;
  run: { wallMs: number; requests: number };
  /** The same command in the sandbox with an answer-at-once handler instead of the broker. */
  floor?: {
    runs: number;
    wallMs: number;
    requests: number;
    handlerUs: number;
    nativeMs: number;
    brokeredMs: number;
    brokeredRequests: number;
    brokeredHandlerUs: number;
  };
  /** `COMMAND; times` once each side: the command's own CPU, and what the supervisor and the broker add. */
  cpuSplit?: {
    native: { wallMs: number; commandCpuMs: number };
    brokered: { wallMs: number; commandCpuMs: number; supervisorCpuMs: number; brokerCpuMs: number; requests: number };
  };
  cpu?: CpuSummary;
  /** Garbage collections in the broker process during one more brokered run (no profiler attached). */
  gc?: GcSummary & { wallMs: number; requests: number };
  /** Allocations during the profiled run (sampled, collected objects included). */
  heap?: { totalBytes: number; selfByFunction: HeapEntry[]; inclusiveOwn: HeapEntry[] };
  /** Whole-CLI startup: medians of the phases inside the CLI process, and the launcher's `--check` probe. */
  cli?: { runs: number; phases: CliPhases; checkMs: number };
  supervisor?: { wallMs: number; requests: number; rows: SyscallRow[] };
  /** Cases without requests: the syscalls the command itself makes, natively (`strace -f -c`), each passing the seccomp filter when sandboxed. */
  commandSyscalls?: { wallMs: number; rows: SyscallRow[] };
  /** Cases without requests: `perf` CPU samples of the command's processes, and those in seccomp and Landlock code. */
  kernel?: { native: KernelShare; brokered: KernelShare };
  brokerSide?: { wallMs: number; requests: number; rows: SyscallRow[] };
  notes: string[];
}

export interface KernelRuntimeReport {
  date: string;
  options: Omit<KernelRuntimeOptions, 'log' | 'only' | 'profileOnly'> & { only?: string; profileOnly?: string };
  environment: { revision: string; loadavg: string; otherLoad?: string; node: string; cpus: number; cpu: string; kernel: string; fs: string; bash: string; grep: string; sed: string; git: string; python?: string; placement?: string };
  results: CaseResult[];
  profiles: ProfileReport[];
  elapsedS: number;
}

export function formatMs(ms: number): string {
  if (!Number.isFinite(ms)) return '–';
  return formatNumber(ms, Math.abs(ms) < 10 ? 2 : Math.abs(ms) < 100 ? 1 : 0);
}

function formatUs(us: number): string {
  return formatNumber(us, us < 100 ? 1 : 0);
}

const spread = (s: SideStats) => `${formatMs(s.minMs)} / **${formatMs(s.medianMs)}** / ${formatMs(s.maxMs)}`;

function targetText(r: CaseResult): string {
  if (!r.target) return '–';
  const limit = r.target.kind === 'ratio' ? `≤ ${r.target.max}×` : `≤ +${r.target.max} ms`;
  return `${limit} ${r.met ? 'met' : '**missed**'}`;
}

export function resultsTable(results: readonly CaseResult[]): string {
  const columns: Array<Column<CaseResult>> = [
    { header: 'case', value: (r) => r.label },
    { header: 'runs', align: 'right', value: (r) => String(r.native.n) },
    { header: 'native ms min / med / max', align: 'right', value: (r) => `${r.nativeLabel === 'bash -c' ? '' : `${r.nativeLabel}: `}${spread(r.native)}` },
    { header: 'brokered ms min / med / max', align: 'right', value: (r) => `${r.brokeredPath === 'cli' ? 'CLI: ' : ''}${spread(r.brokered)}` },
    { header: 'brokered ÷ native', align: 'right', value: (r) => formatRatio(r.ratio) },
    { header: 'extra ms', align: 'right', value: (r) => formatMs(r.extraMs) },
    { header: 'target', value: targetText },
    { header: 'requests / run', align: 'right', value: (r) => (r.requests ? formatNumber(r.requests.perRun) : '–') },
    { header: 'extra µs / request', align: 'right', value: (r) => (r.requests && r.requests.perRun > 0 ? formatUs((r.extraMs * 1000) / r.requests.perRun) : '–') },
  ];
  return markdownTable(columns, results);
}

export function detailTable(results: readonly CaseResult[]): string {
  const rows = results.filter((r) => r.requests);
  const ops = (r: CaseResult) =>
    Object.entries(r.requests?.byOp ?? {})
      .map(([op, count]) => `${op} ${formatNumber(count)} (${formatUs(r.requests?.meanUsByOp[op] ?? 0)} µs)`)
      .join(', ') || 'none';
  const columns: Array<Column<CaseResult>> = [
    { header: 'case', value: (r) => r.id },
    { header: 'requests / run by op (mean handler µs)', value: ops },
    {
      header: 'answers ≠ 0 / run',
      align: 'right',
      value: (r) =>
        Object.entries(r.requests?.byErrno ?? {})
          .filter(([errno]) => errno !== '0')
          .map(([errno, count]) => `errno ${errno}: ${formatNumber(count)}`)
          .join(', ') || '0',
    },
    { header: 'handler µs mean / p50 / p99', align: 'right', value: (r) => (r.requests?.perRun ? `${formatUs(r.requests.meanUs)} / ${formatUs(r.requests.p50Us)} / ${formatUs(r.requests.p99Us)}` : '–') },
    { header: 'broker busy ms', align: 'right', value: (r) => formatMs(r.requests?.busyMs ?? 0) },
    { header: 'max in flight', align: 'right', value: (r) => String(r.requests?.maxInFlight ?? 0) },
    { header: 'broker CPU ms', align: 'right', value: (r) => formatMs(r.brokered.selfCpuMs) },
    { header: 'child CPU ms native → brokered', align: 'right', value: (r) => `${formatMs(r.native.childCpuMs)} → ${formatMs(r.brokered.childCpuMs)}` },
    { header: 'backups', align: 'right', value: (r) => formatNumber(r.requests?.backups ?? 0) },
    { header: 'commit ms (untimed)', align: 'right', value: (r) => formatMs(r.requests?.commitMs ?? 0) },
  ];
  return markdownTable(columns, rows);
}

function entriesTable(title: string, entries: readonly ProfileEntry[], busyMs: number): string {
  return `${title}\n\n${markdownTable(
    [
      { header: 'what', value: (e: ProfileEntry) => (e.key.length > 90 ? `${e.key.slice(0, 89)}…` : e.key) },
      { header: 'ms', align: 'right', value: (e: ProfileEntry) => formatMs(e.ms) },
      { header: 'share of busy', align: 'right', value: (e: ProfileEntry) => `${((e.ms / busyMs) * 100).toFixed(1)}%` },
    ],
    entries,
  )}`;
}

function floorTable(f: NonNullable<ProfileReport['floor']>): string {
  const perRequest = (ms: number, requests: number) => (requests > 0 ? formatUs((ms * 1000) / requests) : '–');
  const rows: Array<[string, string, string, string, string]> = [
    ['native (`bash -c`), measured median', formatMs(f.nativeMs), '', '', ''],
    [
      `sandbox floor: every request answered at once, no broker (median of ${f.runs})`,
      formatMs(f.wallMs),
      `+${formatMs(f.wallMs - f.nativeMs)}`,
      perRequest(f.wallMs - f.nativeMs, f.requests),
      formatUs(f.handlerUs),
    ],
    ['brokered, measured median', formatMs(f.brokeredMs), `+${formatMs(f.brokeredMs - f.wallMs)}`, perRequest(f.brokeredMs - f.wallMs, f.brokeredRequests), formatUs(f.brokeredHandlerUs)],
  ];
  return `Where the wall time goes (${formatNumber(f.brokeredRequests)} requests per run):\n\n${markdownTable(
    [
      { header: 'run', value: (r: [string, string, string, string, string]) => r[0] },
      { header: 'ms', align: 'right', value: (r: [string, string, string, string, string]) => r[1] },
      { header: 'over the row above', align: 'right', value: (r: [string, string, string, string, string]) => r[2] },
      { header: 'µs / request', align: 'right', value: (r: [string, string, string, string, string]) => r[3] },
      { header: 'handler µs mean', align: 'right', value: (r: [string, string, string, string, string]) => r[4] },
    ],
    rows,
  )}`;
}

function cpuSplitTable(c: NonNullable<ProfileReport['cpuSplit']>): string {
  const n = c.brokered.requests;
  const per = (ms: number) => (n > 0 ? formatUs((ms * 1000) / n) : '–');
  const sandboxed = c.brokered.commandCpuMs + c.brokered.supervisorCpuMs;
  type Row = [string, string, string, string, string, string];
  const rows: Row[] = [
    ['native', formatMs(c.native.wallMs), formatMs(c.native.commandCpuMs), '–', formatMs(c.native.commandCpuMs), '–'],
    ['brokered', formatMs(c.brokered.wallMs), formatMs(c.brokered.commandCpuMs), formatMs(c.brokered.supervisorCpuMs), formatMs(sandboxed), formatMs(c.brokered.brokerCpuMs)],
    [n > 0 ? 'brokered − native, µs per request' : 'brokered − native', '', '', '', n > 0 ? per(sandboxed - c.native.commandCpuMs) : formatMs(sandboxed - c.native.commandCpuMs) + ' ms', per(c.brokered.brokerCpuMs)],
  ];
  return (
    'CPU split, one run each of `COMMAND; times` (command = bash and its children as `times` reports them; supervisor = CPU of the reaped launcher tree − command; ' +
    'the supervisor performs the allowed operations, so the file-system work of those calls moves from the command to it; broker = this process, all threads):\n\n' +
    markdownTable(
      [
        { header: 'side', value: (r: Row) => r[0] },
        { header: 'wall ms', align: 'right', value: (r: Row) => r[1] },
        { header: 'command CPU ms', align: 'right', value: (r: Row) => r[2] },
        { header: 'supervisor CPU ms', align: 'right', value: (r: Row) => r[3] },
        { header: 'command + supervisor', align: 'right', value: (r: Row) => r[4] },
        { header: 'broker CPU ms', align: 'right', value: (r: Row) => r[5] },
      ],
      rows,
    )
  );
}

function gcTable(g: NonNullable<ProfileReport['gc']>): string {
  const table = markdownTable(
    [
      { header: 'kind', value: (k: GcSummary['kinds'][number]) => k.kind },
      { header: 'count', align: 'right', value: (k: GcSummary['kinds'][number]) => formatNumber(k.count) },
      { header: 'total ms', align: 'right', value: (k: GcSummary['kinds'][number]) => formatMs(k.totalMs) },
      { header: 'max ms', align: 'right', value: (k: GcSummary['kinds'][number]) => formatMs(k.maxMs) },
      {
        header: 'flags (count)',
        value: (k: GcSummary['kinds'][number]) =>
          Object.entries(k.flags)
            .map(([why, count]) => `${why} ${formatNumber(count)}`)
            .join(', '),
      },
    ],
    g.kinds,
  );
  return (
    `Garbage collection in the broker process over one more brokered run without the profiler (${formatMs(g.wallMs)} ms, ${formatNumber(g.requests)} requests): ` +
    `${formatMs(g.totalMs)} ms of GC pauses; heap used ${formatNumber(g.heapUsedMiB, 1)} MiB (${g.heapGrowthMiB >= 0 ? '+' : ''}${formatNumber(g.heapGrowthMiB, 1)} over the run), ` +
    `external ${formatNumber(g.externalMiB, 1)} MiB (${g.externalGrowthMiB >= 0 ? '+' : ''}${formatNumber(g.externalGrowthMiB, 1)}).\n\n${table}`
  );
}

function kernelTable(k: NonNullable<ProfileReport['kernel']>): string {
  type Row = [string, KernelShare];
  const ms = (samples: number) => formatMs((samples * 1000) / PERF_HZ);
  const part = (n: number, whole: number) => `${ms(n)} (${whole > 0 ? ((n / whole) * 100).toFixed(1) : '–'}%)`;
  const rows: Row[] = [
    ['native', k.native],
    ['brokered', k.brokered],
  ];
  const table = markdownTable(
    [
      { header: 'side', value: (r: Row) => r[0] },
      { header: "command's CPU ms, 5 runs", align: 'right', value: (r: Row) => ms(r[1].samples) },
      { header: 'seccomp', align: 'right', value: (r: Row) => part(r[1].seccomp, r[1].samples) },
      { header: 'Landlock', align: 'right', value: (r: Row) => part(r[1].landlock, r[1].samples) },
      { header: 'dentry/mount refcounts', align: 'right', value: (r: Row) => part(r[1].refcount, r[1].samples) },
    ],
    rows,
  );
  const added = k.brokered.samples - k.native.samples;
  const top = symbolIncrease(k.native, k.brokered, 10)
    .map((t) => `${t.symbol} ${ms(t.base)} → ${ms(t.other)}`)
    .join(', ');
  return (
    `Kernel-side cost in the command's own processes (\`perf record -e cpu-clock -F ${PERF_HZ}\`, the command five times over in one recording per side; seccomp = filter and syscall-entry work; ` +
    `Landlock = its hooks, rule lookups (\`find_rule\`) and path walk; refcounts = \`lockref_*\`, \`dget_parent\`, \`dput\`, \`mntget/put\`, which Landlock's walk up each opened path takes at every level):\n\n${table}\n\n` +
    `Brokered − native: ${added >= 0 ? '+' : ''}${ms(added)} ms of the command's CPU. Largest increases by function (ms native → brokered): ${top}.`
  );
}

function heapTable(title: string, entries: readonly HeapEntry[], requests: number): string {
  return `${title}\n\n${markdownTable(
    [
      { header: 'what', value: (e: HeapEntry) => (e.key.length > 90 ? `${e.key.slice(0, 89)}…` : e.key) },
      { header: 'MiB', align: 'right', value: (e: HeapEntry) => formatNumber(e.bytes / 1048576, 1) },
      { header: 'KiB / request', align: 'right', value: (e: HeapEntry) => (requests > 0 ? formatNumber(e.bytes / requests / 1024, 1) : '–') },
      { header: 'share', align: 'right', value: (e: HeapEntry) => `${(e.share * 100).toFixed(1)}%` },
    ],
    entries,
  )}`;
}

function syscallTable(title: string, rows: readonly SyscallRow[], requests: number, limit = 12): string {
  const top = [...rows].sort((a, b) => b.calls - a.calls).slice(0, limit);
  const seconds = rows.reduce((sum, r) => sum + r.seconds, 0);
  const calls = rows.reduce((sum, r) => sum + r.calls, 0);
  const totals = `${formatNumber(calls)} calls${requests > 0 ? ` (${formatNumber(calls / requests, 1)} per request)` : ''}, ${formatMs(seconds * 1000)} ms in syscalls as strace counts it`;
  return `${title}: ${totals}\n\n${markdownTable(
    [
      { header: 'syscall', value: (r: SyscallRow) => r.syscall },
      { header: 'calls', align: 'right', value: (r: SyscallRow) => formatNumber(r.calls) },
      { header: 'per request', align: 'right', value: (r: SyscallRow) => (requests > 0 ? formatNumber(r.calls / requests, 2) : '–') },
      { header: 'errors', align: 'right', value: (r: SyscallRow) => formatNumber(r.errors) },
      { header: 'µs / call', align: 'right', value: (r: SyscallRow) => formatNumber(r.usPerCall) },
      { header: 'sys time share', align: 'right', value: (r: SyscallRow) => `${(r.share * 100).toFixed(1)}%` },
    ],
    top,
  )}`;
}

export function renderReport(report: KernelRuntimeReport): string {
  const { environment: env, options: o } = report;
  const parts = [
    `## Kernel runtime, brokered vs native (${report.date.slice(0, 10)})`,
    `Product ${env.revision} (dist/ and build/ as built at the time). Node ${env.node}, ${env.cpus} × ${env.cpu}, Linux ${env.kernel}, ${env.fs} temp dir; ${env.bash ? `bash ${env.bash}` : 'bash'}, ${env.grep}, ${env.sed}, ${env.git}${env.python ? `, ${env.python}` : ''}. ` +
      `Load average ${env.loadavg}; other processes used ${env.otherLoad ?? '?'} of the machine's CPU time during the run. ` +
      `${o.runs} runs per side (sed, create, git: ${o.heavyRuns}) after ${o.warmup} unrecorded warm-up run per side (startup: at least 3 library, 2 CLI; the sed, create and git cases share one, taken by the first of them); startup runs: ${o.startupRuns} library, ${o.cliRuns} CLI; read tree ${formatNumber(o.readFiles)} files, sed ${formatNumber(o.sedFiles)}, create ${formatNumber(o.createFiles)}, git ${formatNumber(o.gitFiles)}. Total ${report.elapsedS.toFixed(0)} s.${env.placement ? ` Trees: ${env.placement}.` : ''}`,
    resultsTable(report.results),
    'Broker side of the library-level runs (medians per run; handler = request decoded → answer ready, inside this process):',
    detailTable(report.results),
  ];
  for (const p of report.profiles) {
    if (p.cli) {
      const ph = p.cli.phases;
      parts.push(`### Profile: ${p.label}`);
      parts.push(
        `Phases inside the CLI process (medians of ${p.cli.runs} runs of the same entry points as bin/brokered-shell.js, stamped with \`performance.now()\`):\n\n` +
          markdownTable(
            [
              { header: 'phase', value: (r: [string, number]) => r[0] },
              { header: 'ms', align: 'right', value: (r: [string, number]) => formatMs(r[1]) },
            ],
            [
              ['Node bootstrap (process start → entry script)', ph.bootMs],
              ['import dist/cli/main.js (commander, command tree)', ph.importMainMs],
              ['import dist/cli/run.js + logger (core, zod schemas, plugins, backup, ipc, sandbox)', ph.importRunMs],
              ['main(run -- COMMAND): probe, broker, server, command, commit, clean-up', ph.runMs],
              [`  of which the launcher probe \`brokered-sandbox --check\` (spawnSync, measured apart)`, p.cli.checkMs],
              ['process creation, script compile, exit (the rest)', ph.restMs],
              ['whole process, spawn → exit', ph.wallMs],
            ] as Array<[string, number]>,
          ),
      );
      if (p.cpu) parts.push(`CPU profile of one CLI run (\`node --cpu-prof\`, 100 µs interval, ${formatMs(p.run.wallMs)} ms wall under the profiler): ${formatMs(p.cpu.busyMs)} ms busy.`);
    } else {
      parts.push(`### Profile: ${p.label}`);
      if (p.floor) parts.push(floorTable(p.floor));
      if (p.cpuSplit) parts.push(cpuSplitTable(p.cpuSplit));
      if (p.gc) parts.push(gcTable(p.gc));
      if (p.cpu) parts.push(`CPU profile of the broker process over one more brokered run: ${formatMs(p.run.wallMs)} ms, ${formatNumber(p.run.requests)} requests.`);
      if (p.cpu) parts.push(`Broker process CPU profile: ${formatMs(p.cpu.busyMs)} ms busy of ${formatMs(p.cpu.totalMs)} ms (\`dispatch\` is the inspector's own start/stop).`);
    }
    if (p.cpu) {
      parts.push(entriesTable('Self time by area', p.cpu.selfByArea.slice(0, 10), p.cpu.busyMs));
      parts.push(entriesTable('Self time by function', p.cpu.selfByFunction.slice(0, 12), p.cpu.busyMs));
      parts.push(entriesTable('Inclusive time, our own functions', p.cpu.inclusiveOwn.slice(0, 12), p.cpu.busyMs));
    }
    if (p.heap && p.heap.totalBytes > 0) {
      const perRequest = p.run.requests > 0 ? `, ${formatNumber(p.heap.totalBytes / p.run.requests / 1024, 1)} KiB per request` : '';
      parts.push(`Allocations in the broker process during the strace run below (sampled every 16 KiB, collected objects included; V8 heap only, not Buffers' backing stores): ${formatNumber(p.heap.totalBytes / 1048576, 1)} MiB${perRequest}.`);
      parts.push(heapTable('Allocated by function', p.heap.selfByFunction, p.run.requests));
      parts.push(heapTable('Allocated inside our own functions (inclusive)', p.heap.inclusiveOwn, p.run.requests));
    }
    if (p.commandSyscalls) {
      const calls = p.commandSyscalls.rows.reduce((sum, r) => sum + r.calls, 0);
      const split = p.cpuSplit;
      const extra = split ? split.brokered.commandCpuMs + split.brokered.supervisorCpuMs - split.native.commandCpuMs : undefined;
      parts.push(
        syscallTable(`The command's own syscalls, native (\`strace -f -c\`; each one passes the seccomp filter when sandboxed, each open also Landlock)`, p.commandSyscalls.rows, 0) +
          (extra !== undefined && calls > 0 ? `\n\nExtra CPU brokered (command + supervisor − native, from the split above) ÷ these ${formatNumber(calls)} syscalls: ${formatNumber((extra * 1e6) / calls)} ns per syscall.` : ''),
      );
    }
    if (p.kernel) parts.push(kernelTable(p.kernel));
    if (p.supervisor) parts.push(syscallTable(`Supervisor syscalls (\`strace -c\` of the launcher; ${formatMs(p.supervisor.wallMs)} ms run, ${formatNumber(p.supervisor.requests)} requests)`, p.supervisor.rows, p.supervisor.requests));
    if (p.brokerSide) parts.push(syscallTable(`Broker-side syscalls (\`strace -c\` of this process's threads; ${formatMs(p.brokerSide.wallMs)} ms run, ${formatNumber(p.brokerSide.requests)} requests)`, p.brokerSide.rows, p.brokerSide.requests));
    for (const note of p.notes) parts.push(note);
  }
  return `${parts.join('\n\n')}\n`;
}
