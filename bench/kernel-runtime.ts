/**
 * Kernel runtime benchmark: real commands brokered (Landlock + seccomp user
 * notification, every modifying syscall through the broker pipeline) against the same
 * commands run natively, on the same generated trees, in one run.
 *
 *   node --import tsx bench/kernel-runtime.ts [--runs 9] [--heavy-runs 3] [--warmup 1] [--only REGEX]
 *     [--read-files 20000] [--sed-files 1000] [--create-files 10000] [--git-files 5000]
 *     [--startup-runs 30] [--cli-runs 15] [--profile [--profile-only REGEX] [--profile-dir DIR]]
 *     [--json FILE]
 *
 * Brokered per-case numbers come from the library-level path (one Node process holding
 * one Broker with the standard plugins; `spawnSandboxed` + `kernelBridge`, one turn per
 * run, as `brokered-shell run` wires them); the whole CLI (`bin/brokered-shell.js run`,
 * from dist/) is measured for startup only. Not a test: no vitest, no pass/fail.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { checkSandboxSupport, locateSandboxBinary } from '../src/sandbox/index.js';
import { measureCliPhases, type CliPhases } from './lib/cli-phases.js';
import { newestProfile, summarizeProfile } from './lib/cpu-profile.js';
import { watchGc, type GcSummary } from './lib/gc-watch.js';
import { summarizeHeapProfile } from './lib/heap-profile.js';
import { profileThisProcess } from './lib/inspector-profile.js';
import { MachineLoad } from './lib/machine-load.js';
import { kernelShare, perfAvailable, perfLauncherWrapper, perfRecordArgs } from './lib/perf.js';
import type { RequestSnapshot } from './lib/request-counter.js';
import { SandboxRunner, answerAtOnce, loadProduct, type BrokeredRun } from './lib/sandbox-runner.js';
import { CLI, REPO_ROOT, benchTempDir, bundleCli } from './lib/serve.js';
import { RunPlacement } from './lib/spread-dirs.js';
import { quantileSorted } from './lib/stats.js';
import { parseStraceSummary, straceAvailable, straceLauncherWrapper, straceThisProcess, type SyscallRow } from './lib/strace.js';
import {
  formatMs,
  renderReport,
  type CaseResult,
  type KernelRuntimeOptions,
  type KernelRuntimeReport,
  type ProfileReport,
  type Side,
  type SideStats,
  type Target,
} from './lib/runtime-report.js';
import { formatNumber, formatRatio } from './lib/table.js';
import { startPlain, timeProcess, type TimedRun } from './lib/timed-process.js';
import { gitEnv, textOf, writeGitRepo, writeTree } from './lib/trees.js';
import { positiveInt } from './lib/cli-options.js';

interface CaseDef {
  id: string;
  label: string;
  /** The shell command both sides run with `bash -c` (the CLI side: `brokered-shell run -- COMMAND`). */
  command: string;
  /** How the brokered side runs: in this process (library) or as the whole CLI. */
  brokered: 'library' | 'cli';
  /** A different native program than `bash -c COMMAND` (the `node -e 0` reference). */
  nativeArgv?: string[];
  nativeLabel?: string;
  runs: number;
  warmup: number;
  /** Writes files, seconds per brokered run: the first such case selected gets the warm-up, the others follow a warm broker. */
  heavy?: boolean;
  target?: Target;
  /** Untimed, before every run of either side; returns the cwd (a fresh tree when the command changes it). */
  prepare(tag: string): string;
  /** Untimed, after every run: check the command did its work, clean up. Throws when it did not. */
  after?(cwd: string, side: Side, run: TimedRun): void;
  /** Both sides must print the same number of bytes. */
  sameStdout?: boolean;
}

export { renderReport, type CaseResult, type KernelRuntimeOptions, type KernelRuntimeReport, type ProfileReport };

const NEEDLE = 'zqxjneedle';

function stats(values: readonly number[]): { min: number; median: number; max: number } {
  const sorted = Float64Array.from(values).sort();
  return { min: quantileSorted(sorted, 0), median: quantileSorted(sorted, 0.5), max: quantileSorted(sorted, 1) };
}

const median = (values: readonly number[]) => stats(values).median;

function sideStats(runs: readonly TimedRun[]): SideStats {
  const wall = stats(runs.map((r) => r.wallMs));
  return {
    n: runs.length,
    minMs: wall.min,
    medianMs: wall.median,
    maxMs: wall.max,
    selfCpuMs: median(runs.map((r) => r.selfCpuMs)),
    childCpuMs: median(runs.map((r) => r.childCpuMs)),
  };
}

/** The commit the product was built from, and whether the working tree differed from it. */
export function revision(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: REPO_ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no', '--', 'src', 'native', 'binding.gyp'], { cwd: REPO_ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    return dirty ? `${head} + uncommitted changes in src/, native/ or binding.gyp` : head;
  } catch {
    return 'unknown';
  }
}

