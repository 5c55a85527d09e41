import { execFileSync } from 'node:child_process';
import { randomFillSync } from 'node:crypto';
import { constants, copyFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { KernelRequest } from '../../src/sandbox/protocol.js';
import { SOCKET_WARMUP, runSocketRoundtrip } from '../socket-roundtrip.js';
import type { Product } from './sandbox-runner.js';
import { benchTempDir } from './serve.js';
import { mountReflinkImage, type ReflinkMount } from './xfs-image.js';
import { median, ratePerSecond, summarizeNs } from './stats.js';

/** One in-process or socket micro-benchmark row: per-request latency and rate. */
export interface MicroRow {
  id: string;
  label: string;
  n: number;
  p50Us: number;
  p99Us: number;
  meanUs: number;
  reqPerSec: number;
  /** The target, when the brief sets one (p50 µs). */
  maxP50Us?: number;
}

export interface BackupRow {
  mode: 'copy' | 'reflink';
  /** The file system the files and the store were on. */
  where: string;
  /** Set when this mode cannot run here (no FICLONE on this file system). */
  unavailable?: string;
  files?: number;
  fileMiB?: number;
  msPerMiB?: number;
  mibPerSec?: number;
}

/** Text-token and JSON round trips over a real `brokered-shell serve` socket (bench/socket-roundtrip.ts), one connection. */
export async function socketRows(n: number, log: (line: string) => void): Promise<MicroRow[]> {
  const report = await runSocketRoundtrip({
    n,
    nConcurrent: n,
    warmup: SOCKET_WARMUP,
    firstTouch: 1,
    concurrency: [1],
    cpuProf: false,
    only: /^(echo|core|token-read|hostop-chmod)$/,
    log,
  });
  const labels: Record<string, string> = {
    echo: 'socket: echo server baseline (no broker)',
    core: 'socket: text token round trip, server and core only (no standard plugin)',
    'token-read': 'socket: text token `sandbox.read` round trip',
    'hostop-chmod': 'socket: JSON HostFileOperation chmod round trip',
  };
  return report.results.map((r) => ({
    id: `socket-${r.id}`,
    label: labels[r.id] ?? r.label,
    n: r.latency.n,
    p50Us: r.latency.p50Us,
    p99Us: r.latency.p99Us,
    meanUs: r.latency.meanUs,
    reqPerSec: r.reqPerSec,
    ...(r.server === 'echo' ? {} : { maxP50Us: 50 }),
  }));
}

const O_WRONLY = constants.O_WRONLY;
const O_CREAT = constants.O_CREAT;
const O_TRUNC = constants.O_TRUNC;

/**
 * The pipeline alone: `broker.handle` (through the kernel bridge's request mapping, as the
 * seccomp runtime calls it) with the standard plugins, no socket and no sandbox. Each
 * case warms up over its whole pool first (for the existing files: their first-touch backup).
 */
export async function pipelineRows(product: Product, n: number, log: (line: string) => void): Promise<MicroRow[]> {
  const base = benchTempDir('bsh-pipeline-');
  const { index, bridge } = product;
  const ws = path.join(base, 'ws');
  mkdirSync(ws, { recursive: true });
  const broker = new index.Broker({ sessionId: 'bench-pipeline', logger: index.createLogger({ level: 'error' }) });
  try {
    broker.use(...index.standardPlugins({ home: path.join(base, 'home'), writableRoots: [ws], backup: {} }));
    const handle = bridge.kernelBridge(broker, { toolCallId: 'bench-call', traceId: 'bench-trace' });
    mkdirSync(path.join(ws, 'absent'), { recursive: true });
    mkdirSync(path.join(ws, 'existing'), { recursive: true });
    const existing = Array.from({ length: 256 }, (_, i) => {
      const file = path.join(ws, 'existing', `f${i}.txt`);
      writeFileSync(file, `existing file ${i}\n`.repeat(64));
      return file;
    });
    const absent = Array.from({ length: 4096 }, (_, i) => path.join(ws, 'absent', `new${i}.txt`));
    const request = (op: KernelRequest['op'], file: string, flags: number, mode: number): KernelRequest => ({ id: 1, op, pid: process.pid, tgid: process.pid, flags, mode, follow: true, path: file });
    const creates = absent.map((f) => request('open', f, O_WRONLY | O_CREAT | O_TRUNC, 0o644));
    const cases: Array<{ id: string; label: string; pool: KernelRequest[]; evict?: boolean }> = [
      { id: 'pipeline-create', label: 'pipeline: open(O_CREAT) of an absent file', pool: creates },
      { id: 'pipeline-write', label: 'pipeline: open(O_TRUNC) of a file already backed up', pool: existing.map((f) => request('open', f, O_WRONLY | O_TRUNC, 0)) },
      { id: 'pipeline-mkdir', label: 'pipeline: mkdir of an absent directory', pool: absent.map((f) => request('mkdir', `${f}.d`, 0, 0o755)) },
      // In a real run the command and the supervisor run between two requests and push the
      // broker's code and data out of the caches; writing 8 MiB between requests does the same.
      { id: 'pipeline-create-cold', label: 'pipeline: open(O_CREAT), caches flushed before each (8 MiB written)', pool: creates, evict: true },
    ];
    const rows: MicroRow[] = [];
    await broker.beginTurn();
    for (const spec of cases) {
      log(`  ${spec.id}`);
      for (const req of spec.pool) await expectAllowed(handle, req);
      const samples = new Float64Array(n);
      const started = process.hrtime.bigint();
      for (let i = 0; i < n; i += 1) {
        if (spec.evict) evictCaches();
        const t0 = process.hrtime.bigint();
        await expectAllowed(handle, spec.pool[i % spec.pool.length] as KernelRequest);
        samples[i] = Number(process.hrtime.bigint() - t0);
      }
      // The flushing is not the broker's time: rate the requests alone then.
      const elapsed = spec.evict ? BigInt(Math.round(samples.reduce((sum, ns) => sum + ns, 0))) : process.hrtime.bigint() - started;
      const s = summarizeNs(samples);
      rows.push({ id: spec.id, label: spec.label, n, p50Us: s.p50Us, p99Us: s.p99Us, meanUs: s.meanUs, reqPerSec: ratePerSecond(n, elapsed) });
    }
    await broker.commitTurn('bench pipeline');
    return rows;
  } finally {
    await broker.close().catch(() => undefined);
    rmSync(base, { recursive: true, force: true });
  }
}

/** More than this machine's L2 per core (4 MiB), one write per cache line. */
const EVICTION = new Uint8Array(8 * 1024 * 1024);
function evictCaches(): void {
  for (let i = 0; i < EVICTION.length; i += 64) EVICTION[i] = (EVICTION[i] ?? 0) + 1;
}

async function expectAllowed(handle: (r: KernelRequest) => Promise<{ errno: number }>, req: KernelRequest): Promise<void> {
  const answer = await handle(req);
  if (answer.errno !== 0) throw new Error(`the broker answered errno ${answer.errno} for ${req.op} ${req.path}`);
}

/** Whether this file system clones (FICLONE) in `dir`; the error code when it does not. */
export function reflinkSupport(dir: string): true | string {
  const from = path.join(dir, 'probe-src');
  const to = path.join(dir, 'probe-dst');
  writeFileSync(from, 'probe');
  try {
    copyFileSync(from, to, constants.COPYFILE_FICLONE_FORCE);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code ?? 'error';
  } finally {
    rmSync(to, { force: true });
    rmSync(from, { force: true });
  }
}

/**
 * A backup's cost per MiB: `SessionBackupStore.backup()` (copy or clone, hash, fsyncs,
 * journal) of `files` distinct random files of `fileMiB` MiB each in one turn, per mode,
 * in the temp dir. Where that cannot clone (ext4), both modes again on an XFS image with
 * reflink (xfs-image.ts), so the clone is measured against a copy on the same file system.
 */
export async function backupRows(product: Product, files: number, fileMiB: number, log: (line: string) => void): Promise<BackupRow[]> {
  const base = benchTempDir('bsh-backup-mib-');
  try {
    const support = reflinkSupport(base);
    const tempDir = 'temp dir';
    const rows: BackupRow[] = [await measureBackups(product, base, tempDir, 'copy', files, fileMiB, log)];
    if (support === true) {
      rows.push(await measureBackups(product, base, tempDir, 'reflink', files, fileMiB, log));
      return rows;
    }
    rows.push({ mode: 'reflink', where: tempDir, unavailable: `n/a: no FICLONE here (${support})` });
    const xfs = 'XFS image (loop device)';
    let image: ReflinkMount;
    try {
      // Room for both modes' sources and their copies, and the file system's own log.
      image = mountReflinkImage(Math.max(512, 4 * files * fileMiB + 256));
    } catch (error) {
      rows.push({ mode: 'reflink', where: xfs, unavailable: `n/a: ${(error as Error).message}` });
      return rows;
    }
    try {
      for (const mode of ['copy', 'reflink'] as const) rows.push(await measureBackups(product, image.dir, xfs, mode, files, fileMiB, log));
    } finally {
      image.release();
    }
    return rows;
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

async function measureBackups(product: Product, dir: string, where: string, mode: BackupRow['mode'], files: number, fileMiB: number, log: (line: string) => void): Promise<BackupRow> {
  log(`  backup ${mode}, ${where}: ${files} × ${fileMiB} MiB`);
  const work = path.join(dir, `work-${mode}`);
  mkdirSync(work, { recursive: true });
  const content = Buffer.alloc(fileMiB * 1024 * 1024);
  const paths = Array.from({ length: files }, (_, i) => {
    const file = path.join(work, `${i}.bin`);
    randomFillSync(content);
    writeFileSync(file, content);
    return file;
  });
  // On disk before they are backed up, as a command's files usually are: a clone of a file
  // still being written back would wait for that writeback, which a copy from the page cache does not.
  execFileSync('sync', ['--file-system', work]);
  const store = await product.index.SessionBackupStore.open({ home: path.join(dir, `home-${mode}`), sessionId: 'bench', reflink: mode === 'reflink' });
  try {
    const turnId = '20260101-000000-bench0';
    await store.beginTurn(turnId);
    const perMiB: number[] = [];
    for (const file of paths) {
      const t0 = process.hrtime.bigint();
      const entry = await store.backup(file, { turnId, operation: 'open' });
      if (!entry) throw new Error(`no backup entry for ${file}`);
      perMiB.push(Number(process.hrtime.bigint() - t0) / 1e6 / fileMiB);
    }
    await store.commitTurn(turnId, 'bench');
    const msPerMiB = median(perMiB);
    return { mode, where, files, fileMiB, msPerMiB, mibPerSec: 1000 / msPerMiB };
  } finally {
    await store.close();
    rmSync(work, { recursive: true, force: true });
  }
}
