/**
 * Socket round-trip benchmark: a real `brokered-shell serve` on a real Unix socket,
 * driven by a lean closed-loop client (one request in flight per connection), next to
 * a trivial echo server answering `SANDBOX` so the broker's own cost is the difference.
 *
 *   node --import tsx bench/socket-roundtrip.ts [--n 20000] [--n-concurrent 10000] [--warmup 10000]
 *     [--first-touch 1000] [--concurrency 1,4,16] [--only REGEX] [--cpu-prof [--profile-dir DIR]]
 *
 * Needs the compiled dist/ (`npx tsc -p tsconfig.build.json`). Not a test: no vitest.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { BackupHome } from '../src/backup/index.js';
import { newestProfile, summarizeProfile, type ProfileEntry } from './lib/cpu-profile.js';
import { CORE_SESSION } from './lib/core-server.js';
import { startBaselineServer } from './lib/echo-server.js';
import { measure, type CaseResult, type CaseSpec, type MeasureOptions } from './lib/measure.js';
import { growthTable, profileTable, resultsTable } from './lib/report.js';
import { REPO_ROOT, benchTempDir, bundleCli, startServe, type ServeProcess } from './lib/serve.js';
import { formatNumber } from './lib/table.js';
import { positiveInt } from './lib/cli-options.js';

/**
 * Requests before a case is timed. A broker serves a whole session, so the rows report its
 * steady state; V8 takes thousands of requests to optimise everything one runs through
 * (text token p50 after 1,000: 62–66 µs; after 10,000: 43–51 µs, the same build).
 */
export const SOCKET_WARMUP = 10_000;

export interface RoundtripOptions extends MeasureOptions {
  /** Distinct files for the read-write first-touch (backup) case. */
  firstTouch: number;
  /** Only cases whose id matches. */
  only?: RegExp;
  /** Profile the serve process with `--cpu-prof` (slows it; numbers are then not comparable). */
  cpuProf: boolean;
  /** Where to keep the profile (default: a temp dir removed afterwards). */
  profileDir?: string;
}

export interface RoundtripReport {
  options: Omit<RoundtripOptions, 'log' | 'only'> & { only?: string };
  environment: { node: string; cpus: number; cpu: string; platform: string; release: string };
  results: CaseResult[];
  profile?: { file: string; busyMs: number; selfByArea: ProfileEntry[]; selfByFunction: ProfileEntry[]; inclusiveOwn: ProfileEntry[] };
}

/** Expected first bytes of every answer. */
const SANDBOX = 'SANDBOX\n';
const JSON_OK = '{"ok":true';
/** Contents of the files the read and read-write cases name (a typical small source file). */
const FILE_BYTES = 4096;

export function tokenLine(tokenClass: string, file: string, session: string, toolCallId: string): Buffer {
  return Buffer.from(`${tokenClass}\t${file}\t${session}\t${toolCallId}\n`);
}

function hostOpLine(fields: Record<string, string | number | boolean>, session: string): Buffer {
  return Buffer.from(`${JSON.stringify({ command: 'HostFileOperation', sessionId: session, ...fields })}\n`);
}

/** Entries in the manifest of the turn still open (uncommitted) in the serve's store. */
async function openTurnFileCount(serve: ServeProcess): Promise<number> {
  const turns = await new BackupHome({ home: serve.home }).listTurns({ sessionId: serve.session });
  return Math.max(-1, ...turns.filter((turn) => turn.committedAt === null).map((turn) => turn.files.length));
}

/** `count` files of FILE_BYTES in `dir`, each beginning with its own path. */
export function makeFiles(dir: string, prefix: string, count: number): string[] {
  mkdirSync(dir, { recursive: true });
  const content = Buffer.alloc(FILE_BYTES, 'x');
  const files: string[] = [];
  for (let i = 0; i < count; i += 1) {
    const file = path.join(dir, `${prefix}${i}.txt`);
    content.write(`${file}\n`);
    writeFileSync(file, content);
    files.push(file);
  }
  return files;
}

