import { spawnSync } from 'node:child_process';
import { chmodSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** Sampling frequency of the `cpu-clock` software event: one sample per 100 µs of CPU. */
export const PERF_HZ = 10_000;

/** Whether `perf record` works here (installed, and allowed to sample). */
export function perfAvailable(dir: string): boolean {
  const out = path.join(dir, 'perf-probe.data');
  const result = spawnSync('perf', ['record', '-q', '-e', 'cpu-clock', '-o', out, '--', 'true'], { encoding: 'utf8' });
  return result.status === 0;
}

/** `perf record` of a program and everything it starts (CPU samples of the `cpu-clock` event). */
export function perfRecordArgs(outFile: string): string[] {
  return ['record', '-q', '-e', 'cpu-clock', '-F', String(PERF_HZ), '-o', outFile, '--'];
}

/** An executable that runs the real launcher under `perf record` (launcher, command and all children). */
export function perfLauncherWrapper(dir: string, realBinary: string, outFile: string): string {
  const quote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;
  const wrapper = path.join(dir, 'perf-launcher.sh');
  writeFileSync(wrapper, `#!/bin/sh\nexec perf ${perfRecordArgs(outFile).map(quote).join(' ')} ${quote(realBinary)} "$@"\n`);
  chmodSync(wrapper, 0o755);
  return wrapper;
}

export interface KernelShare {
  /** Samples in the command's processes (every comm except the launcher, perf and node). */
  samples: number;
  /** Of those, in the seccomp filter and syscall-entry tracing. */
  seccomp: number;
  /** Of those, in Landlock: its hooks, rule lookups and path walk. */
  landlock: number;
  /** Of those, in dentry/mount reference counting (what Landlock's walk up the path does at every level). */
  refcount: number;
  /** Samples per symbol (kernel and user), for comparing two runs. */
  bySymbol: Record<string, number>;
}

export const SECCOMP_SYMBOLS = /seccomp|^syscall_trace_enter$|^syscall_exit_work$|audit/;
export const LANDLOCK_SYMBOLS = /landlock|^hook_|^is_access_to_paths_allowed|^find_rule$|collect_domain_accesses|current_check_access|check_access_path/;
export const REFCOUNT_SYMBOLS = /^lockref_|^dget_parent$|^dput$|^mntget$|^mntput$/;
const NOT_THE_COMMAND = new Set(['brokered-sandbo', 'perf', 'perf-exec', 'node']);

/** Samples of the command's processes, per symbol, and how many sit in seccomp and in Landlock code. */
export function kernelShare(dataFile: string): KernelShare {
  const report = spawnSync('perf', ['report', '-i', dataFile, '--no-children', '--sort', 'comm,sym', '--stdio', '-g', 'none', '-n', '--percent-limit', '0'], {
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  const share: KernelShare = { samples: 0, seccomp: 0, landlock: 0, refcount: 0, bySymbol: {} };
  for (const line of report.stdout.split('\n')) {
    // "     0.56%           122  grep             [k] __seccomp_filter"
    const match = /^\s*[\d.]+%\s+(\d+)\s+(\S+)\s+\[[k.]\]\s+(\S+)/.exec(line);
    if (!match) continue;
    const samples = Number(match[1]);
    const comm = match[2] as string;
    const symbol = match[3] as string;
    if (NOT_THE_COMMAND.has(comm)) continue;
    share.samples += samples;
    if (SECCOMP_SYMBOLS.test(symbol)) share.seccomp += samples;
    else if (LANDLOCK_SYMBOLS.test(symbol)) share.landlock += samples;
    else if (REFCOUNT_SYMBOLS.test(symbol)) share.refcount += samples;
    share.bySymbol[symbol] = (share.bySymbol[symbol] ?? 0) + samples;
  }
  return share;
}

/** Symbols with the most added samples from `base` to `other`. */
export function symbolIncrease(base: KernelShare, other: KernelShare, limit = 10): Array<{ symbol: string; base: number; other: number }> {
  const symbols = new Set([...Object.keys(base.bySymbol), ...Object.keys(other.bySymbol)]);
  return [...symbols]
    .map((symbol) => ({ symbol, base: base.bySymbol[symbol] ?? 0, other: other.bySymbol[symbol] ?? 0 }))
    .sort((a, b) => b.other - b.base - (a.other - a.base))
    .slice(0, limit);
}
