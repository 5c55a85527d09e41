/**
 * Backup store micro-benchmark: `SessionBackupStore.backup()` called in-process (no
 * broker, no socket) on N distinct small files in ONE turn, then `commitTurn()`. Shows
 * whether the cost of a backup grows with the number of files already in the turn.
 *
 *   node --import tsx bench/backup-store.ts [--sizes 100,1000,5000] [--file-bytes 4096]
 *     [--slices 10] [--durability each|turn] [--label TEXT] [--json FILE]
 *
 * Each size is its own fresh store and turn in `os.tmpdir()` (removed afterwards). The
 * store runs from `src/` (through tsx), so the numbers are those of the working tree.
 * Per backup the clock covers the whole `await store.backup(...)`: lstat, blob copy and
 * hash, fsyncs, journal/manifest write. fsyncs are counted by lib/sync-counter.ts (both
 * doors the store syncs through). The markdown goes to stdout, progress to stderr. Not a test:
 * no vitest, no thresholds.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { SessionBackupStore } from '../src/backup/session-store.js';
import { durabilitySchema, type Durability } from '../src/backup/settings.js';
import { benchTempDir } from './lib/serve.js';
import { countSyncs, type SyncCounts } from './lib/sync-counter.js';
import { p50ByBucket, summarizeNs, type LatencySummary } from './lib/stats.js';
import { formatMicros, formatNumber, markdownTable } from './lib/table.js';

export interface BackupStoreBenchOptions {
  sizes: number[];
  fileBytes: number;
  slices: number;
  label: string;
  /** The store's durability (backup/settings.ts): fsyncs per backup ('each') or at the commit ('turn'). */
  durability: Durability;
}

export interface SizeResult {
  files: number;
  latency: LatencySummary;
  /** p50 over the last slice of the turn: the marginal cost of a backup at this size. */
  lastSliceP50Us: number;
  growth: Array<{ from: number; to: number; p50Us: number }>;
  fsyncPerBackup: number;
  fdatasyncPerBackup: number;
  commitMs: number;
  totalS: number;
  entries: number;
}

function makeFiles(dir: string, count: number, bytes: number): string[] {
  mkdirSync(dir, { recursive: true });
  const content = Buffer.alloc(bytes, 'x');
  const files: string[] = [];
  for (let i = 0; i < count; i += 1) {
    // 100 per directory, as a source tree would have them; distinct content per file.
    const sub = path.join(dir, `d${Math.floor(i / 100)}`);
    if (i % 100 === 0) mkdirSync(sub, { recursive: true });
    const file = path.join(sub, `f${i}.txt`);
    content.write(`${file}\n`);
    writeFileSync(file, content);
    files.push(file);
  }
  return files;
}