/** The broker cases, in an order that matters: first touch before steady state. */
function brokerCases(serve: ServeProcess, options: RoundtripOptions): CaseSpec[] {
  const { workspace, session } = serve;
  const readPool = makeFiles(path.join(workspace, 'read'), 'r', 256);
  const touchWarm = makeFiles(path.join(workspace, 'touch-warm'), 'w', Math.min(options.warmup, 500));
  const touched = makeFiles(path.join(workspace, 'touch'), 't', options.firstTouch);
  const chmodFile = makeFiles(path.join(workspace, 'chmod'), 'c', 1)[0] as string;
  const absentDir = path.join(workspace, 'absent');
  mkdirSync(absentDir, { recursive: true });
  const absentPool = Array.from({ length: 4096 }, (_, i) => path.join(absentDir, `new${i}.txt`));
  const mkdirRoot = path.join(workspace, 'mkdir');
  mkdirSync(mkdirRoot, { recursive: true });

  const pooled = (paths: readonly string[], line: (file: string, i: number) => Buffer) => {
    const buffers = paths.map(line);
    return () => buffers;
  };
  const rw = (file: string, i: number) => tokenLine('sandbox.read-write', file, session, `tc${i}`);
  return [
    {
      id: 'token-read',
      label: 'token .read, existing file',
      server: 'broker',
      expect: SANDBOX,
      requests: pooled(readPool, (file, i) => tokenLine('sandbox.read', file, session, `tc${i}`)),
    },
    {
      id: 'token-rw-new',
      label: 'token .read-write, absent file',
      server: 'broker',
      expect: SANDBOX,
      requests: pooled(absentPool, rw),
    },
    {
      id: 'token-rw-first',
      label: `token .read-write, existing, first touch (backup)`,
      server: 'broker',
      expect: SANDBOX,
      sequentialOnly: true,
      count: options.firstTouch,
      growth: true,
      requests: (tag) => (tag.startsWith('warm') ? touchWarm : touched).map(rw),
      // A fresh turn, so the measured files are the first of their turn as in real use.
      async beforeMeasure() {
        const answer = await serve.control({ command: 'CommitModifyBackup', commitMsg: 'bench warm-up' });
        if (answer.ok !== true) throw new Error(`commit failed: ${JSON.stringify(answer)}`);
      },
      async afterMeasure() {
        const backedUp = await openTurnFileCount(serve);
        if (backedUp < touched.length) throw new Error(`expected ${touched.length} backups in the open turn, found ${backedUp}`);
      },
    },
    {
      id: 'token-rw-steady',
      label: 'token .read-write, existing, already backed up',
      server: 'broker',
      expect: SANDBOX,
      // Warm-up covers every file, so the run is steady even when the first-touch case was skipped.
      minWarmup: touched.length,
      requests: pooled(touched, rw),
    },
    {
      id: 'hostop-chmod',
      label: 'HostFileOperation chmod, one file',
      server: 'broker',
      expect: JSON_OK,
      requests: pooled([chmodFile], (file) => hostOpLine({ operation: 'chmod', path: file, mode: '644' }, session)),
    },
    {
      id: 'hostop-mkdir',
      label: 'HostFileOperation mkdir, new dirs',
      server: 'broker',
      expect: JSON_OK,
      requests: (tag, count) =>
        Array.from({ length: count }, (_, i) => hostOpLine({ operation: 'mkdir', path: path.join(mkdirRoot, `${tag}-${i}`) }, session)),
    },
  ];
}

const ECHO_CASE: CaseSpec = {
  id: 'echo',
  label: 'echo baseline (answers SANDBOX)',
  server: 'echo',
  expect: SANDBOX,
  requests: () => [tokenLine('sandbox.read', path.join(os.tmpdir(), 'bench-echo', 'file.txt'), 'bench', 'tc0')],
};

