import { access, constants, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { resolveHome } from '../backup/layout.js';
import { native, type KernelProbe } from '../native/index.js';
import { ExitCode } from './exit-codes.js';
import { describeError, printJson, table, type Io } from './output.js';

/** Landlock ABI 6 brings SCOPE_SIGNAL, which keeps the sandbox from signalling us. */
export const MIN_LANDLOCK_ABI = 6;

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
  /** Required by the kernel runtime: `run` refuses to start without it. */
  required: boolean;
}

export interface DoctorReport {
  ok: boolean;
  runtime: 'seccomp' | 'none';
  kernel?: KernelProbe;
  checks: Check[];
}

export async function diagnose(env: NodeJS.ProcessEnv = process.env): Promise<DoctorReport> {
  const checks: Check[] = [];
  let kernel: KernelProbe | undefined;
  try {
    kernel = native().probeKernel();
  } catch (error) {
    checks.push({ name: 'native addon', ok: false, detail: describeError(error), required: true });
  }
  if (kernel) {
    const note = (word: string) => kernel?.notes.find((n) => n.toLowerCase().includes(word)) ?? 'missing';
    checks.push(
      { name: 'kernel', ok: true, detail: `${kernel.release} ${kernel.machine}`, required: false },
      {
        name: 'landlock',
        ok: kernel.landlockAbi >= MIN_LANDLOCK_ABI,
        detail: kernel.landlockAbi > 0 ? `ABI ${kernel.landlockAbi} (need ${MIN_LANDLOCK_ABI})` : note('landlock'),
        required: true,
      },
      { name: 'seccomp user notification', ok: kernel.seccompUserNotif, detail: kernel.seccompUserNotif ? 'available' : note('user'), required: true },
      { name: 'seccomp ADDFD_FLAG_SEND', ok: kernel.seccompAddfdSend, detail: kernel.seccompAddfdSend ? 'available' : note('addfd'), required: true },
      {
        name: 'seccomp WAIT_KILLABLE_RECV',
        ok: kernel.seccompWaitKillableRecv,
        detail: kernel.seccompWaitKillableRecv ? 'available' : note('killable'),
        required: true,
      },
      { name: 'openat2', ok: kernel.openat2, detail: kernel.openat2 ? 'available' : note('openat2'), required: true },
      { name: 'pidfd_getfd', ok: kernel.pidfdGetfd, detail: kernel.pidfdGetfd ? 'available' : note('pidfd'), required: true },
      { name: 'fchmodat2', ok: kernel.fchmodat2, detail: kernel.fchmodat2 ? 'available' : note('fchmodat2'), required: true },
    );
  }
  const home = resolveHome(env);
  checks.push(await storeCheck(home));
  const ok = checks.every((c) => c.ok || !c.required);
  return { ok, runtime: ok ? 'seccomp' : 'none', ...(kernel ? { kernel } : {}), checks };
}

async function storeCheck(home: string): Promise<Check> {
  const check = (ok: boolean, detail: string): Check => ({ name: 'backup store', ok, detail, required: false });
  try {
    if (!(await stat(home)).isDirectory()) return check(false, `${home} is not a directory`);
    await access(home, constants.W_OK | constants.X_OK);
    return check(true, `${home} writable`);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT') return check(false, `${home}: ${code ?? describeError(error)}`);
  }
  // Not there yet: it is made on first use if its nearest existing ancestor lets us.
  let ancestor = dirname(home);
  for (;;) {
    const stats = await stat(ancestor).catch(() => undefined);
    if (stats) {
      if (!stats.isDirectory()) return check(false, `${home} cannot be created: ${ancestor} is not a directory`);
      const writable = await access(ancestor, constants.W_OK | constants.X_OK).then(
        () => true,
        () => false,
      );
      return writable ? check(true, `${home} (created on first use)`) : check(false, `${home} cannot be created: ${ancestor} is not writable`);
    }
    if (ancestor === dirname(ancestor)) return check(false, `${home} cannot be created: no existing ancestor`);
    ancestor = dirname(ancestor);
  }
}

export async function doctorCommand(io: Io, options: { json?: boolean }): Promise<number> {
  const report = await diagnose();
  if (options.json) printJson(io, report);
  else {
    io.out(table(report.checks.map((c) => [c.ok ? 'ok' : c.required ? 'MISSING' : 'warn', c.name, c.detail])));
    io.out(report.ok ? 'runtime: seccomp (Landlock + seccomp user notification)' : 'runtime: none — `run` will refuse to start');
  }
  return report.ok ? ExitCode.OK : ExitCode.FAILURE;
}