export function toolVersion(file: string, args: string[]): string {
  try {
    return (execFileSync(file, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).split('\n')[0] ?? '').trim();
  } catch {
    return 'unknown';
  }
}

/** The environment both sides get: ours without the broker's own variables, plus the bench's temp locations. */
export function commandEnv(base: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    // NODE_EXTRA_CA_CERTS: read at every Node start, ~45 ms here, and no part of the product.
    if (key.startsWith('BROKERED_SHELL_') || key.startsWith('GIT_') || ['BASH_ENV', 'ENV', 'NODE_OPTIONS', 'NODE_EXTRA_CA_CERTS'].includes(key)) continue;
    env[key] = value;
  }
  return gitEnv({
    ...env,
    LC_ALL: 'C',
    TMPDIR: path.join(base, 'scratch'),
    BROKERED_SHELL_HOME: path.join(base, 'home'),
    XDG_DATA_HOME: path.join(base, 'xdg'),
  });
}

function countFiles(dir: string): number {
  return readdirSync(dir).length;
}

/** The cases, in the order they run. Each `prepare` makes what its command needs, untimed. */
function defineCases(base: string, options: KernelRuntimeOptions, env: NodeJS.ProcessEnv, python: string | undefined, placement: RunPlacement): CaseDef[] {
  const ws = path.join(base, 'ws');
  const light = { runs: options.runs, warmup: options.warmup };
  const heavy = { runs: options.heavyRuns, warmup: options.warmup, heavy: true };
  // Each run in a directory of its own, kept until the end: see lib/spread-dirs.ts.
  const fresh = (group: string) => (tag: string) => placement.runDir(path.join(ws, group), tag);
  const startupDir = () => {
    const dir = path.join(ws, 'startup');
    mkdirSync(dir, { recursive: true });
    return dir;
  };

  // The read tree is made once and only read: 100 files per directory, ~1 KiB each, the needle in 1 %.
  const readRoot = path.join(ws, 'read-tree');
  let readTreeMade = false;
  const readTree = () => {
    if (!readTreeMade) {
      options.log(`  writing ${formatNumber(options.readFiles)} files for the read cases`);
      writeTree(readRoot, { files: options.readFiles, perDir: 100, bytes: 1024, needleEvery: 100, needle: NEEDLE });
      readTreeMade = true;
    }
    return readRoot;
  };

  // sed: fresh files each run, with contents unique to the run (a backup never finds its blob already stored).
  const sedPrepare = (group: string) => (tag: string) => {
    const dir = fresh(group)(tag);
    writeTree(dir, { files: options.sedFiles, perDir: 0, bytes: 1024, tag: `${group}-${tag}` });
    return dir;
  };
  const sedAfter = (cwd: string, _side: Side) => {
    // Every line of every file had its first "a" replaced: check one file fully.
    const name = 'f00000.txt';
    const original = textOf(1024, 1, `run ${path.basename(path.dirname(cwd))}-${path.basename(cwd)} file 0`);
    const expected = original
      .split('\n')
      .map((line) => line.replace('a', 'b'))
      .join('\n');
    const actual = readFileSync(path.join(cwd, name), 'utf8');
    if (actual !== expected) throw new Error(`sed did not change ${name} in ${cwd} as expected`);
  };

  const createAfter = (cwd: string) => {
    const count = countFiles(cwd);
    if (count !== options.createFiles) throw new Error(`expected ${options.createFiles} files in ${cwd}, found ${count}`);
  };

  const cases: CaseDef[] = [
    {
      id: 'startup-lib',
      label: 'startup, library level: `bash -c true`',
      command: 'true',
      brokered: 'library',
      runs: options.startupRuns,
      warmup: Math.max(options.warmup, 3),
      target: { kind: 'extra-ms', max: 25 },
      prepare: startupDir,
    },
    {
      id: 'startup-cli',
      label: 'startup, whole CLI: `brokered-shell run -- true`',
      command: 'true',
      brokered: 'cli',
      runs: options.cliRuns,
      warmup: Math.max(options.warmup, 2),
      target: { kind: 'extra-ms', max: 25 },
      prepare: startupDir,
    },
    {
      id: 'startup-cli-node',
      label: 'startup, whole CLI vs bare `node -e 0`',
      command: 'true',
      brokered: 'cli',
      nativeArgv: [process.execPath, '-e', '0'],
      nativeLabel: 'node -e 0',
      runs: options.cliRuns,
      warmup: Math.max(options.warmup, 2),
      prepare: startupDir,
    },
    {
      id: 'read-grep',
      label: `grep -r over ${formatNumber(options.readFiles)} files`,
      command: `grep -r ${NEEDLE} .`,
      brokered: 'library',
      ...light,
      target: { kind: 'ratio', max: 1.05 },
      prepare: readTree,
      sameStdout: true,
    },
    {
      id: 'read-cat',
      label: `find | xargs cat over ${formatNumber(options.readFiles)} files`,
      command: 'find . -type f | xargs cat > /dev/null',
      brokered: 'library',
      ...light,
      target: { kind: 'ratio', max: 1.05 },
      prepare: readTree,
      sameStdout: true,
    },
    {
      id: 'sed-batch',
      label: `sed -i, one sed over ${formatNumber(options.sedFiles)} files`,
      command: 'sed -i s/a/b/ *.txt',
      brokered: 'library',
      ...heavy,
      target: { kind: 'ratio', max: 2.5 },
      prepare: sedPrepare('sed-batch'),
      after: sedAfter,
    },
    {
      id: 'sed-each',
      label: `sed -i, one sed per file (find -exec \\;), ${formatNumber(options.sedFiles)} files`,
      command: "find . -type f -exec sed -i s/a/b/ {} ';'",
      brokered: 'library',
      ...heavy,
      target: { kind: 'ratio', max: 2.5 },
      prepare: sedPrepare('sed-each'),
      after: sedAfter,
    },
    {
      id: 'create-bash',
      label: `create ${formatNumber(options.createFiles)} files, bash loop`,
      command: `for i in $(seq ${options.createFiles}); do echo x > f$i; done`,
      brokered: 'library',
      ...heavy,
      prepare: fresh('create-bash'),
      after: createAfter,
    },
  ];
  if (python) {
    cases.push({
      id: 'create-python',
      label: `create ${formatNumber(options.createFiles)} files, python3`,
      command: `'${python}' -c 'import sys
for i in range(${options.createFiles}):
    with open("f%d" % i, "w") as f: f.write("x\\n")'`,
      brokered: 'library',
      ...heavy,
      prepare: fresh('create-python'),
      after: createAfter,
    });
  }
  if (options.gitFiles > 0) {
    cases.push({
      id: 'git-commit',
      label: `git add -A && git commit, ${formatNumber(options.gitFiles)} new files`,
      command: 'git add -A && git commit -q -m bench',
      brokered: 'library',
      ...heavy,
      prepare: (tag) => {
        const dir = fresh('git')(tag);
        writeGitRepo(dir, { files: options.gitFiles, perDir: 100, bytes: 1024, tag }, env);
        return dir;
      },
      after: (cwd) => {
        const listed = execFileSync('git', ['ls-files', '-z'], { cwd, env, encoding: 'utf8', maxBuffer: 64 << 20 }).split('\0').filter(Boolean).length;
        if (listed !== options.gitFiles) throw new Error(`git committed ${listed} files, expected ${options.gitFiles}`);
      },
    });
  }
  return cases;
}