const CORE_CASE: CaseSpec = {
  id: 'core',
  label: 'token .read, server and core only (one plugin allowing at once)',
  server: 'core',
  expect: SANDBOX,
  requests: () => [tokenLine('sandbox.read', path.join(os.tmpdir(), 'bench-core', 'file.txt'), CORE_SESSION, 'tc0')],
};

export async function runSocketRoundtrip(options: RoundtripOptions): Promise<RoundtripReport> {
  const selected = (spec: CaseSpec) => !options.only || options.only.test(spec.id);
  const results: CaseResult[] = [];
  const cpus = os.cpus();
  const { n, nConcurrent, warmup, firstTouch, concurrency, cpuProf, profileDir } = options;
  const report: RoundtripReport = {
    options: { n, nConcurrent, warmup, firstTouch, concurrency, cpuProf, ...(profileDir ? { profileDir } : {}), ...(options.only ? { only: options.only.source } : {}) },
    environment: { node: process.version, cpus: cpus.length, cpu: cpus[0]?.model ?? 'unknown', platform: os.platform(), release: os.release() },
    results,
  };

  // The baselines, each in a server process of its own: the echo server, then the product's server and core alone.
  const baselines: ReadonlyArray<[CaseSpec, 'echo' | 'core']> = [
    [ECHO_CASE, 'echo'],
    [CORE_CASE, 'core'],
  ];
  for (const [spec, kind] of baselines) {
    if (!selected(spec)) continue;
    options.log(`${kind} baseline`);
    const server = await startBaselineServer([], kind);
    try {
      results.push(...(await measure(server.socket, server.pid, spec, options)));
    } finally {
      await server.stop();
    }
  }

  // Profiling: the profile is written when serve exits cleanly (Shutdown), into a kept or a temp dir.
  const profileTemp = cpuProf && !profileDir ? benchTempDir('bsh-prof-') : undefined;
  const profileOut = cpuProf ? (profileDir ? path.resolve(profileDir) : profileTemp) : undefined;
  if (profileOut) mkdirSync(profileOut, { recursive: true });
  const broker = await startServe({ logLevel: 'warn', ...(profileOut ? { nodeArgs: ['--cpu-prof', '--cpu-prof-dir', profileOut] } : {}) });
  try {
    options.log(`broker pid ${broker.pid}${profileOut ? ` (profiling into ${profileOut})` : ''}`);
    for (const spec of brokerCases(broker, options)) {
      if (!selected(spec)) continue;
      options.log(spec.id);
      results.push(...(await measure(broker.socket, broker.pid, spec, options)));
    }
    const status = await broker.stop();
    if (status !== 0) options.log(`serve exited with ${String(status)}: ${broker.stderr()}`);
    else if (broker.stderr().trim()) options.log(`serve stderr (warn and above):\n${broker.stderr().trim().slice(-2000)}`);
    if (profileOut) {
      const file = newestProfile(profileOut);
      if (file) {
        const summary = summarizeProfile(file, REPO_ROOT);
        report.profile = {
          file: profileDir ? file : '(removed with the temp dir)',
          busyMs: summary.busyMs,
          selfByArea: summary.selfByArea,
          selfByFunction: summary.selfByFunction,
          inclusiveOwn: summary.inclusiveOwn,
        };
      }
    }
  } finally {
    broker.cleanup();
    if (profileTemp) rmSync(profileTemp, { recursive: true, force: true });
  }
  return report;
}

