/**
 * Concurrent `brokered-shell run`s under load (shared by bench/load/concurrent-runs.ts,
 * the full size, and test/load/concurrent-runs.test.ts, the bounded form): R runs start
 * at once, each rewriting every one of its own N existing files (one notified open with
 * O_TRUNC each, so N first-touch backups), either each in its own session or all in one
 * session under one store. Each run's broker (the `run` Node process) is sampled for RSS
 * while it runs. Afterwards every run's backups are checked against what its files held
 * before: one turn per run, N entries, each blob equal to the file's previous bytes, no
 * entry of one run in another's turn or session.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BackupHome, type TurnManifest } from '../../src/backup/index.js';
import type { Durability } from '../../src/backup/settings.js';

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = path.join(REPO_ROOT, 'bin', 'brokered-shell.js');

export type SessionMode = 'separate' | 'shared';

export interface ConcurrentOptions {
  runs: number;
  filesPerRun: number;
  /** Bytes of each file before it is rewritten. */
  fileBytes: number;
  mode: SessionMode;
  /** The store's durability (backup/settings.ts), given to every run through a --policy file; default the store's ('each'). */
  durability?: Durability;
  /** RSS sampling period of each `run` process. */
  sampleMs?: number;
  /** Where the worlds go (default os.tmpdir()); removed afterwards unless `keep`. */
  tmpDir?: string;
  keep?: boolean;
}

export interface RunFigures {
  run: number;
  sessionId: string;
  status: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
  /** Largest RSS of the `run` process seen, bytes. */
  maxRssBytes: number;
  /** RSS samples taken. */
  samples: number;
  wallMs: number;
}

export interface ConcurrentResult {
  options: Required<Omit<ConcurrentOptions, 'tmpDir' | 'keep' | 'durability'>> & { durability: Durability | 'default' };
  runs: RunFigures[];
  /** Modifications the commands made (files rewritten). */
  ops: number;
  /** Manifest entries found, over all runs' turns. */
  entries: number;
  /** Files that changed without an entry holding their previous bytes (must be 0). */
  lostBackups: number;
  /** Entries found in a turn or session that is not their run's (must be 0). */
  crossed: number;
  /** Runs that did not end with 0, or whose turn is not exactly N entries. */
  problems: string[];
  maxRssBytes: number;
  wallMs: number;
}

const contentOf = (run: number, file: number, bytes: number) => {
  const line = `previous content of run ${run} file ${file}\n`;
  return Buffer.from(line.repeat(Math.ceil(bytes / line.length)).slice(0, bytes));
};

async function rssOf(pid: number): Promise<number | undefined> {
  const status = await fs.readFile(`/proc/${pid}/status`, 'utf8').catch(() => undefined);
  const match = status && /^VmRSS:\s+(\d+) kB$/m.exec(status);
  return match ? Number(match[1]) * 1024 : undefined;
}

/** One `run` process with its RSS sampled until it exits. */
function startRun(run: number, args: string[], env: NodeJS.ProcessEnv, sampleMs: number): Promise<RunFigures & { pid: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    let maxRssBytes = 0;
    let samples = 0;
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const pid = child.pid ?? -1;
    const sample = async () => {
      const rss = await rssOf(pid);
      if (rss === undefined) return;
      samples++;
      maxRssBytes = Math.max(maxRssBytes, rss);
    };
    const timer = setInterval(() => void sample(), sampleMs);
    child.once('error', (error) => {
      clearInterval(timer);
      reject(error);
    });
    child.once('close', (status, signal) => {
      clearInterval(timer);
      const sessionId = args[args.indexOf('--session') + 1] ?? '';
      resolve({ run, pid, sessionId, status, signal, stderr, maxRssBytes, samples, wallMs: performance.now() - started });
    });
  });
}

