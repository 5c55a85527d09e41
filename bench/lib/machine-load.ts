import { readFileSync } from 'node:fs';
import { reapedChildrenCpuMs } from './timed-process.js';

/** Busy CPU time of the whole machine (all CPUs, everything but idle and iowait), ms, from `/proc/stat`. */
function machineBusyMs(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
  // cpu user nice system idle iowait irq softirq steal guest guest_nice (in USER_HZ ticks, 100/s)
  const [, user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).map(Number);
  return ((user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0)) * 10;
}

/** How busy the machine was with other work over a stretch of time: what this process and its children did not use. */
export class MachineLoad {
  readonly #busy0 = machineBusyMs();
  readonly #ours0 = this.#ours();
  readonly #t0 = process.hrtime.bigint();

  #ours(): number {
    const cpu = process.cpuUsage();
    return (cpu.user + cpu.system) / 1000 + reapedChildrenCpuMs();
  }

  /** CPU used by other processes since construction, as a share of all CPUs' time (0..1). */
  othersShare(cpus: number): number {
    const elapsedMs = Number(process.hrtime.bigint() - this.#t0) / 1e6;
    const others = machineBusyMs() - this.#busy0 - (this.#ours() - this.#ours0);
    return elapsedMs > 0 ? Math.max(0, others) / (elapsedMs * cpus) : 0;
  }
}