export function renderReport(report: RoundtripReport): string {
  const { environment: env, options } = report;
  const parts = [
    `## Socket round trips (${new Date().toISOString().slice(0, 10)})`,
    `Node ${env.node}, ${env.cpus} × ${env.cpu}, ${env.platform} ${env.release}; n ${formatNumber(options.n)} per sequential run and ${formatNumber(options.nConcurrent)} per concurrent run, warm-up ${formatNumber(options.warmup)}, first touch ${formatNumber(options.firstTouch)} files of ${FILE_BYTES} B${options.cpuProf ? '; serve under --cpu-prof (slower than normal)' : ''}.`,
    resultsTable(report.results),
  ];
  for (const result of report.results) {
    if (result.growth) parts.push(`First-touch p50 as the turn fills up (${result.label}):\n\n${growthTable(result)}`);
  }
  if (report.profile) {
    parts.push(`serve CPU profile: ${formatNumber(report.profile.busyMs)} ms busy; ${report.profile.file}`);
    parts.push(profileTable('Self time by area', report.profile.selfByArea));
    parts.push(profileTable('Self time by function', report.profile.selfByFunction));
    parts.push(profileTable('Inclusive time, our own functions', report.profile.inclusiveOwn));
  }
  return `${parts.join('\n\n')}\n`;
}

export function parseOptions(argv: string[], env: NodeJS.ProcessEnv = process.env): RoundtripOptions & { json?: string; help: boolean } {
  const { values } = parseArgs({
    args: argv,
    options: {
      n: { type: 'string' },
      'n-concurrent': { type: 'string' },
      warmup: { type: 'string' },
      'first-touch': { type: 'string' },
      concurrency: { type: 'string' },
      only: { type: 'string' },
      'cpu-prof': { type: 'boolean', default: false },
      'profile-dir': { type: 'string' },
      json: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  const concurrency = (values.concurrency ?? env.BENCH_CONCURRENCY ?? '1,4,16')
    .split(',')
    .map((part) => positiveInt('--concurrency', part.trim(), 1));
  const options: RoundtripOptions & { json?: string; help: boolean } = {
    n: positiveInt('--n', values.n ?? env.BENCH_N, 20_000),
    nConcurrent: positiveInt('--n-concurrent', values['n-concurrent'] ?? env.BENCH_N_CONCURRENT, 10_000),
    warmup: positiveInt('--warmup', values.warmup ?? env.BENCH_WARMUP, SOCKET_WARMUP, 0),
    firstTouch: positiveInt('--first-touch', values['first-touch'] ?? env.BENCH_FIRST_TOUCH, 1_000),
    concurrency: concurrency.length > 0 ? concurrency : [1],
    cpuProf: values['cpu-prof'] === true,
    log: (line) => process.stderr.write(`${line}\n`),
    help: values.help === true,
  };
  if (values.only) options.only = new RegExp(values.only);
  if (values['profile-dir']) options.profileDir = values['profile-dir'];
  if (values.json) options.json = values.json;
  return options;
}

const USAGE = `usage: node --import tsx bench/socket-roundtrip.ts [options]
  --n N              measured requests per case, sequential run (env BENCH_N, default 20000)
  --n-concurrent N   measured requests per concurrent run (env BENCH_N_CONCURRENT, default 10000)
  --warmup N         warm-up requests before each case (env BENCH_WARMUP, default 10000)
  --first-touch N    distinct files for the first-touch backup case (env BENCH_FIRST_TOUCH, default 1000)
  --concurrency LIST connection counts, 1 = sequential (env BENCH_CONCURRENCY, default 1,4,16)
  --only REGEX       only cases whose id matches (echo, core, token-read, token-rw-new, token-rw-first,
                     token-rw-steady, hostop-chmod, hostop-mkdir)
  --cpu-prof         run serve under node --cpu-prof and print where its time went
  --profile-dir DIR  keep the .cpuprofile there (open it in Chrome DevTools)
  --json FILE        also write the raw results as JSON
`;

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  if (options.help) {
    process.stdout.write(USAGE);
    return;
  }
  const started = Date.now();
  bundleCli(options.log);
  const report = await runSocketRoundtrip(options);
  process.stdout.write(renderReport(report));
  if (options.json) writeFileSync(options.json, `${JSON.stringify(report, null, 2)}\n`);
  options.log(`done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  });
}