interface Context {
  runner: SandboxRunner;
  /** The launcher copy every library-level run uses. */
  launcher: string;
  env: NodeJS.ProcessEnv;
  options: KernelRuntimeOptions;
}

async function runSide(def: CaseDef, side: Side, cwd: string, ctx: Context): Promise<TimedRun | BrokeredRun> {
  if (side === 'native') {
    const [file, ...args] = def.nativeArgv ?? ['/bin/bash', '-c', def.command];
    return timeProcess(() => startPlain(file as string, args, { cwd, env: ctx.env }));
  }
  if (def.brokered === 'cli') {
    return timeProcess(() => startPlain(process.execPath, [CLI, 'run', '--workspace', cwd, '--', def.command], { cwd, env: ctx.env }));
  }
  return ctx.runner.run(['/bin/bash', '-c', def.command], cwd, ctx.env);
}

function checkRun(def: CaseDef, side: Side, run: TimedRun): void {
  if (run.code !== 0) {
    throw new Error(`${def.id} (${side}) exited with ${String(run.code ?? run.signal)}: ${run.stderrTail.trim().slice(-1500)}`);
  }
  if ('requests' in run) {
    const requests = (run as BrokeredRun).requests;
    if (requests.refused > 0) {
      throw new Error(`${def.id}: the broker refused ${requests.refused} requests, e.g. ${requests.refusedExamples.join('; ')}`);
    }
  }
}

function isBrokered(run: TimedRun | BrokeredRun): run is BrokeredRun {
  return 'requests' in run;
}

