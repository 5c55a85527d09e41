/**
 * `npm run bench`: every runner side by side in one run — native bash, brokered-shell's
 * seccomp and preload runtimes, and @anthropic-ai/sandbox-runtime's srt — on the same
 * generated trees, then the broker's microbenchmarks (socket round trips, the pipeline
 * alone, backup cost per MiB). Prints one markdown report and writes it, with the raw
 * JSON, to bench/results/ (or BENCH_OUT). Not a test: no vitest; targets are marked ✓/✗.
 *
 *   npm run bench                                   # the full run, < 10 min on 2 cores
 *   BENCH_SCALE=0.1 BENCH_RUNS=2 npm run bench      # quick iteration
 *   BENCH_ONLY=grep,sed,socket BENCH_RUNNERS=native,seccomp npm run bench
 *   npm run bench -- --help
 */
import { copyFileSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { commandEnv, revision, toolVersion } from './kernel-runtime.js';
import { measureWorkload, type WorkloadResult } from './lib/compare.js';
import { layerRows } from './lib/layers.js';
import { RunBudget } from './lib/budget.js';
import { MachineLoad } from './lib/machine-load.js';
import { backupRows, pipelineRows, reflinkSupport, socketRows, type BackupRow, type MicroRow } from './lib/micro.js';
import { DEFAULT_RUNNER_IDS, RUNNER_IDS, openRunners, srtConfig, type RunnerId } from './lib/runners.js';
import { loadProduct } from './lib/sandbox-runner.js';
import { REPO_ROOT, benchTempDir, bundleCli } from './lib/serve.js';
import { RunPlacement } from './lib/spread-dirs.js';
import { renderBenchReport, type BenchReport } from './lib/summary.js';
import { WORKLOAD_IDS, defineWorkloads, type WorkloadSizes } from './lib/workloads.js';

const MICRO_IDS = ['socket', 'pipeline', 'backup', 'layers'] as const;

/** Seconds kept for the microbenchmarks, which run after the workloads (60–70 s on the slowest machine seen). */
const MICRO_RESERVE_S = 90;

export interface BenchOptions extends WorkloadSizes {
  scale: number;
  only: Set<string>;
  runners: RunnerId[];
  microN: number;
  backupFiles: number;
  backupMiB: number;
  /** Creates per run of the layers row. */
  layerCreates: number;
  /** Seconds the whole run should take at most; heavy workloads drop measured runs to keep to it (lib/budget.ts). */
  budgetS: number;
  out: string;
}

const USAGE = `usage: npm run bench [-- options]   (each option also from the environment)
  --scale X          multiplies every tree size and request count (BENCH_SCALE, 1): 0.1 for a quick check
  --runs N           measured runs per runner, read workloads (BENCH_RUNS, 5)
  --heavy-runs N     measured runs per runner, sed/create/git/tar (BENCH_HEAVY_RUNS, 3)
  --warmup N         warm-up runs per runner (BENCH_WARMUP, 1; the heavy workloads share one)
  --startup-runs N   runs per runner, library-level startup (BENCH_STARTUP_RUNS, 20)
  --cli-runs N       runs per runner, whole-CLI startup (BENCH_CLI_RUNS, 5)
  --budget S         seconds for the whole run (BENCH_BUDGET, 540): on a slow disk the heavy
                     workloads share what is left and drop measured runs, down to 2 each
  --only LIST        workloads and microbenchmarks to run (BENCH_ONLY, all):
                     ${[...WORKLOAD_IDS, ...MICRO_IDS].join(',')}
  --runners LIST     (BENCH_RUNNERS, default ${DEFAULT_RUNNER_IDS.join(',')}; also seccomp-turn; floor-backup runs only where files are backed up); native is always kept as the reference
  --out DIR          where latest.md and latest.json go (BENCH_OUT, bench/results)
Sizes at scale 1: read 20,000 files; sed 1,000; create 10,000; git 5,000; tar 1,000;
socket and pipeline 5,000 requests per case (socket after 10,000 of warm-up); backups 16 × 4 MiB per mode;
layers 5,000 creates per run, --runs rounds.
`;

function number(name: string, value: string | undefined, fallback: number, min: number, integer = true): number {
  if (value === undefined || value === '') return fallback;
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed < min || (integer && !Number.isInteger(parsed))) throw new Error(`${name} must be ${integer ? 'an integer' : 'a number'} ≥ ${min}, got ${JSON.stringify(value)}`);
  return parsed;
}

function list(name: string, value: string | undefined, allowed: readonly string[]): string[] | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  const items = value.split(',').map((item) => item.trim()).filter(Boolean);
  const unknown = items.filter((item) => !allowed.includes(item));
  if (unknown.length > 0) throw new Error(`${name}: unknown ${unknown.join(', ')} (known: ${allowed.join(', ')})`);
  return items;
}

