import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** One row of `strace -c`. */
export interface SyscallRow {
  syscall: string;
  calls: number;
  errors: number;
  /** Seconds `strace -c` charged to the call (system time by default). */
  seconds: number;
  /** Its mean per call, µs. */
  usPerCall: number;
  share: number;
}

export function straceAvailable(): boolean {
  const result = spawnSync('strace', ['-V'], { encoding: 'utf8' });
  return result.status === 0;
}

/** Parse the summary table `strace -c -o FILE` writes (rows sorted by time, the total row dropped). */
export function parseStraceSummary(text: string): SyscallRow[] {
  const rows: SyscallRow[] = [];
  for (const line of text.split('\n')) {
    const match = /^\s*([\d.]+)\s+([\d.]+)\s+(\d+)\s+(\d+)\s+(?:(\d+)\s+)?([a-z_0-9]+)\s*$/.exec(line);
    if (!match || match[6] === 'total') continue;
    rows.push({
      share: Number(match[1]) / 100,
      seconds: Number(match[2]),
      usPerCall: Number(match[3]),
      calls: Number(match[4]),
      errors: Number(match[5] ?? 0),
      syscall: match[6] as string,
    });
  }
  return rows;
}

/**
 * An executable in `dir` that runs the real launcher under `strace -c` (only the
 * launcher, which is the supervisor: its forked child, the command, is not followed),
 * for `spawnSandboxed`'s `binaryPath`. The summary goes to `outFile`.
 */
export function straceLauncherWrapper(dir: string, realBinary: string, outFile: string): string {
  const quote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;
  const wrapper = path.join(dir, 'strace-launcher.sh');
  writeFileSync(wrapper, `#!/bin/sh\nexec strace -c -o ${quote(outFile)} -- ${quote(realBinary)} "$@"\n`);
  chmodSync(wrapper, 0o755);
  return wrapper;
}

/**
 * `strace -c` attached to every thread this process has now (listed one by one, not
 * with -f, so that the processes it spawns are not followed): the broker side of the
 * library-level runs. Call `stop()` to detach and read the summary.
 */
export async function straceThisProcess(outFile: string): Promise<{ stop(): Promise<SyscallRow[]> }> {
  const tids = readdirSync('/proc/self/task');
  const child = spawn('strace', ['-c', '-o', outFile, ...tids.flatMap((tid) => ['-p', tid])], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`strace did not attach: ${stderr}`)), 10_000);
    child.stderr.on('data', (chunk: string) => {
      stderr += chunk;
      if ((stderr.match(/attached/g) ?? []).length >= tids.length) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`strace exited with ${String(code)}: ${stderr}`));
    });
  });
  return {
    async stop() {
      child.kill('SIGINT');
      await exited;
      return parseStraceSummary(readFileSync(outFile, 'utf8'));
    },
  };
}
