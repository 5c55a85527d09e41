import { closeSync, fstatSync, openSync, readFileSync } from 'node:fs';
import { access, constants, copyFile, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { resolveHome } from '../backup/layout.js';
import { native, type KernelProbe } from '../native/index.js';
import { locatePreloadLibrary } from '../sandbox/preload.js';
import { ExitCode } from './exit-codes.js';
import { describeError, printJson, table, type Io } from './output.js';

/** Landlock ABI 6 brings SCOPE_SIGNAL, which keeps the sandbox from signalling us. */
export const MIN_LANDLOCK_ABI = 6;

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
  /** Required by the seccomp runtime: without it `run` falls back to preload (or refuses `--runtime seccomp`). */
  required: boolean;
}

export interface DoctorReport {
  /** Some runtime can run commands here. */
  ok: boolean;
  /** The runtime `run` uses here by default. */
  runtime: 'seccomp' | 'preload' | 'none';
  /** Why that one, in words. */
  runtimeReason: string;
  kernel?: KernelProbe;
  checks: Check[];
}

const SECCOMP_REASON = 'Landlock + seccomp user notification';

export async function diagnose(env: NodeJS.ProcessEnv = process.env, workspace = process.cwd()): Promise<DoctorReport> {
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
      {
        name: 'seccomp synchronous wake-up',
        ok: kernel.seccompSyncWakeUp,
        detail: kernel.seccompSyncWakeUp
          ? 'available: a notified call hands its CPU to the supervisor (≈ 2 µs a round trip)'
          : `${note('sync_wake_up')}: the supervisor is woken on another CPU (slower, Linux 6.6+ has it)`,
        required: false,
      },
      { name: 'openat2', ok: kernel.openat2, detail: kernel.openat2 ? 'available' : note('openat2'), required: true },
      { name: 'pidfd_getfd', ok: kernel.pidfdGetfd, detail: kernel.pidfdGetfd ? 'available' : note('pidfd'), required: true },
      { name: 'fchmodat2', ok: kernel.fchmodat2, detail: kernel.fchmodat2 ? 'available' : note('fchmodat2'), required: true },
    );
  }
  const preload = preloadCheck();
  checks.push(preload);
  const home = resolveHome(env);
  checks.push(await storeCheck(home));
  checks.push(await storePlacementCheck(home, workspace));
  const seccomp = checks.every((c) => c.ok || !c.required);
  const { runtime, runtimeReason } = defaultRuntime(seccomp, checks, preload.ok, kernel);
  return { ok: runtime !== 'none', runtime, runtimeReason, ...(kernel ? { kernel } : {}), checks };
}

function preloadCheck(): Check {
  try {
    return { name: 'preload library', ok: true, detail: locatePreloadLibrary(), required: false };
  } catch (error) {
    return { name: 'preload library', ok: false, detail: describeError(error).split('\n')[0] ?? 'not built', required: false };
  }
}

/**
 * The runtime `run` picks by default and why: seccomp where every check it needs passed;
 * else preload (over Landlock when the kernel has any ABI of it) when the library is
 * built and the broker's addon loads; else none.
 */
export function defaultRuntime(seccomp: boolean, checks: readonly Check[], preloadBuilt: boolean, kernel: KernelProbe | undefined): Pick<DoctorReport, 'runtime' | 'runtimeReason'> {
  if (seccomp) return { runtime: 'seccomp', runtimeReason: SECCOMP_REASON };
  const missing = checks.filter((c) => c.required && !c.ok).map((c) => c.name);
  const why = `the seccomp runtime lacks ${missing.join(', ')}`;
  if (missing.includes('native addon')) return { runtime: 'none', runtimeReason: `${why}; the broker needs it for every runtime` };
  if (!preloadBuilt) return { runtime: 'none', runtimeReason: `${why}, and the preload library is not built` };
  const landlock = kernel && kernel.landlockAbi > 0 ? `over Landlock ABI ${kernel.landlockAbi}` : 'without Landlock, so its checks are advisory';
  return { runtime: 'preload', runtimeReason: `${why}; the preload library asks the broker from inside dynamically linked programs, ${landlock}` };
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

/**
 * Whether the store can keep files whole for the workspace (run from it): a file a change
 * removes is moved into the store only on the same file system and mount, and a file
 * changed in place is cloned only where that file system can. Not required: the store
 * copies what it cannot move or clone, and then the size cap applies.
 */
async function storePlacementCheck(home: string, workspace: string): Promise<Check> {
  const check = (ok: boolean, detail: string): Check => ({ name: 'backup store placement', ok, detail, required: false });
  const store = await nearestExisting(home);
  if (!store) return check(false, `${home}: no existing ancestor`);
  let same: boolean;
  try {
    same = mountOf(store) === mountOf(workspace);
  } catch (error) {
    return check(false, `cannot compare ${store} with ${workspace}: ${describeError(error)}`);
  }
  if (!same) {
    return check(false, `on another file system than ${workspace}: files a change removes are copied into the store instead of moved, and held to the size cap`);
  }
  const clones = await canClone(store);
  return check(true, `on the file system of ${workspace}: files a change removes are moved into the store; files changed in place are ${clones ? 'cloned (reflink)' : 'copied (no reflink here), held to the size cap'}`);
}

/** The device and mount a path is on (a bind mount shares the device, not the mount). */
function mountOf(file: string): string {
  const fd = openSync(file, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    const mount = /^mnt_id:\s*(\d+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))?.[1] ?? '?';
    return `${fstatSync(fd).dev}:${mount}`;
  } finally {
    closeSync(fd);
  }
}

async function nearestExisting(file: string): Promise<string | undefined> {
  for (let at = file; ; at = dirname(at)) {
    if ((await stat(at).catch(() => undefined))?.isDirectory()) return at;
    if (at === dirname(at)) return undefined;
  }
}

/** Whether a file in `dir` can be cloned (FICLONE) there: two temp files, gone again. */
async function canClone(dir: string): Promise<boolean> {
  const probe = await mkdtemp(join(dir, '.bsh-doctor-')).catch(() => undefined);
  if (!probe) return false;
  try {
    await writeFile(join(probe, 'a'), 'clone probe\n');
    await copyFile(join(probe, 'a'), join(probe, 'b'), constants.COPYFILE_FICLONE_FORCE);
    return true;
  } catch {
    return false;
  } finally {
    await rm(probe, { recursive: true, force: true });
  }
}

export async function doctorCommand(io: Io, options: { json?: boolean }): Promise<number> {
  const report = await diagnose();
  if (options.json) printJson(io, report);
  else {
    io.out(table(report.checks.map((c) => [c.ok ? 'ok' : c.required ? 'MISSING' : 'warn', c.name, c.detail])));
    io.out(report.runtime === 'none' ? 'runtime: none — `run` will refuse to start' : `runtime: ${report.runtime} (${report.runtimeReason})`);
  }
  return report.ok ? ExitCode.OK : ExitCode.FAILURE;
}
