import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach } from 'vitest';
import { SessionBackupStore, type TurnManifest } from '../../src/backup/index.js';
import { CLI, REPO_ROOT } from '../helpers/serve-process.js';
import { closeLater, closeOpened } from '../helpers/close-opened.js';

export { CLI, REPO_ROOT };

if (!existsSync(path.join(REPO_ROOT, 'dist', 'cli', 'main.js'))) {
  throw new Error('dist/ is missing: build it first with `npx tsc -p tsconfig.build.json`');
}

const made: string[] = [];

/** A fresh temp dir (realpath'd: manifests record resolved paths), removed after the test. */
export async function tempDir(prefix: string): Promise<string> {
  const dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), prefix)));
  made.push(dir);
  return dir;
}

afterEach(async () => {
  await closeOpened();
  while (made.length > 0) {
    const dir = made.pop();
    if (dir) await fs.rm(dir, { recursive: true, force: true });
  }
});

export interface CliResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Run `node bin/brokered-shell.js ARGS` as a real process with its store at `home`. */
/** The environment a test's CLI runs in: its own store, warnings only, colour left to the command. */
function cliEnv(options: { home: string; env?: NodeJS.ProcessEnv }): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, BROKERED_SHELL_HOME: options.home, BROKERED_SHELL_LOG_LEVEL: 'warn', ...options.env };
  delete env.FORCE_COLOR;
  return env;
}

export function cli(args: string[], options: { home: string; cwd?: string; env?: NodeJS.ProcessEnv }): CliResult {
  const result = spawnSync(process.execPath, [CLI, ...args], { cwd: options.cwd ?? REPO_ROOT, env: cliEnv(options), encoding: 'utf8' });
  if (result.error) throw result.error;
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** `cli` with stdout as bytes, exactly as the command wrote them. */
export function cliBytes(args: string[], options: { home: string; cwd?: string }): { status: number | null; stdout: Buffer; stderr: string } {
  const result = spawnSync(process.execPath, [CLI, ...args], { cwd: options.cwd ?? REPO_ROOT, env: cliEnv(options) });
  if (result.error) throw result.error;
  return { status: result.status, stdout: result.stdout, stderr: result.stderr.toString('utf8') };
}

/** `cli` for a command whose stdout is JSON; fails loudly (with stderr) when it is not. */
export function cliJson<T>(args: string[], options: { home: string; cwd?: string }): { status: number | null; json: T; stderr: string } {
  const result = cli(args, options);
  try {
    return { status: result.status, json: JSON.parse(result.stdout) as T, stderr: result.stderr };
  } catch {
    throw new Error(`not JSON (exit ${result.status}):\n${result.stdout}\nstderr:\n${result.stderr}`);
  }
}

/** A fixed clock, so commit times (and so `latest`) are known. */
export function clockAt(iso: string): () => Date {
  return () => new Date(iso);
}

/**
 * One committed turn made the way the broker makes it: open the store, back up each
 * path with its operation, let `change` modify the files, commit with `message`.
 */
export async function makeTurn(options: {
  home: string;
  sessionId: string;
  turnId: string;
  message: string;
  at: string;
  backups: Array<{ path: string; operation: string }>;
  /** Paths the turn makes where nothing was (recorded before `change` makes them). */
  created?: string[];
  change: () => Promise<void>;
}): Promise<TurnManifest> {
  const store = closeLater(await SessionBackupStore.open({ home: options.home, sessionId: options.sessionId, clock: clockAt(options.at) }));
  await store.beginTurn(options.turnId);
  for (const b of options.backups) await store.backup(b.path, { turnId: options.turnId, operation: b.operation, toolCallId: 'tool-1' });
  for (const file of options.created ?? []) await store.recordCreated(file, { turnId: options.turnId, operation: 'open' });
  await options.change();
  return store.commitTurn(options.turnId, options.message);
}

/** Bytes, permission bits and nanosecond mtime of a file: what a restore must bring back. */
export async function snapshot(file: string): Promise<{ bytes: Buffer; mode: number; mtimeNs: bigint }> {
  const stats = await fs.lstat(file, { bigint: true });
  return { bytes: await fs.readFile(file), mode: Number(stats.mode & 0o7777n), mtimeNs: stats.mtimeNs };
}

/** Write a file with a mode and an old, distinctive mtime, so a restore that loses either shows. */
export async function writeOld(file: string, content: string | Buffer, mode = 0o644, seconds = 1_000_000_000): Promise<string> {
  await fs.writeFile(file, content);
  await fs.chmod(file, mode);
  await fs.utimes(file, seconds, seconds);
  return file;
}

export const ANSI = /\u001b\[[0-9;]*m/;

export const sha256 = (bytes: string | Buffer) => createHash('sha256').update(bytes).digest('hex');
