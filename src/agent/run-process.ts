import { spawn, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import { BoundedOutput } from './output-capture.js';
import { killTree, signalTree } from './process-tree.js';
import type { RunningCommand, StdinSource } from './types.js';

/** The three stdio entries a command is started with. */
export type CommandStdio = ['ignore' | 'inherit' | 'pipe', 'inherit' | 'pipe', 'inherit' | 'pipe'];

export function stdioFor(stdin: StdinSource, output: 'capture' | 'inherit'): CommandStdio {
  const input = stdin === 'ignore' || stdin === 'inherit' ? stdin : 'pipe';
  const out = output === 'inherit' ? 'inherit' : 'pipe';
  return [input, out, out];
}

export interface CommandExit {
  code: number | null;
  signal: string | null;
  /** Why the program could not be started at all (said on its stderr). */
  error?: string;
}

/** A started command, whatever started it. */
export interface StartedCommand {
  child: ChildProcess;
  exit: Promise<CommandExit>;
  /** Kill the command and everything it started. */
  killTree(): void;
  /** Send a signal to the command and everything it started. */
  signalTree(signal: NodeJS.Signals): void;
  /** Forget the call's network table once it is over (the sandbox's network policy). */
  detachNetwork?: () => void;
}

export interface FinishedCommand {
  exitCode: number;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  stdout: Buffer;
  stderr: Buffer;
  truncated: { stdout: boolean; stderr: boolean };
}

export interface FinishOptions {
  stdin: StdinSource;
  timeoutMs?: number;
  maxOutputBytes: number;
  onStart?: (command: RunningCommand) => void;
  /** Each chunk of the command's stdout and stderr as it comes (captured output only). */
  onStdout?: (chunk: Buffer) => void;
  onStderr?: (chunk: Buffer) => void;
  /** Run once the command exited, before its output is awaited (e.g. stop what it left behind). */
  afterExit?: () => void;
}

/** After a timeout's kill, how long to wait before killing the process we started itself. */
const KILL_GRACE_MS = 5_000;

/**
 * Feed stdin, collect stdout/stderr (bounded), enforce the timeout, and wait for the end:
 * the exit and both output streams closed.
 */
export async function finishCommand(started: StartedCommand, options: FinishOptions): Promise<FinishedCommand> {
  const { child } = started;
  const out = new BoundedOutput(options.maxOutputBytes);
  const err = new BoundedOutput(options.maxOutputBytes);
  const outputs = Promise.all([out.drain(child.stdout, options.onStdout), err.drain(child.stderr, options.onStderr)]);
  if (child.stdin) {
    // A command that exits without reading its input must not fail the call.
    child.stdin.on('error', () => undefined);
    const input = options.stdin;
    child.stdin.end(typeof input === 'string' || Buffer.isBuffer(input) ? input : undefined);
  }
  options.onStart?.({
    pid: child.pid,
    kill: (signal: NodeJS.Signals = 'SIGTERM') => child.kill(signal),
    signalAll: (signal: NodeJS.Signals = 'SIGTERM') => started.signalTree(signal),
  });
  let timedOut = false;
  let grace: NodeJS.Timeout | undefined;
  const timer =
    options.timeoutMs !== undefined && options.timeoutMs > 0
      ? setTimeout(() => {
          timedOut = true;
          started.killTree();
          grace = setTimeout(() => child.kill('SIGKILL'), KILL_GRACE_MS);
        }, options.timeoutMs)
      : undefined;
  try {
    const exit = await started.exit;
    options.afterExit?.();
    await outputs;
    if (exit.error !== undefined) {
      const line = `brokered-shell: ${exit.error}\n`;
      if (child.stderr) err.push(Buffer.from(line));
      else process.stderr.write(line);
    }
    return {
      ...exitStatus(exit, timedOut),
      timedOut,
      stdout: out.bytes(),
      stderr: err.bytes(),
      truncated: { stdout: out.truncated, stderr: err.truncated },
    };
  } finally {
    if (timer) clearTimeout(timer);
    if (grace) clearTimeout(grace);
  }
}

function exitStatus(exit: CommandExit, timedOut: boolean): { exitCode: number; signal: NodeJS.Signals | null } {
  const signal = exit.signal as NodeJS.Signals | null;
  if (exit.code !== null) return { exitCode: exit.code, signal: timedOut ? 'SIGKILL' : null };
  const number = signal ? (os.constants.signals[signal] ?? 0) : 0;
  return { exitCode: 128 + number, signal: signal ?? (timedOut ? 'SIGKILL' : null) };
}

export interface LocalCommandOptions {
  argv: readonly string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  stdio: CommandStdio;
}

/**
 * A command without the sandbox and without the broker: plain bash (or the raw program).
 * Unless it reads the caller's terminal, it gets its own process group, so a timeout
 * kills the group and what it left running when it exits is stopped, as in the sandbox.
 */
export function startLocal(options: LocalCommandOptions): StartedCommand & { stopLeftovers(): void } {
  const [program, ...args] = options.argv;
  if (program === undefined) throw new RangeError('argv must name a program');
  const ownGroup = options.stdio[0] !== 'inherit';
  const child = spawn(program, args, { cwd: options.cwd, env: options.env, stdio: options.stdio, detached: ownGroup });
  const exit = new Promise<CommandExit>((resolve) => {
    child.once('error', (error: NodeJS.ErrnoException) => {
      // Like a shell: 127 when the program is not found, 126 when it cannot be run.
      resolve({ code: error.code === 'ENOENT' ? 127 : 126, signal: null, error: `${program}: ${error.message}` });
    });
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  const signalGroup = (signal: NodeJS.Signals) => {
    if (child.pid === undefined) return;
    try {
      process.kill(-child.pid, signal);
    } catch {
      // The group is gone.
    }
  };
  return {
    child,
    exit,
    killTree: () => {
      if (ownGroup) signalGroup('SIGKILL');
      else if (child.pid !== undefined) killTree(child.pid, { includeRoot: true });
    },
    signalTree: (signal) => {
      if (ownGroup) signalGroup(signal);
      else if (child.pid !== undefined) signalTree(child.pid, signal, { includeRoot: true });
    },
    stopLeftovers: () => {
      if (ownGroup) signalGroup('SIGKILL');
    },
  };
}
