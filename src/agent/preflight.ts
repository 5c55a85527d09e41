import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, mkdir, open, rm, stat, statfs } from 'node:fs/promises';
import path from 'node:path';
import { sessionsDir } from '../backup/layout.js';
import { fsyncDir } from '../backup/fs-util.js';
import { BrokerError, ErrorCodes, errnoOf } from '../core/errors.js';
import { native, nativeProblemLine, REBUILD_HINT } from '../native/loader.js';
import type { SandboxSupport } from '../sandbox/info.js';
import { locateSandboxBinary } from '../sandbox/locate.js';
import { SandboxUnavailableError } from './errors.js';

/**
 * What a session checks before it starts anything, so that a command never starts only to
 * fail halfway (a git command dying at its first backup because the addon is missing): the
 * addon loads with every function this version calls, the launcher is there and answers its
 * kernel check as its contract says, and, where every change must be backed up, the store
 * can be made and written. Each failure is one line, thrown before any command runs.
 */

/** The launcher's `--check` contract (native/sandbox/main.c): "ok" and 0, or a reason on stderr and 126. */
const CHECK_UNSUPPORTED = 126;

/** The addon loads and has every function this version calls; SandboxUnavailableError otherwise. */
export function checkAddon(): void {
  try {
    native();
  } catch (error) {
    throw new SandboxUnavailableError(nativeProblemLine(error), { cause: error });
  }
}

/**
 * The launcher is there and answers `--check` within its contract: what it says of this
 * kernel (for choosing the runtime). A launcher that cannot be run, dies, or answers
 * otherwise (a build older than this package's sources, or for another machine) is
 * SandboxUnavailableError: every runtime starts commands through it.
 */
export function checkLauncher(binary?: string): SandboxSupport {
  let launcher: string;
  try {
    launcher = binary ?? locateSandboxBinary();
  } catch (error) {
    throw new SandboxUnavailableError(nativeProblemLine(error), { cause: error });
  }
  const result = spawnSync(launcher, ['--check'], { encoding: 'utf8' });
  const stdout = result.stdout?.trim() ?? '';
  const stderr = result.stderr?.trim() ?? '';
  if (result.status === 0 && stdout === 'ok') return { ok: true, message: 'ok' };
  // A launcher without --check (older than its contract) refuses it as an unknown option.
  if (result.status === CHECK_UNSUPPORTED && stderr !== '' && !stderr.includes('unknown or incomplete option')) return { ok: false, message: stderr };
  const answer = result.error
    ? result.error.message
    : `${result.signal ? `killed by ${result.signal}` : `exit ${String(result.status)}`}${stderr ? `: ${stderr.split('\n')[0] ?? ''}` : ''}`;
  throw new SandboxUnavailableError(
    `the launcher ${launcher} does not answer --check as this version's does (${answer}): a stale build, or one for another machine; ${REBUILD_HINT}`,
  );
}

/** procfs's f_type (statfs(2)). */
const PROC_SUPER_MAGIC = 0x9fa0;

/**
 * Why `home` cannot be a store whatever is on disk, or undefined. Under /proc, names stand
 * for other places (`/proc/self/cwd` is each process's own directory) and mkdir never
 * succeeds (Node's recursive mkdir spins on it for ever).
 */
export function storeLocationProblem(home: string): string | undefined {
  const absolute = path.resolve(home);
  if (absolute === '/proc' || absolute.startsWith('/proc/')) return 'it is under /proc';
  return undefined;
}

function storeUnavailable(home: string, why: string, cause?: unknown): BrokerError {
  return new BrokerError(ErrorCodes.STORE_UNAVAILABLE, `${home} cannot hold the backup store: ${why}`, cause === undefined ? {} : { cause });
}

/**
 * Whether `home` can hold the backup store: `possible` looks without changing anything (not
 * under /proc, nor on procfs through a link); `usable` also makes the store root if it is
 * missing (one level at a time, 0700, each new name made durable) and proves it writable by
 * creating and removing a file in it. Throws STORE_UNAVAILABLE saying why not.
 */
export async function checkStore(home: string, need: 'possible' | 'usable' = 'usable'): Promise<void> {
  const located = storeLocationProblem(home);
  if (located) throw storeUnavailable(home, located);
  const missing: string[] = [];
  let existing = path.resolve(home);
  for (;;) {
    let found = true;
    try {
      await lstat(existing);
    } catch (error) {
      found = false;
      // Any other failure is the store's to report when it is used (`possible`: backups off).
      if (errnoOf(error) !== 'ENOENT') {
        if (need === 'possible') return;
        throw storeUnavailable(home, `${existing}: ${errnoOf(error) ?? String(error)}`, error);
      }
    }
    if (found) break;
    missing.unshift(existing);
    const parent = path.dirname(existing);
    if (parent === existing) throw storeUnavailable(home, 'no part of its path exists');
    existing = parent;
  }
  const fsType = await statfs(existing).then((s) => s.type, () => undefined);
  if (fsType === PROC_SUPER_MAGIC) throw storeUnavailable(home, `${existing} is on procfs`);
  if (need === 'possible') return;
  for (const dir of missing) {
    try {
      await mkdir(dir, { mode: 0o700 });
      await fsyncDir(path.dirname(dir));
    } catch (error) {
      throw storeUnavailable(home, `cannot create ${dir}: ${errnoOf(error) ?? String(error)}`, error);
    }
  }
  const info = await stat(home).catch(() => undefined);
  if (!info?.isDirectory()) throw storeUnavailable(home, 'it is not a directory');
  // Proved where sessions are made (the store makes this folder anyway): a probe in the
  // root itself would change the root's times on every run.
  const sessions = sessionsDir(home);
  for (const dir of [path.dirname(sessions), sessions]) {
    try {
      await mkdir(dir, { mode: 0o700 });
    } catch (error) {
      if (errnoOf(error) !== 'EEXIST') throw storeUnavailable(home, `it is not writable: ${errnoOf(error) ?? String(error)}`, error);
    }
  }
  const probe = path.join(sessions, `.write-probe-${process.pid}-${randomBytes(4).toString('hex')}`);
  try {
    const handle = await open(probe, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    await handle.close();
  } catch (error) {
    throw storeUnavailable(home, `it is not writable: ${errnoOf(error) ?? String(error)}`, error);
  }
  await rm(probe, { force: true });
}