async function measureCase(def: CaseDef, ctx: Context): Promise<CaseResult> {
  const native: TimedRun[] = [];
  const brokered: Array<TimedRun | BrokeredRun> = [];
  let expectBytes: number | undefined;
  for (let i = 0; i < def.warmup + def.runs; i += 1) {
    const warm = i < def.warmup;
    // Alternate which side goes first, so slow drifts (page cache, other load) hit both alike.
    const order: Side[] = i % 2 === 0 ? ['native', 'brokered'] : ['brokered', 'native'];
    for (const side of order) {
      const cwd = def.prepare(`${side}-${i}`);
      // Write back what earlier runs (and their backups) left dirty, so no run pays for another's.
      if (def.heavy) execFileSync('sync');
      const run = await runSide(def, side, cwd, ctx);
      checkRun(def, side, run);
      if (def.sameStdout) {
        expectBytes ??= run.stdoutBytes;
        if (run.stdoutBytes !== expectBytes) throw new Error(`${def.id} (${side}) printed ${run.stdoutBytes} bytes, another run ${expectBytes}`);
      }
      def.after?.(cwd, side, run);
      if (!warm) (side === 'native' ? native : brokered).push(run);
    }
  }
  const n = sideStats(native);
  const b = sideStats(brokered);
  const result: CaseResult = {
    id: def.id,
    label: def.label,
    command: def.command,
    brokeredPath: def.brokered,
    nativeLabel: def.nativeLabel ?? 'bash -c',
    native: n,
    brokered: b,
    ratio: b.medianMs / n.medianMs,
    extraMs: b.medianMs - n.medianMs,
    nativeRunsMs: native.map((r) => r.wallMs),
    brokeredRunsMs: brokered.map((r) => r.wallMs),
  };
  if (def.target) {
    result.target = def.target;
    result.met = def.target.kind === 'ratio' ? result.ratio <= def.target.max : result.extraMs <= def.target.max;
  }
  const library = brokered.filter(isBrokered);
  if (library.length > 0) result.requests = mergeRequests(library);
  return result;
}

function mergeRequests(runs: readonly BrokeredRun[]): NonNullable<CaseResult['requests']> {
  const snaps: RequestSnapshot[] = runs.map((r) => r.requests);
  const total = snaps.reduce((sum, s) => sum + s.requests, 0);
  const byOp: Record<string, number> = {};
  const nsByOp: Record<string, number> = {};
  for (const s of snaps) {
    for (const [op, count] of Object.entries(s.byOp)) {
      byOp[op] = (byOp[op] ?? 0) + count;
      nsByOp[op] = (nsByOp[op] ?? 0) + count * (s.meanUsByOp[op] ?? 0);
    }
  }
  const byErrno: Record<string, number> = {};
  for (const s of snaps) for (const [errno, count] of Object.entries(s.byErrno)) byErrno[errno] = (byErrno[errno] ?? 0) + count / snaps.length;
  const perRunByOp = Object.fromEntries(Object.entries(byOp).map(([op, count]) => [op, count / snaps.length]));
  return {
    perRun: median(snaps.map((s) => s.requests)),
    byOp: perRunByOp,
    refused: snaps.reduce((sum, s) => sum + s.refused, 0),
    refusedExamples: snaps.flatMap((s) => s.refusedExamples).slice(0, 5),
    byErrno,
    meanUs: total > 0 ? snaps.reduce((sum, s) => sum + s.totalMs, 0) * 1000 / total : 0,
    // Per-run medians of the per-run quantiles: good enough for runs of equal size.
    p50Us: median(snaps.map((s) => s.p50Us)),
    p99Us: median(snaps.map((s) => s.p99Us)),
    busyMs: median(snaps.map((s) => s.busyMs)),
    maxInFlight: Math.max(...snaps.map((s) => s.maxInFlight)),
    meanUsByOp: Object.fromEntries(Object.entries(byOp).map(([op, count]) => [op, (nsByOp[op] ?? 0) / count])),
    backups: median(runs.map((r) => r.backups)),
    commitMs: median(runs.map((r) => r.commitMs)),
  };
}

/** bash's `times`: the shell's and its children's user + system CPU, in ms (the last two lines of its output). */
function parseTimes(stdout: string | undefined): number | undefined {
  const lines = (stdout ?? '').trim().split('\n').slice(-2);
  let total = 0;
  for (const line of lines) {
    const match = /^(\d+)m([\d.]+)s (\d+)m([\d.]+)s$/.exec(line.trim());
    if (!match) return undefined;
    total += (Number(match[1]) * 60 + Number(match[2]) + Number(match[3]) * 60 + Number(match[4])) * 1000;
  }
  return lines.length === 2 ? total : undefined;
}

/**
 * Where a case's time goes, from extra runs after the measurement (the measured numbers
 * are not affected): the sandbox floor without the broker, the CPU split between command,
 * supervisor and broker, a CPU + allocation profile of the broker, and `strace -c` of the
 * supervisor and of the broker's threads.
 */
