import dgram from 'node:dgram';
import { closeSync, fstatSync, openSync, readFileSync } from 'node:fs';
import { access, constants, copyFile, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { dirname, join } from 'node:path';
import { checkLauncher, storeLocationProblem } from '../agent/preflight.js';
import { resolveHome } from '../backup/layout.js';
import { loadConfig } from '../config/load.js';
import { native, nativeProblemLine, type KernelProbe } from '../native/index.js';
import { locateSandboxBinary } from '../sandbox/locate.js';
import { locatePreloadLibrary } from '../sandbox/preload.js';
import { ExitCode } from './exit-codes.js';
import { describeError, printJson, table, type Io } from './output.js';
import { rowsOf, unreadableFor, unreadableLines, type UnreadableRow } from './unreadable-list.js';

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
  /** What a command started now in the current directory could not read (the read policy). */
  unreadable: UnreadableRow[];
}

const SECCOMP_REASON = 'Landlock + seccomp user notification';
const LAUNCHER_CHECK = 'sandbox launcher';

export async function diagnose(env: NodeJS.ProcessEnv = process.env, workspace = process.cwd()): Promise<DoctorReport> {
  const checks: Check[] = [];
  let kernel: KernelProbe | undefined;
  try {
    kernel = native().probeKernel();
  } catch (error) {
    // One line: a table row (the addon's error lists each path tried on a line of its own).
    checks.push({ name: 'native addon', ok: false, detail: nativeProblemLine(error), required: true });
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
  checks.push(launcherCheck());
  const preload = preloadCheck();
  checks.push(preload);
  checks.push(...(await networkChecks(kernel)));
  const home = resolveHome(env);
  checks.push(await storeCheck(home));
  const reads = await readPolicyCheck(env, kernel);
  checks.push(reads.check);
  checks.push(await storePlacementCheck(home, workspace));
  const seccomp = checks.every((c) => c.ok || !c.required);
  const { runtime, runtimeReason } = defaultRuntime(seccomp, checks, preload.ok, kernel);
  return { ok: runtime !== 'none', runtime, runtimeReason, ...(kernel ? { kernel } : {}), checks, unreadable: reads.unreadable };
}

/** The read policy in force for a command started here now, and whether this kernel can keep it (Landlock). */
async function readPolicyCheck(env: NodeJS.ProcessEnv, kernel: KernelProbe | undefined): Promise<{ check: Check; unreadable: DoctorReport['unreadable'] }> {
  const check = (ok: boolean, detail: string): Check => ({ name: 'read policy', ok, detail, required: false });
  try {
    const loaded = await loadConfig({ workspace: process.cwd(), env });
    const found = await unreadableFor(loaded.config, loaded.workspace, env);
    const unreadable = rowsOf(found);
    const enforced = kernel !== undefined && kernel.landlockAbi > 0;
    const count = `${found.length} path${found.length === 1 ? '' : 's'} kept from commands' reads`;
    return { check: check(enforced, enforced ? `${count}, in the kernel (Landlock)` : `${count}, and no Landlock to keep them: run refuses to start`), unreadable };
  } catch (error) {
    return { check: check(false, (describeError(error).split('\n')[0] ?? '').trim()), unreadable: [] };
  }
}

/** Every runtime starts commands through the launcher, and it must answer as this version's does. */
function launcherCheck(): Check {
  try {
    const support = checkLauncher();
    return { name: LAUNCHER_CHECK, ok: true, detail: `${locateSandboxBinary()}${support.ok ? '' : ` (kernel check: ${support.message})`}`, required: true };
  } catch (error) {
    return { name: LAUNCHER_CHECK, ok: false, detail: error instanceof Error ? error.message : String(error), required: true };
  }
}

/** Whether a socket of this kind can listen on `host` (the DNS proxy's needs). */
async function canListen(kind: 'udp' | 'tcp', host: string): Promise<boolean> {
  return new Promise((resolve) => {
    if (kind === 'udp') {
      const socket = dgram.createSocket(host.includes(':') ? 'udp6' : 'udp4');
      socket.once('error', () => resolve(false));
      socket.bind(0, host, () => socket.close(() => resolve(true)));
      return;
    }
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(0, host, () => server.close(() => resolve(true)));
  });
}

/**
 * What of the network policy works here. Its connections and sends are decided by the
 * seccomp runtime's supervisor (the checks above); its DNS proxy listens on loopback; a
 * connect is cheaper where the kernel wakes the supervisor at once (6.6). The preload
 * runtime governs no connection, so it runs only with the network open.
 */
async function networkChecks(kernel: KernelProbe | undefined): Promise<Check[]> {
  const [udp4, tcp4, udp6, tcp6] = await Promise.all([canListen('udp', '127.0.0.1'), canListen('tcp', '127.0.0.1'), canListen('udp', '::1'), canListen('tcp', '::1')]);
  const [major = 0, minor = 0] = (kernel?.release ?? '').split(/[.-]/).map(Number);
  const syncWake = major > 6 || (major === 6 && minor >= 6);
  return [
    {
      name: 'network: DNS proxy on 127.0.0.1',
      ok: udp4 && tcp4,
      detail: udp4 && tcp4 ? 'UDP and TCP listen' : 'cannot listen there: a run under network.mode "allowlist" refuses to start',
      required: false,
    },
    { name: 'network: DNS proxy on ::1', ok: udp6 && tcp6, detail: udp6 && tcp6 ? 'UDP and TCP listen' : 'no IPv6 loopback: IPv6 resolvers cannot be reached', required: false },
    {
      name: 'network: fast supervisor wake-up',
      ok: syncWake,
      detail: syncWake ? 'SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (Linux 6.6+)' : 'Linux before 6.6: each connect pays a scheduler wake-up more',
      required: false,
    },
    { name: 'network: preload runtime', ok: false, detail: 'governs no connection: it starts only with network.mode "open"', required: false },
  ];
}

function preloadCheck(): Check {
  try {
    return { name: 'preload library', ok: true, detail: locatePreloadLibrary(), required: false };
  } catch (error) {
    return { name: 'preload library', ok: false, detail: nativeProblemLine(error), required: false };
  }
}

/**
 * The runtime `run` picks by default and why: seccomp where every check it needs passed;
 * else preload, over Landlock (any ABI: only Landlock keeps the read policy's paths from
 * a command), when the library is built and the broker's addon loads; else none.
 */
export function defaultRuntime(seccomp: boolean, checks: readonly Check[], preloadBuilt: boolean, kernel: KernelProbe | undefined): Pick<DoctorReport, 'runtime' | 'runtimeReason'> {
  if (seccomp) return { runtime: 'seccomp', runtimeReason: SECCOMP_REASON };
  const missing = checks.filter((c) => c.required && !c.ok).map((c) => c.name);
  const why = `the seccomp runtime lacks ${missing.join(', ')}`;
  if (missing.includes('native addon')) return { runtime: 'none', runtimeReason: `${why}; the broker needs it for every runtime` };
  if (missing.includes(LAUNCHER_CHECK)) return { runtime: 'none', runtimeReason: `${why}; every runtime starts commands through it` };
  if (!preloadBuilt) return { runtime: 'none', runtimeReason: `${why}, and the preload library is not built` };
  if (!kernel || kernel.landlockAbi <= 0) {
    return { runtime: 'none', runtimeReason: `${why}, and without Landlock nothing keeps the read policy's paths (the brokered-shell store, the secrets) from commands` };
  }
  return { runtime: 'preload', runtimeReason: `${why}; the preload library asks the broker from inside dynamically linked programs, over Landlock ABI ${kernel.landlockAbi}` };
}

async function storeCheck(home: string): Promise<Check> {
  const check = (ok: boolean, detail: string): Check => ({ name: 'backup store', ok, detail, required: false });
  const located = storeLocationProblem(home);
  if (located) return check(false, `${home} cannot hold the backup store: ${located}`);
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
    for (const line of unreadableLines(report.unreadable)) io.out(line);
    io.out(report.runtime === 'none' ? 'runtime: none — `run` will refuse to start' : `runtime: ${report.runtime} (${report.runtimeReason})`);
  }
  return report.ok ? ExitCode.OK : ExitCode.FAILURE;
}
