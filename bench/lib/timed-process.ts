import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { clockTicks } from './proc-cpu.js';

/** A started process and how to learn that it is over. */
export interface StartedProcess {
  child: ChildProcess;
  exit: Promise<{ code: number | null; signal: string | null }>;
}

/** One timed run of one process (with its stdout drained and counted, its stderr kept). */
export interface TimedRun {
  /** From just before the spawn call to exit with stdout and stderr at their end. */
  wallMs: number;
  code: number | null;
  signal: string | null;
  stdoutBytes: number;
  /** The last 4 KiB of stderr. */
  stderrTail: string;
  /** The last 4 KiB of stdout, when asked for. */
  stdoutTail?: string;
  /** CPU (user + system, all threads) of this process during the run: for the brokered runs, the broker's side. */
  selfCpuMs: number;
  /**
   * CPU of the children this process reaped during the run, with their own reaped
   * descendants (`cutime + cstime` of `/proc/self/stat`, 10 ms ticks): the command
   * natively; supervisor + command when brokered.
   */
  childCpuMs: number;
}

/** `cutime + cstime` of this process in ms: CPU of every child (and its reaped descendants) already waited for. */
export function reapedChildrenCpuMs(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // Fields 16 and 17 of proc(5), counted after the command name: index 13 and 14 here.
  return ((Number(fields[13]) + Number(fields[14])) * 1000) / clockTicks();
}

async function drained(stream: Readable | null | undefined): Promise<void> {
  if (!stream) return;
  try {
    await finished(stream);
  } catch {
    // A stream destroyed with the process is over too.
  }
}

/** Time one process from spawn to exit; stdout (when piped) is counted, stderr (when piped) kept. */
export async function timeProcess(start: () => StartedProcess, options: { keepStdout?: boolean } = {}): Promise<TimedRun> {
  const cpuBefore = process.cpuUsage();
  const childrenBefore = reapedChildrenCpuMs();
  const startedAt = process.hrtime.bigint();
  const { child, exit } = start();
  let stdoutBytes = 0;
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    stdoutBytes += chunk.length;
    if (options.keepStdout) stdout = (stdout + chunk.toString('utf8')).slice(-4096);
  });
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-4096);
  });
  const [status] = await Promise.all([exit, drained(child.stdout), drained(child.stderr)]);
  const endedAt = process.hrtime.bigint();
  const cpu = process.cpuUsage(cpuBefore);
  return {
    wallMs: Number(endedAt - startedAt) / 1e6,
    code: status.code,
    signal: status.signal,
    stdoutBytes,
    stderrTail: stderr,
    ...(options.keepStdout ? { stdoutTail: stdout } : {}),
    selfCpuMs: (cpu.user + cpu.system) / 1000,
    childCpuMs: reapedChildrenCpuMs() - childrenBefore,
  };
}

export interface PlainSpawnOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** Default: no stdin, stdout and stderr piped. */
  stdio?: ['ignore' | 'pipe', 'ignore' | 'pipe', 'ignore' | 'pipe'];
}

/** `child_process.spawn` as a `StartedProcess` (the native side of every case). */
export function startPlain(file: string, args: readonly string[], options: PlainSpawnOptions): StartedProcess {
  const child = spawn(file, args, { cwd: options.cwd, env: options.env, stdio: options.stdio ?? ['ignore', 'pipe', 'pipe'] });
  const exit = new Promise<{ code: number | null; signal: string | null }>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  return { child, exit };
}