async function profileCase(def: CaseDef, result: CaseResult, ctx: Context, dir: string): Promise<ProfileReport> {
  const report: ProfileReport = { id: def.id, label: def.label, run: { wallMs: 0, requests: 0 }, notes: [] };
  const argv = ['/bin/bash', '-c', def.command];
  /** One brokered run in a fresh cwd; `between` runs after the command, before the untimed check and clean-up. */
  const once = async (tag: string, go: (cwd: string) => Promise<BrokeredRun>, between?: () => Promise<void>) => {
    const cwd = def.prepare(`profile-${tag}`);
    if (def.heavy) execFileSync('sync');
    let run: BrokeredRun;
    try {
      run = await go(cwd);
    } finally {
      await between?.();
    }
    checkRun(def, 'brokered', run);
    def.after?.(cwd, 'brokered', run);
    return run;
  };
  // 1. The floor: the same command in the sandbox, every request allowed at once by a trivial handler.
  const floorRuns: BrokeredRun[] = [];
  const requests = result.requests?.perRun ?? 0;
  for (let i = 0; requests > 0 && i < 3; i += 1) floorRuns.push(await once(`floor-${i}`, (cwd) => ctx.runner.run(argv, cwd, ctx.env, { handler: answerAtOnce })));
  if (floorRuns.length > 0) {
    report.floor = {
      runs: floorRuns.length,
      wallMs: median(floorRuns.map((r) => r.wallMs)),
      handlerUs: median(floorRuns.map((r) => r.requests.meanUs)),
      requests: median(floorRuns.map((r) => r.requests.requests)),
      nativeMs: result.native.medianMs,
      brokeredMs: result.brokered.medianMs,
      brokeredRequests: requests,
      brokeredHandlerUs: result.requests?.meanUs ?? 0,
    };
  }
  // 2. CPU split: `COMMAND; times` prints the command's own CPU (shell + children).
  const timed = `${def.command}; times`;
  const nativeCwd = def.prepare('profile-times-native');
  const nativeRun = await timeProcess(() => startPlain('/bin/bash', ['-c', timed], { cwd: nativeCwd, env: ctx.env }), { keepStdout: true });
  checkRun(def, 'native', nativeRun);
  def.after?.(nativeCwd, 'native', nativeRun);
  const brokeredRun = await once('times', (cwd) => ctx.runner.run(['/bin/bash', '-c', timed], cwd, ctx.env, { keepStdout: true }));
  const nativeCommand = parseTimes(nativeRun.stdoutTail);
  const brokeredCommand = parseTimes(brokeredRun.stdoutTail);
  if (nativeCommand !== undefined && brokeredCommand !== undefined) {
    report.cpuSplit = {
      native: { wallMs: nativeRun.wallMs, commandCpuMs: nativeCommand },
      brokered: {
        wallMs: brokeredRun.wallMs,
        commandCpuMs: brokeredCommand,
        supervisorCpuMs: brokeredRun.childCpuMs - brokeredCommand,
        brokerCpuMs: brokeredRun.selfCpuMs,
        requests: brokeredRun.requests.requests,
      },
    };
  } else {
    report.notes.push('could not read bash `times` output: no CPU split');
  }
  if (requests === 0) {
    // Nothing reaches the broker: what costs is in the kernel, on the command's own syscalls.
    const cwd = def.prepare('profile-command-strace');
    const out = path.join(dir, `${def.id}.command.strace`);
    const run = await timeProcess(() => startPlain('strace', ['-f', '-c', '-o', out, '/bin/bash', '-c', def.command], { cwd, env: ctx.env }));
    checkRun(def, 'native', run);
    def.after?.(cwd, 'native', run);
    report.commandSyscalls = { wallMs: run.wallMs, rows: parseStraceSummary(readFileSync(out, 'utf8')) };
    if (perfAvailable(dir)) {
      // The command five times over in one recording each side: enough samples to compare function by function.
      const repeated = `for i in 1 2 3 4 5; do ${def.command}; done`;
      const nativeData = path.join(dir, `${def.id}.native.perf`);
      const nativeCwd = def.prepare('profile-perf-native');
      const nativePerf = await timeProcess(() => startPlain('perf', [...perfRecordArgs(nativeData), '/bin/bash', '-c', repeated], { cwd: nativeCwd, env: ctx.env }));
      checkRun(def, 'native', nativePerf);
      def.after?.(nativeCwd, 'native', nativePerf);
      const brokeredData = path.join(dir, `${def.id}.brokered.perf`);
      const wrapper = perfLauncherWrapper(dir, ctx.launcher, brokeredData);
      await once('perf', (c) => ctx.runner.run(['/bin/bash', '-c', repeated], c, ctx.env, { binaryPath: wrapper }));
      report.kernel = { native: kernelShare(nativeData), brokered: kernelShare(brokeredData) };
    } else {
      report.notes.push('perf not usable here: no kernel-side split');
    }
    return report;
  }
  // 3. Garbage collection in this process over one run, with no profiler attached.
  let gcSummary: GcSummary | undefined;
  const gcRun = await once('gc', async (cwd) => {
    const watched = await watchGc(() => ctx.runner.run(argv, cwd, ctx.env));
    gcSummary = watched.gc;
    return watched.result;
  });
  if (gcSummary) report.gc = { ...gcSummary, wallMs: gcRun.wallMs, requests: gcRun.requests.requests };
  // 4. CPU profile of this process (the broker side) around one run.
  const profileFile = path.join(dir, `${def.id}.cpuprofile`);
  const profiled = await once('cpu', (cwd) => profileThisProcess({ cpu: profileFile }, () => ctx.runner.run(argv, cwd, ctx.env)));
  report.run = { wallMs: profiled.wallMs, requests: profiled.requests.requests };
  const summary = summarizeProfile(profileFile, REPO_ROOT, 15);
  report.cpu = { busyMs: summary.busyMs, totalMs: summary.totalMs, selfByArea: summary.selfByArea, selfByFunction: summary.selfByFunction, inclusiveOwn: summary.inclusiveOwn };
  if (!straceAvailable()) {
    report.notes.push('strace not found: no syscall counts');
    return report;
  }
  // 5. The supervisor (the launcher process, not its command) under strace -c.
  const supervisorOut = path.join(dir, `${def.id}.supervisor.strace`);
  const wrapper = straceLauncherWrapper(dir, ctx.launcher, supervisorOut);
  const supervised = await once('strace-supervisor', (cwd) => ctx.runner.run(argv, cwd, ctx.env, { binaryPath: wrapper }));
  report.supervisor = { wallMs: supervised.wallMs, requests: supervised.requests.requests, rows: parseStraceSummary(readFileSync(supervisorOut, 'utf8')) };
  // 6. This process's threads (the broker: event loop and libuv pool) under strace -c, detached before the clean-up;
  // the same run samples allocations (strace slows the run, not what it allocates; the sampler would inflate GC in the CPU profile).
  const brokerOut = path.join(dir, `${def.id}.broker.strace`);
  const heapFile = path.join(dir, `${def.id}.heapprofile`);
  const attached = await straceThisProcess(brokerOut);
  let rows: SyscallRow[] = [];
  const brokerRun = await once(
    'strace-broker',
    (cwd) => profileThisProcess({ heap: heapFile }, () => ctx.runner.run(argv, cwd, ctx.env)),
    async () => {
      rows = await attached.stop();
    },
  );
  report.brokerSide = { wallMs: brokerRun.wallMs, requests: brokerRun.requests.requests, rows };
  report.heap = summarizeHeapProfile(heapFile, REPO_ROOT, 12);
  return report;
}