export function parseBenchOptions(argv: string[], env: NodeJS.ProcessEnv = process.env): BenchOptions | undefined {
  const names = ['scale', 'runs', 'heavy-runs', 'warmup', 'startup-runs', 'cli-runs', 'budget', 'only', 'runners', 'out'] as const;
  const { values } = parseArgs({
    args: argv,
    options: { ...Object.fromEntries(names.map((n) => [n, { type: 'string' as const }])), help: { type: 'boolean', short: 'h' } },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return undefined;
  }
  const given = values as Record<string, string | boolean | undefined>;
  const get = (name: (typeof names)[number]) => (given[name] as string | undefined) ?? env[`BENCH_${name.toUpperCase().replace('-', '_')}`];
  const scale = number('--scale', get('scale'), 1, 0.001, false);
  const sized = (full: number, min: number) => Math.max(min, Math.round(full * scale));
  const runners = list('--runners', get('runners'), RUNNER_IDS) ?? [...DEFAULT_RUNNER_IDS];
  return {
    scale,
    runs: number('--runs', get('runs'), 5, 1),
    heavyRuns: number('--heavy-runs', get('heavy-runs'), 3, 1),
    warmup: number('--warmup', get('warmup'), 1, 0),
    startupRuns: number('--startup-runs', get('startup-runs'), 20, 1),
    cliRuns: number('--cli-runs', get('cli-runs'), 5, 1),
    budgetS: number('--budget', get('budget'), 540, 1),
    only: new Set(list('--only', get('only'), [...WORKLOAD_IDS, ...MICRO_IDS]) ?? [...WORKLOAD_IDS, ...MICRO_IDS]),
    // native first: every ratio is to it.
    runners: RUNNER_IDS.filter((id) => id === 'native' || runners.includes(id)),
    readFiles: sized(20_000, 100),
    sedFiles: sized(1_000, 10),
    createFiles: sized(10_000, 40),
    gitFiles: sized(5_000, 10),
    tarFiles: sized(1_000, 10),
    microN: sized(5_000, 200),
    backupFiles: sized(16, 2),
    backupMiB: 4,
    layerCreates: sized(5_000, 200),
    out: path.resolve(get('out') ?? path.join(REPO_ROOT, 'bench', 'results')),
  };
}

/** BENCH_OUT as recorded in the results: relative to the repository, never a path of this machine. */
function outLabel(out: string): string {
  const relative = path.relative(REPO_ROOT, out);
  return relative.startsWith('..') || path.isAbsolute(relative) ? '(outside the repository)' : relative || '.';
}

function environment(base: string): Record<string, string> {
  const cpus = os.cpus();
  const reflink = reflinkSupport(base);
  return {
    revision: revision(),
    node: process.version,
    cpus: String(cpus.length),
    cpu: cpus[0]?.model ?? 'unknown',
    kernel: os.release(),
    fs: toolVersion('findmnt', ['-n', '-o', 'FSTYPE', '-T', base]),
    reflink: reflink === true ? 'reflink supported' : `no reflink: ${reflink}`,
    bwrap: toolVersion('bwrap', ['--version']),
    loadavg: os.loadavg().map((l) => l.toFixed(2)).join(' '),
  };
}

export async function runBench(options: BenchOptions, log: (line: string) => void): Promise<BenchReport> {
  const started = Date.now();
  const load = new MachineLoad();
  if (!existsSync(path.join(REPO_ROOT, 'dist', 'cli', 'main.js'))) throw new Error('dist/ is missing: build first (`npm run build`)');
  bundleCli(log);
  const base = benchTempDir('bsh-bench-run-');
  // The backup home, the scratch dirs and the trees each in a block-group cluster of its own (spread-dirs.ts).
  const placement = new RunPlacement();
  placement.spread(base);
  for (const dir of ['home', 'xdg', 'scratch', 'ws']) mkdirSync(path.join(base, dir), { recursive: true });
  const env = commandEnv(base);
  const workspace = path.join(base, 'ws');
  const srtSettings = path.join(base, 'srt-settings.json');
  writeFileSync(srtSettings, `${JSON.stringify(srtConfig(workspace), null, 2)}\n`);
  const report: BenchReport = {
    date: new Date().toISOString(),
    environment: environment(base),
    options: { ...options, only: [...options.only].join(','), runners: options.runners.join(','), out: outLabel(options.out) },
    workloads: [],
    micro: [],
    backup: [],
    notes: [],
    elapsedS: 0,
  };
  try {
    const workloads = defineWorkloads(workspace, options, env, placement, log).filter((w) => options.only.has(w.id));
    if (workloads.length > 0) {
      const slots = await openRunners(options.runners, { env, workspace, home: path.join(base, 'home'), srtSettings, scratch: path.join(base, 'scratch') });
      for (const slot of slots) if ('unavailable' in slot) report.notes.push(`${slot.id} cannot run here: ${slot.unavailable}`);
      try {
        // One warm-up for all heavy workloads: each brokered run takes seconds, and after the first the broker is warm.
        let heavyWarmup = options.warmup;
        for (const workload of workloads) {
          if (!workload.heavy) continue;
          workload.warmup = heavyWarmup;
          heavyWarmup = 0;
        }
        const budget = new RunBudget(started, options.budgetS, MICRO_IDS.some((id) => options.only.has(id)) ? MICRO_RESERVE_S : 0);
        let heavyLeft = workloads.filter((w) => w.heavy).length;
        for (const workload of workloads) {
          const t0 = Date.now();
          log(`${workload.id}: ${workload.warmup} warm-up + ${workload.runs} runs per runner`);
          const limit = workload.heavy ? { deadlineMs: budget.deadlineFor(heavyLeft--, t0), minRuns: Math.min(2, workload.runs) } : undefined;
          // Where nothing is backed up the durable floor is the floor: not run again.
          const runnable = slots.filter((slot) => slot.id !== 'floor-backup' || workload.backsUp === true);
          const result: WorkloadResult = await measureWorkload(workload, runnable, log, limit);
          report.workloads.push(result);
          if (result.trimmed) {
            report.notes.push(`${workload.id}: ${result.trimmed.done} of ${result.trimmed.planned} measured runs per runner, to keep the whole run within ${options.budgetS} s (--budget)`);
          }
          const medians = result.runners.map((r) => `${r.runner} ${r.error ? 'failed' : `${r.medianMs.toFixed(1)} ms`}`).join(', ');
          log(`  ${medians} [${((Date.now() - t0) / 1000).toFixed(1)} s]`);
        }
      } finally {
        for (const slot of slots) if ('runner' in slot) await slot.runner.close().catch((error: unknown) => log(`closing ${slot.id}: ${String(error)}`));
      }
    }
    const product = ['pipeline', 'backup', 'layers'].some((id) => options.only.has(id)) ? await loadProduct(REPO_ROOT) : undefined;
    if (options.only.has('socket')) {
      log('socket round trips');
      report.micro.push(...(await guarded('socket round trips', report, () => socketRows(options.microN, log), [] as MicroRow[])));
    }
    if (product && options.only.has('pipeline')) {
      log('pipeline without socket');
      report.micro.push(...(await guarded('pipeline', report, () => pipelineRows(product, options.microN, log), [] as MicroRow[])));
    }
    if (product && options.only.has('backup')) {
      log('backup cost per MiB');
      report.backup.push(...(await guarded('backup per MiB', report, () => backupRows(product, options.backupFiles, options.backupMiB, log), [] as BackupRow[])));
    }
    if (product && options.only.has('layers')) {
      log('layers of a create');
      const layers = await guarded('layers', report, () => layerRows(product, options.layerCreates, options.runs, log), undefined);
      if (layers) report.layers = layers;
    }
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
  report.environment.placement = placement.describe();
  report.elapsedS = (Date.now() - started) / 1000;
  report.environment.otherLoad = `${(load.othersShare(os.cpus().length) * 100).toFixed(0)} %`;
  report.environment.loadavg += ` at the start, ${os.loadavg().map((l) => l.toFixed(2)).join(' ')} at the end`;
  return report;
}

/** A microbenchmark that fails is reported as a note, not the end of the run. */
async function guarded<T>(what: string, report: BenchReport, work: () => Promise<T>, fallback: T): Promise<T> {
  try {
    return await work();
  } catch (error) {
    report.notes.push(`${what} failed: ${error instanceof Error ? error.message : String(error)}`);
    return fallback;
  }
}

/** The results may be committed: no path of this machine in them (temp dirs in error messages, the repository). */
function scrubPaths(text: string): string {
  const escape = (p: string) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return text.replace(new RegExp(`${escape(os.tmpdir())}/[^\\s/'":]+`, 'g'), '$TMP').split(REPO_ROOT).join('<repo>');
}

async function main(): Promise<void> {
  let options: BenchOptions | undefined;
  try {
    options = parseBenchOptions(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n${USAGE}`);
    process.exitCode = 2;
    return;
  }
  if (!options) return;
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const report = await runBench(options, log);
  const markdown = scrubPaths(renderBenchReport(report));
  process.stdout.write(markdown);
  mkdirSync(options.out, { recursive: true });
  const md = path.join(options.out, 'latest.md');
  const json = path.join(options.out, 'latest.json');
  // The previous run stays next to the new one, for a quick before/after.
  if (existsSync(md)) copyFileSync(md, path.join(options.out, 'previous.md'));
  writeFileSync(md, markdown);
  writeFileSync(json, scrubPaths(`${JSON.stringify(report, null, 2)}\n`));
  log(`wrote ${path.relative(process.cwd(), md)} and ${path.relative(process.cwd(), json)} in ${report.elapsedS.toFixed(0)} s`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  });
}