async function runSize(files: number, options: BackupStoreBenchOptions, counters: SyncCounts): Promise<SizeResult> {
  const base = benchTempDir('bsh-bench-store-');
  try {
    const paths = makeFiles(path.join(base, 'work'), files, options.fileBytes);
    const store = await SessionBackupStore.open({ home: path.join(base, 'home'), sessionId: 'bench', durability: options.durability });
    const turnId = '20260101-000000-bench0';
    await store.beginTurn(turnId);
    const samples = new Float64Array(files);
    const before = { ...counters };
    const started = process.hrtime.bigint();
    for (let i = 0; i < files; i += 1) {
      const t0 = process.hrtime.bigint();
      const entry = await store.backup(paths[i] as string, { turnId, operation: 'open' });
      samples[i] = Number(process.hrtime.bigint() - t0);
      if (!entry) throw new Error(`no entry for ${paths[i]}`);
      if ((i + 1) % 500 === 0) process.stderr.write(`  ${files} files: ${i + 1} backed up\n`);
    }
    const backedUp = process.hrtime.bigint();
    const fsyncs = counters.fsync - before.fsync;
    const fdatasyncs = counters.fdatasync - before.fdatasync;
    const manifest = await store.commitTurn(turnId, 'bench');
    const committed = process.hrtime.bigint();
    const growth = p50ByBucket(samples, options.slices);
    return {
      files,
      latency: summarizeNs(samples),
      lastSliceP50Us: growth.at(-1)?.p50Us ?? Number.NaN,
      growth,
      fsyncPerBackup: fsyncs / files,
      fdatasyncPerBackup: fdatasyncs / files,
      commitMs: Number(committed - backedUp) / 1e6,
      totalS: Number(backedUp - started) / 1e9,
      entries: manifest.files.length,
    };
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

export async function runBackupStoreBench(options: BackupStoreBenchOptions): Promise<SizeResult[]> {
  const { counts, stop } = await countSyncs();
  try {
    const out: SizeResult[] = [];
    for (const size of options.sizes) {
      process.stderr.write(`${options.label}: ${size} files of ${options.fileBytes} B in one turn\n`);
      out.push(await runSize(size, options, counts));
    }
    return out;
  } finally {
    stop();
  }
}

export function renderBackupStoreReport(options: BackupStoreBenchOptions, results: SizeResult[]): string {
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  const lines = [
    `## backup-store: ${options.label}`,
    '',
    `Node ${process.version}, ${os.cpus().length} × ${cpu}, ${os.platform()} ${os.release()}; files of ${formatNumber(options.fileBytes)} B, temp dir ${os.tmpdir()}, durability '${options.durability}'.`,
    '',
    markdownTable<SizeResult>(
      [
        { header: 'files in turn', align: 'right', value: (r) => formatNumber(r.files) },
        { header: 'mean µs/backup', align: 'right', value: (r) => formatMicros(r.latency.meanUs) },
        { header: 'p50 µs', align: 'right', value: (r) => formatMicros(r.latency.p50Us) },
        { header: 'p99 µs', align: 'right', value: (r) => formatMicros(r.latency.p99Us) },
        { header: `p50 µs, last ${Math.round(100 / options.slices)} %`, align: 'right', value: (r) => formatMicros(r.lastSliceP50Us) },
        { header: 'fsync/backup', align: 'right', value: (r) => r.fsyncPerBackup.toFixed(2) },
        { header: 'fdatasync/backup', align: 'right', value: (r) => r.fdatasyncPerBackup.toFixed(2) },
        { header: 'backups s', align: 'right', value: (r) => formatNumber(r.totalS, 2) },
        { header: 'commit ms', align: 'right', value: (r) => formatNumber(r.commitMs, 0) },
        { header: 'entries', align: 'right', value: (r) => formatNumber(r.entries) },
      ],
      results,
    ),
  ];
  const largest = results.at(-1);
  if (largest) {
    lines.push('', `p50 per slice of the ${formatNumber(largest.files)}-file turn:`, '');
    lines.push(
      markdownTable(
        [
          { header: 'files already in the turn', value: (g: SizeResult['growth'][number]) => `${formatNumber(g.from)}–${formatNumber(g.to - 1)}` },
          { header: 'p50 µs', align: 'right', value: (g: SizeResult['growth'][number]) => formatMicros(g.p50Us) },
        ],
        largest.growth,
      ),
    );
  }
  return `${lines.join('\n')}\n`;
}

export function parseBackupStoreOptions(argv: string[], env: NodeJS.ProcessEnv = process.env): BackupStoreBenchOptions & { json?: string } {
  const { values } = parseArgs({
    args: argv,
    options: {
      sizes: { type: 'string' },
      'file-bytes': { type: 'string' },
      slices: { type: 'string' },
      label: { type: 'string' },
      durability: { type: 'string' },
      json: { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) {
    process.stdout.write('node --import tsx bench/backup-store.ts [--sizes 100,1000,5000] [--file-bytes 4096] [--slices 10] [--durability each|turn] [--label TEXT] [--json FILE]\n');
    process.exit(0);
  }
  const positive = (text: string, what: string) => {
    const value = Number(text);
    if (!Number.isInteger(value) || value <= 0) throw new Error(`${what} must be a positive integer, got ${JSON.stringify(text)}`);
    return value;
  };
  const sizes = (values.sizes ?? env.BENCH_SIZES ?? '100,1000,5000').split(',').map((s) => positive(s.trim(), '--sizes'));
  const options: BackupStoreBenchOptions & { json?: string } = {
    sizes,
    fileBytes: positive(values['file-bytes'] ?? env.BENCH_FILE_BYTES ?? '4096', '--file-bytes'),
    slices: positive(values.slices ?? env.BENCH_SLICES ?? '10', '--slices'),
    label: values.label ?? env.BENCH_LABEL ?? 'working tree',
    durability: durabilitySchema.parse(values.durability ?? env.BENCH_DURABILITY ?? 'each'),
  };
  if (values.json !== undefined) options.json = values.json;
  return options;
}

async function main(): Promise<void> {
  const options = parseBackupStoreOptions(process.argv.slice(2));
  const results = await runBackupStoreBench(options);
  process.stdout.write(renderBackupStoreReport(options, results));
  if (options.json !== undefined) {
    writeFileSync(options.json, `${JSON.stringify({ options, node: process.version, results }, null, 2)}\n`);
  }
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  });
}
