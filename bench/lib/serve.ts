import { execFileSync, spawn, type ChildProcess, type ChildProcessByStdio } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';

/** The repository root, found from this file (bench/lib/serve.ts). */
export const REPO_ROOT = realpathSync(fileURLToPath(new URL('../..', import.meta.url)));
export const CLI = path.join(REPO_ROOT, 'bin', 'brokered-shell.js');

/**
 * Bring dist/bundle up to date with dist/ (the bundler is deterministic: an unchanged tree
 * keeps its bundle id and code cache). A `tsc` after the last bundle leaves it stale, and
 * the bin then silently runs dist/ instead: the CLI rows would time a launcher nobody runs
 * (≈ 370 against ≈ 115 ms here).
 */
export function bundleCli(log: (line: string) => void): void {
  const printed = execFileSync(process.execPath, [path.join(REPO_ROOT, 'toolchain', 'bundle-cli.mjs')], { cwd: REPO_ROOT, encoding: 'utf8' });
  log(printed.trim());
}

/** A private temp directory (symlinks resolved, so paths match what the broker normalises to). */
export function benchTempDir(prefix: string): string {
  return realpathSync(mkdtempSync(path.join(os.tmpdir(), prefix)));
}

export interface StartServeOptions {
  session?: string;
  /** Log level of the serve process (default warn: logging each request would dominate). */
  logLevel?: string;
  /** Node flags for the serve process, e.g. `['--cpu-prof', '--cpu-prof-dir', dir]`. */
  nodeArgs?: string[];
  extraArgs?: string[];
}

export interface ServeProcess {
  readonly child: ChildProcessByStdio<Writable, Readable, Readable>;
  readonly pid: number;
  readonly socket: string;
  /** Temp root holding home, xdg, workspace and socket directory. */
  readonly base: string;
  readonly home: string;
  readonly workspace: string;
  readonly session: string;
  /** Send one control line on stdin and wait for its JSON answer. */
  control(message: Record<string, unknown>): Promise<Record<string, unknown>>;
  stderr(): string;
  /** Ask for a clean Shutdown (commits the turn; lets `--cpu-prof` write its profile). */
  stop(timeoutMs?: number): Promise<number | null>;
  /** Kill if still running and remove every temp file. */
  cleanup(): void;
}

/**
 * Start a real `brokered-shell serve` from the compiled `dist/` with its workspace,
 * `BROKERED_SHELL_HOME` and `XDG_DATA_HOME` all in one temp dir, and wait for ready.
 */
export async function startServe(options: StartServeOptions = {}): Promise<ServeProcess> {
  if (!existsSync(path.join(REPO_ROOT, 'dist', 'cli', 'main.js'))) {
    throw new Error('dist/ is missing: build first with `npx tsc -p tsconfig.build.json`');
  }
  const session = options.session ?? 'bench';
  const base = benchTempDir('bsh-bench-');
  const home = path.join(base, 'home');
  const workspace = path.join(base, 'ws');
  const socket = path.join(base, 'sock', 'broker.sock');
  mkdirSync(workspace, { recursive: true });
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    BROKERED_SHELL_HOME: home,
    XDG_DATA_HOME: path.join(base, 'xdg'),
    BROKERED_SHELL_LOG_LEVEL: options.logLevel ?? 'warn',
  };
  const child = spawn(
    process.execPath,
    [...(options.nodeArgs ?? []), CLI, 'serve', '--socket', socket, '--session', session, '--workspace', workspace, ...(options.extraArgs ?? [])],
    { env, stdio: ['pipe', 'pipe', 'pipe'], cwd: base },
  );
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => {
    // Keep the tail only: a warn-level broker is quiet, but a noisy one must not eat memory.
    stderr = (stderr + chunk).slice(-64 * 1024);
  });
  const waiting: Array<(value: Record<string, unknown>) => void> = [];
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const lines = createInterface({ input: child.stdout });
  try {
    await new Promise<void>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`serve exited with ${String(code)} before ready: ${stderr}`)));
      child.once('error', reject);
      lines.on('line', (line) => {
        const value = JSON.parse(line) as Record<string, unknown>;
        if (value.ready === true) resolve();
        else waiting.shift()?.(value);
      });
    });
  } catch (error) {
    rmSync(base, { recursive: true, force: true });
    throw error;
  }
  return {
    child,
    pid: child.pid ?? -1,
    socket,
    base,
    home,
    workspace,
    session,
    stderr: () => stderr,
    control(message) {
      return new Promise((resolve) => {
        waiting.push(resolve);
        child.stdin.write(`${JSON.stringify(message)}\n`);
      });
    },
    async stop(timeoutMs = 30_000) {
      if (child.exitCode !== null) return child.exitCode;
      child.stdin.write(`${JSON.stringify({ command: 'Shutdown' })}\n`);
      return waitExit(child, exited, timeoutMs);
    },
    cleanup() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      rmSync(base, { recursive: true, force: true });
    },
  };
}

async function waitExit(child: ChildProcess, exited: Promise<number | null>, timeoutMs: number): Promise<number | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  const result = await Promise.race([exited, timeout]);
  clearTimeout(timer);
  if (result !== 'timeout') return result;
  child.kill('SIGKILL');
  return exited;
}
