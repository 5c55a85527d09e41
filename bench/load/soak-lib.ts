/**
 * Soak (shared by bench/load/soak.ts, 60 s, and test/load/soak.test.ts, bounded): one
 * sandbox session of the library API (`createSandboxSession`) in this process runs
 * commands again and again, one turn each: every command rewrites the same N files
 * (N backups per turn), creates and deletes a file and a directory. Between commands,
 * with the session idle, this process's fd count (`/proc/self/fd`) and heap (after a
 * full GC) are sampled; after the warm-up they must stay flat.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import { createSandboxSession } from '../../src/agent/index.js';

export interface SoakOptions {
  durationMs: number;
  /** Files each command rewrites. */
  filesPerCommand: number;
  /** Commands before the baseline is taken (module loading, caches, pools warming up). */
  warmup: number;
  tmpDir?: string;
}

export interface SoakSample {
  command: number;
  fds: number;
  heapUsed: number;
  rss: number;
}

export interface SoakResult {
  commands: number;
  /** Backups over all turns (must be commands × filesPerCommand). */
  backups: number;
  /** Commands that did not exit 0 or whose turn did not commit with N backups. */
  failures: string[];
  samples: SoakSample[];
  /** fds before the session was created, and after it was closed. */
  fdsBeforeSession: number;
  fdsAfterClose: number;
  /** After the warm-up: the first sample's fds, the largest, and the last. */
  fdBaseline: number;
  fdMax: number;
  fdFinal: number;
  /** Least-squares slope of heapUsed over the commands after the warm-up, bytes per command. */
  heapSlopeBytesPerCommand: number;
  heapBaseline: number;
  heapFinal: number;
  heapMax: number;
  rssMax: number;
  wallMs: number;
}

/** A full GC: the one node was started with (--expose-gc), else one enabled now. */
export function fullGc(): () => void {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (exposed) return exposed;
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

export async function fdCount(): Promise<number> {
  return (await fs.readdir('/proc/self/fd')).length;
}

/** Least-squares slope of y over x. */
export function slope(points: ReadonlyArray<{ x: number; y: number }>): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((s, p) => s + p.x, 0) / n;
  const my = points.reduce((s, p) => s + p.y, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.x - mx) * (p.y - my);
    den += (p.x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

export async function runSoak(options: SoakOptions): Promise<SoakResult> {
  const gc = fullGc();
  const base = await fs.realpath(await fs.mkdtemp(path.join(options.tmpDir ?? os.tmpdir(), 'bsh-soak-')));
  const ws = path.join(base, 'ws');
  const home = path.join(base, 'home');
  await fs.mkdir(ws);
  await fs.mkdir(home);
  for (let i = 0; i < options.filesPerCommand; i++) await fs.writeFile(path.join(ws, `f-${i}`), `file ${i} before the soak\n`);
  const env: NodeJS.ProcessEnv = { ...process.env, LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8', XDG_DATA_HOME: path.join(base, 'xdg') };
  delete env.BROKERED_SHELL_SOCKET;
  gc();
  const fdsBeforeSession = await fdCount();
  const session = await createSandboxSession({ workspace: ws, home, sessionId: 'soak', env });
  const samples: SoakSample[] = [];
  const failures: string[] = [];
  let backups = 0;
  const started = performance.now();
  try {
    for (let k = 0; k < options.warmup || performance.now() - started < options.durationMs; k++) {
      await session.beginTurn({ userMessage: `soak ${k}` });
      const result = await session.execute(
        `for f in f-*; do echo "command ${k}" > "$f"; done; echo x > new-${k}; rm new-${k}; mkdir d-${k}; rmdir d-${k}`,
      );
      const ended = await session.endTurn();
      backups += ended.files;
      if (result.exitCode !== 0) failures.push(`command ${k} exited ${result.exitCode}: ${result.stderr.trim()}`);
      if (!ended.ok || ended.files !== options.filesPerCommand) failures.push(`turn of command ${k}: ${ended.ok ? `${ended.files} backups` : ended.error}`);
      gc();
      const memory = process.memoryUsage();
      samples.push({ command: k, fds: await fdCount(), heapUsed: memory.heapUsed, rss: memory.rss });
    }
  } finally {
    await session.close();
  }
  const wallMs = performance.now() - started;
  gc();
  const fdsAfterClose = await fdCount();
  await fs.rm(base, { recursive: true, force: true });

  const steady = samples.filter((s) => s.command >= options.warmup);
  const first = steady[0] ?? samples.at(-1);
  const last = samples.at(-1);
  return {
    commands: samples.length,
    backups,
    failures,
    samples,
    fdsBeforeSession,
    fdsAfterClose,
    fdBaseline: first?.fds ?? 0,
    fdMax: Math.max(0, ...steady.map((s) => s.fds)),
    fdFinal: last?.fds ?? 0,
    heapSlopeBytesPerCommand: slope(steady.map((s) => ({ x: s.command, y: s.heapUsed }))),
    heapBaseline: first?.heapUsed ?? 0,
    heapFinal: last?.heapUsed ?? 0,
    heapMax: Math.max(0, ...steady.map((s) => s.heapUsed)),
    rssMax: Math.max(0, ...samples.map((s) => s.rss)),
    wallMs,
  };
}