/** Runs the load and checks every backup; never throws for a failed check (see `problems`, `lostBackups`, `crossed`). */
export async function runConcurrent(options: ConcurrentOptions): Promise<ConcurrentResult> {
  if (!existsSync(path.join(REPO_ROOT, 'dist', 'cli', 'main.js'))) throw new Error('dist/ is missing: run `npx tsc -p tsconfig.build.json` first');
  const { runs, filesPerRun, fileBytes, mode } = options;
  const sampleMs = options.sampleMs ?? 50;
  const base = await fs.realpath(await fs.mkdtemp(path.join(options.tmpDir ?? os.tmpdir(), `bsh-load-${mode}-`)));
  try {
    const home = path.join(base, 'home');
    await fs.mkdir(home);
    const workspaces: string[] = [];
    for (let r = 0; r < runs; r++) {
      const ws = path.join(base, `ws-${r}`);
      await fs.mkdir(ws);
      for (let i = 0; i < filesPerRun; i++) await fs.writeFile(path.join(ws, `f-${i}`), contentOf(r, i, fileBytes));
      workspaces.push(ws);
    }
    const env: NodeJS.ProcessEnv = { ...process.env, BROKERED_SHELL_HOME: home, XDG_DATA_HOME: path.join(base, 'xdg'), BROKERED_SHELL_LOG_LEVEL: 'error' };
    delete env.NODE_OPTIONS;
    // One notified open(O_TRUNC) per file, from bash itself (no process per file).
    const command = `for f in f-*; do printf 'rewritten %s\\n' "$f" > "$f" || exit 1; done`;
    const sessionOf = (r: number) => (mode === 'shared' ? 'load-shared' : `load-${r}`);
    const policy = path.join(base, 'policy.json');
    if (options.durability) await fs.writeFile(policy, JSON.stringify({ backup: { durability: options.durability } }));
    const policyArgs = options.durability ? ['--policy', policy] : [];
    const started = performance.now();
    const figures = await Promise.all(
      workspaces.map((ws, r) => startRun(r, ['run', '--workspace', ws, '--session', sessionOf(r), ...policyArgs, '--message', `load run ${r}`, '--', command], env, sampleMs)),
    );
    const wallMs = performance.now() - started;

    const problems: string[] = [];
    let lostBackups = 0;
    let crossed = 0;
    let entries = 0;
    let ops = 0;
    const backupHome = new BackupHome({ home });
    const turnsBySession = new Map<string, TurnManifest[]>();
    for (const sessionId of await backupHome.listSessions()) turnsBySession.set(sessionId, await backupHome.listTurns({ sessionId }));
    const claimed = new Set<string>();
    for (const [r, ws] of workspaces.entries()) {
      const figure = figures[r];
      if (figure?.status !== 0) problems.push(`run ${r} ended with ${String(figure?.status)} ${String(figure?.signal)}: ${figure?.stderr.trim()}`);
      const prefix = `${ws}${path.sep}`;
      const turns = turnsBySession.get(sessionOf(r)) ?? [];
      // The run's turn: the one whose entries lie in its workspace (committed with its message).
      const mine = turns.filter((turn) => turn.message === `load run ${r}`);
      if (mine.length !== 1) problems.push(`run ${r}: ${mine.length} turns carry its message`);
      const turn = mine[0];
      if (turn) claimed.add(`${turn.sessionId}/${turn.id}`);
      const byPath = new Map((turn?.files ?? []).map((entry) => [entry.path, entry]));
      entries += byPath.size;
      for (const entry of turn?.files ?? []) if (!entry.path.startsWith(prefix)) crossed++;
      if (turn && turn.files.length !== filesPerRun) problems.push(`run ${r}: ${turn.files.length} entries, expected ${filesPerRun}`);
      const store = turn ? await backupHome.session(turn.sessionId) : undefined;
      for (let i = 0; i < filesPerRun; i++) {
        const file = path.join(ws, `f-${i}`);
        const now = await fs.readFile(file);
        const was = contentOf(r, i, fileBytes);
        if (now.equals(was)) continue;
        ops++;
        const entry = byPath.get(file);
        const saved = entry?.sha256 && store ? await store.readBlob(entry.sha256).catch(() => undefined) : undefined;
        if (!saved?.equals(was)) lostBackups++;
      }
    }
    // Turns that belong to no run: entries of some run that landed elsewhere.
    for (const [sessionId, turns] of turnsBySession) {
      for (const turn of turns) {
        if (claimed.has(`${sessionId}/${turn.id}`)) continue;
        crossed += turn.files.length;
        problems.push(`turn ${turn.id} of session ${sessionId} belongs to no run (${turn.files.length} entries)`);
      }
    }
    return {
      options: { runs, filesPerRun, fileBytes, mode, sampleMs, durability: options.durability ?? 'default' },
      runs: figures.map(({ pid: _pid, ...rest }) => rest),
      ops,
      entries,
      lostBackups,
      crossed,
      problems,
      maxRssBytes: Math.max(0, ...figures.map((f) => f.maxRssBytes)),
      wallMs,
    };
  } finally {
    if (!options.keep) await fs.rm(base, { recursive: true, force: true });
  }
}

export const mib = (bytes: number) => (bytes / (1024 * 1024)).toFixed(1);