/** Whole-CLI startup: phases inside the CLI process, the launcher probe, a CPU profile of one CLI run. */
async function profileCli(def: CaseDef, ctx: Context, dir: string): Promise<ProfileReport> {
  const cwd = def.prepare('profile-cli');
  const runs = Math.max(5, ctx.options.cliRuns);
  const phases: CliPhases[] = [];
  for (let i = 0; i < runs; i += 1) phases.push(await measureCliPhases(REPO_ROOT, cwd, def.command, ctx.env));
  const pick = (key: keyof CliPhases) => median(phases.map((p) => p[key]));
  const checks: number[] = [];
  for (let i = 0; i < 10; i += 1) {
    const t0 = process.hrtime.bigint();
    checkSandboxSupport();
    checks.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  const profDir = path.join(dir, `${def.id}-cpu`);
  mkdirSync(profDir, { recursive: true });
  const run = await timeProcess(() =>
    startPlain(process.execPath, ['--cpu-prof', '--cpu-prof-dir', profDir, '--cpu-prof-interval', '100', CLI, 'run', '--workspace', cwd, '--', def.command], { cwd, env: ctx.env }),
  );
  checkRun(def, 'brokered', run);
  const report: ProfileReport = {
    id: def.id,
    label: def.label,
    run: { wallMs: run.wallMs, requests: 0 },
    cli: {
      runs,
      phases: {
        bootMs: pick('bootMs'),
        importMainMs: pick('importMainMs'),
        importRunMs: pick('importRunMs'),
        runMs: pick('runMs'),
        wallMs: pick('wallMs'),
        restMs: pick('restMs'),
      },
      checkMs: median(checks),
    },
    notes: [],
  };
  const file = newestProfile(profDir);
  if (file) {
    const summary = summarizeProfile(file, REPO_ROOT, 15);
    report.cpu = { busyMs: summary.busyMs, totalMs: summary.totalMs, selfByArea: summary.selfByArea, selfByFunction: summary.selfByFunction, inclusiveOwn: summary.inclusiveOwn };
  }
  return report;
}

export async function runKernelRuntime(options: KernelRuntimeOptions): Promise<KernelRuntimeReport> {
  const started = Date.now();
  const load = new MachineLoad();
  if (!existsSync(path.join(REPO_ROOT, 'dist', 'cli', 'main.js'))) {
    throw new Error('dist/ is missing: build first (`npx node-gyp rebuild && npx tsc -p tsconfig.build.json`)');
  }
  const base = benchTempDir('bsh-kernel-');
  const env = commandEnv(base);
  const placement = new RunPlacement();
  placement.spread(base);
  for (const dir of ['home', 'xdg', 'scratch', 'ws', 'prof']) mkdirSync(path.join(base, dir), { recursive: true });
  let python: string | undefined;
  try {
    python = execFileSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8', env }).trim() || undefined;
  } catch {
    python = undefined;
  }
  const cpus = os.cpus();
  const report: KernelRuntimeReport = {
    date: new Date().toISOString(),
    options: {
      runs: options.runs,
      heavyRuns: options.heavyRuns,
      warmup: options.warmup,
      readFiles: options.readFiles,
      sedFiles: options.sedFiles,
      createFiles: options.createFiles,
      gitFiles: options.gitFiles,
      startupRuns: options.startupRuns,
      cliRuns: options.cliRuns,
      profile: options.profile,
      ...(options.only ? { only: options.only.source } : {}),
      ...(options.profileOnly ? { profileOnly: options.profileOnly.source } : {}),
      ...(options.profileDir ? { profileDir: options.profileDir } : {}),
    },
    environment: {
      revision: revision(),
      loadavg: os.loadavg().map((l) => l.toFixed(2)).join(' '),
      node: process.version,
      cpus: cpus.length,
      cpu: cpus[0]?.model ?? 'unknown',
      kernel: os.release(),
      fs: toolVersion('findmnt', ['-n', '-o', 'FSTYPE', '-T', base]),
      bash: toolVersion('/bin/bash', ['-c', 'echo $BASH_VERSION']),
      grep: toolVersion('grep', ['--version']),
      sed: toolVersion('sed', ['--version']),
      git: toolVersion('git', ['--version']),
      ...(python ? { python: toolVersion(python, ['--version']) } : {}),
    },
    results: [],
    profiles: [],
    elapsedS: 0,
  };
  bundleCli(options.log);
  // A private copy of the launcher: a rebuild of build/ during the run can neither remove it nor mix versions.
  const launcher = path.join(base, 'brokered-sandbox');
  copyFileSync(locateSandboxBinary(), launcher);
  chmodSync(launcher, 0o755);
  const runner = new SandboxRunner(await loadProduct(REPO_ROOT), { launcher, env, writableRoots: [path.join(base, 'ws'), path.join(base, 'scratch')], scratch: path.join(base, 'scratch') });
  const ctx: Context = { runner, launcher, env, options };
  try {
    const cases = defineCases(base, options, env, python, placement).filter((c) => !options.only || options.only.test(c.id));
    const byId = new Map(cases.map((c) => [c.id, c]));
    // One warm-up for all the heavy cases: each brokered run takes seconds, and after the first the broker is warm.
    let heavyWarmup = options.warmup;
    for (const def of cases) {
      if (!def.heavy) continue;
      def.warmup = heavyWarmup;
      heavyWarmup = 0;
    }
    for (const def of cases) {
      options.log(`${def.id}: ${def.warmup} warm-up + ${def.runs} runs per side`);
      const t0 = Date.now();
      const result = await measureCase(def, ctx);
      report.results.push(result);
      options.log(
        `  native ${formatMs(result.native.medianMs)} ms, brokered ${formatMs(result.brokered.medianMs)} ms (${formatRatio(result.ratio)}, +${formatMs(result.extraMs)} ms)` +
          `${result.requests ? `, ${formatNumber(result.requests.perRun)} requests/run` : ''} [${((Date.now() - t0) / 1000).toFixed(1)} s]`,
      );
    }
    if (options.profile) {
      const dir = options.profileDir ? path.resolve(options.profileDir) : path.join(base, 'prof');
      mkdirSync(dir, { recursive: true });
      for (const result of report.results) {
        const def = byId.get(result.id);
        if (!def || (def.brokered === 'cli' && !def.target)) continue;
        const wanted = options.profileOnly ? options.profileOnly.test(def.id) : result.met === false;
        if (!wanted) continue;
        options.log(`profiling ${def.id}`);
        report.profiles.push(def.brokered === 'cli' ? await profileCli(def, ctx, dir) : await profileCase(def, result, ctx, dir));
      }
    }
  } finally {
    await runner.close().catch(() => undefined);
    rmSync(base, { recursive: true, force: true });
  }
  report.elapsedS = (Date.now() - started) / 1000;
  report.environment.placement = placement.describe();
  report.environment.otherLoad = `${(load.othersShare(cpus.length) * 100).toFixed(0)} %`;
  report.environment.loadavg += ` at the start, ${os.loadavg().map((l) => l.toFixed(2)).join(' ')} at the end`;
  return report;
}

export function parseOptions(argv: string[], env: NodeJS.ProcessEnv = process.env): KernelRuntimeOptions & { json?: string; help: boolean } {
  const { values } = parseArgs({
    args: argv,
    options: {
      runs: { type: 'string' },
      'heavy-runs': { type: 'string' },
      warmup: { type: 'string' },
      'read-files': { type: 'string' },
      'sed-files': { type: 'string' },
      'create-files': { type: 'string' },
      'git-files': { type: 'string' },
      'startup-runs': { type: 'string' },
      'cli-runs': { type: 'string' },
      only: { type: 'string' },
      profile: { type: 'boolean', default: false },
      'profile-only': { type: 'string' },
      'profile-dir': { type: 'string' },
      json: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  const options: KernelRuntimeOptions & { json?: string; help: boolean } = {
    runs: positiveInt('--runs', values.runs ?? env.BENCH_RUNS, 9),
    heavyRuns: positiveInt('--heavy-runs', values['heavy-runs'] ?? env.BENCH_HEAVY_RUNS, 3),
    warmup: positiveInt('--warmup', values.warmup ?? env.BENCH_WARMUP, 1, 0),
    readFiles: positiveInt('--read-files', values['read-files'] ?? env.BENCH_READ_FILES, 20_000),
    sedFiles: positiveInt('--sed-files', values['sed-files'] ?? env.BENCH_SED_FILES, 1_000),
    createFiles: positiveInt('--create-files', values['create-files'] ?? env.BENCH_CREATE_FILES, 10_000),
    gitFiles: positiveInt('--git-files', values['git-files'] ?? env.BENCH_GIT_FILES, 5_000, 0),
    startupRuns: positiveInt('--startup-runs', values['startup-runs'] ?? env.BENCH_STARTUP_RUNS, 30),
    cliRuns: positiveInt('--cli-runs', values['cli-runs'] ?? env.BENCH_CLI_RUNS, 15),
    profile: values.profile === true || values['profile-only'] !== undefined,
    log: (line) => process.stderr.write(`${line}\n`),
    help: values.help === true,
  };
  if (values.only) options.only = new RegExp(values.only);
  if (values['profile-only']) options.profileOnly = new RegExp(values['profile-only']);
  if (values['profile-dir']) options.profileDir = values['profile-dir'];
  if (values.json) options.json = values.json;
  return options;
}

const USAGE = `usage: node --import tsx bench/kernel-runtime.ts [options]
  --runs N           measured runs per side, read cases (env BENCH_RUNS, default 9)
  --heavy-runs N     measured runs per side, sed/create/git cases (env BENCH_HEAVY_RUNS, default 3)
  --warmup N         unrecorded runs per side first (env BENCH_WARMUP, default 1; of the sed, create
                     and git cases only the first selected one warms up)
  --read-files N     files in the read tree for grep -r and find | xargs cat (env BENCH_READ_FILES, 20000)
  --sed-files N      files for the sed -i cases, fresh each run (env BENCH_SED_FILES, 1000)
  --create-files N   files each create case makes (env BENCH_CREATE_FILES, 10000)
  --git-files N      files in the git add + commit case, 0 skips it (env BENCH_GIT_FILES, 5000)
  --startup-runs N   runs per side, library-level startup (env BENCH_STARTUP_RUNS, 30)
  --cli-runs N       runs per side, whole-CLI startup (env BENCH_CLI_RUNS, 15)
  --only REGEX       only cases whose id matches (startup-lib, startup-cli, startup-cli-node, read-grep,
                     read-cat, sed-batch, sed-each, create-bash, create-python, git-commit)
  --profile          then profile each case that missed its target, with extra runs: the sandbox
                     without the broker (floor), CPU split (bash times), GC, a CPU profile of the
                     broker (this process), allocations, strace -c of the supervisor and of the
                     broker's threads; for cases without requests perf of the command instead;
                     for the CLI its phases and a CPU profile
  --profile-only RE  profile these cases instead (implies --profile)
  --profile-dir DIR  keep the .cpuprofile and strace files there
  --json FILE        also write the raw results as JSON
`;

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  if (options.help) {
    process.stdout.write(USAGE);
    return;
  }
  const report = await runKernelRuntime(options);
  process.stdout.write(renderReport(report));
  if (options.json) writeFileSync(options.json, `${JSON.stringify(report, null, 2)}\n`);
  options.log(`done in ${report.elapsedS.toFixed(1)} s`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  });
}
