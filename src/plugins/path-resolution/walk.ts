import { lstatSync, readFileSync, readlinkSync, type Stats } from 'node:fs';
import path from 'node:path';
import { BrokerError, ErrorCodes, errnoOf } from '../../core/index.js';

/** Linux's MAXSYMLINKS: more links than this in one walk is a loop. */
const MAX_LINKS = 40;

export interface WalkOptions {
  /** Follow a symlink in the final component (else the link itself is the answer). */
  followFinal: boolean;
  /** A missing final component is fine: the answer is where a create would land. */
  allowMissingFinal: boolean;
}

/** Where a walk ended and what it found there (`null`: nothing, a create would land there). */
export interface WalkResult {
  path: string;
  stats: Stats | null;
}

/**
 * Resolve an absolute path one component at a time, the way the kernel does: `..` after
 * a link climbs from the link's target, not from the link's name. Written out (instead
 * of realpath(3)) so that each link can be checked before it is followed: links into the
 * broker's own /proc entries are refused, and link text that is not valid UTF-8 is
 * refused rather than decoded into a different name.
 *
 * Synchronous on purpose: one `lstat` per component through the libuv pool cost a pool
 * round trip each (≈ 15–20 µs, several per request, in sequence), against a few µs
 * inline on a local file system; the request waits for the answer either way.
 */
export function walkSync(raw: string, options: WalkOptions): WalkResult {
  const pending = components(raw);
  let current = '/';
  let currentStats: Stats | null = null;
  let links = 0;
  while (pending.length > 0) {
    const name = pending.pop() as string;
    if (name === '.') continue;
    if (name === '..') {
      current = path.posix.dirname(current);
      currentStats = null;
      continue;
    }
    const next = current === '/' ? `/${name}` : `${current}/${name}`;
    const isLast = pending.length === 0;
    refuseBrokerProc(next);
    let stats: Stats | undefined;
    try {
      // No exception (and no Error with its stack) for the common "not there yet".
      stats = lstatSync(next, { throwIfNoEntry: false });
    } catch (error) {
      throw fsFailure(error, raw);
    }
    if (stats === undefined) {
      if (isLast && options.allowMissingFinal) return { path: next, stats: null };
      throw missing(raw, 'ENOENT');
    }
    if (stats.isSymbolicLink() && (!isLast || options.followFinal)) {
      if (++links > MAX_LINKS) {
        throw new BrokerError(ErrorCodes.PATH_UNRESOLVED, `too many symbolic links resolving ${raw}`, { errno: 'ELOOP' });
      }
      const target = readLinkText(next, raw);
      // `pending` is reversed (next component last): the link's components go on top.
      pending.push(...components(target));
      if (target.startsWith('/')) current = '/';
      currentStats = null;
      continue;
    }
    if (!isLast && !stats.isDirectory()) {
      throw new BrokerError(ErrorCodes.PATH_NOT_FOUND, `${next} is not a directory (resolving ${raw})`, { errno: 'ENOTDIR' });
    }
    current = next;
    currentStats = stats;
  }
  // After a final `.`/`..` (or for `/` itself) nothing was looked at where the walk ended.
  return { path: current, stats: currentStats ?? lstatOrNull(current, raw) };
}

/** `walkSync` for callers that only want the path. */
export async function walk(raw: string, options: WalkOptions): Promise<string> {
  return walkSync(raw, options).path;
}

/** The path's components in reverse order (so `pop()` yields them front to back). */
function components(value: string): string[] {
  return value
    .split('/')
    .filter((part) => part !== '')
    .reverse();
}

function lstatOrNull(p: string, raw: string): Stats | null {
  try {
    return lstatSync(p, { throwIfNoEntry: false }) ?? null;
  } catch (error) {
    throw fsFailure(error, raw);
  }
}

function missing(raw: string, errno: string): BrokerError {
  return new BrokerError(ErrorCodes.PATH_NOT_FOUND, `${raw} does not exist (${errno})`, { errno });
}

const SELF_LINKS = new Set(['/proc/self', '/proc/thread-self']);
/** What readlink gives for /proc/self and /proc/thread-self, wherever procfs is mounted. */
const PID_LINK = /^(\d+)(?:\/task\/\d+)?$/;
/** Magic links to pipes, sockets and anonymous inodes: no path a policy could judge. */
const ANON_LINK = /^[a-z_]+:/i;

function readLinkText(link: string, raw: string): string {
  if (SELF_LINKS.has(link)) {
    throw new BrokerError(ErrorCodes.PATH_UNRESOLVED, `${raw} names the broker's own process (${link})`);
  }
  let bytes: Buffer;
  try {
    bytes = readlinkSync(link, { encoding: 'buffer' });
  } catch (error) {
    throw fsFailure(error, raw);
  }
  const text = bytes.toString('utf8');
  if (!Buffer.from(text, 'utf8').equals(bytes)) {
    throw new BrokerError(ErrorCodes.PATH_UNRESOLVED, `the link ${link} holds a name that is not valid UTF-8`, { errno: 'EILSEQ' });
  }
  const pid = PID_LINK.exec(text);
  if (pid && Number(pid[1]) === process.pid) {
    throw new BrokerError(ErrorCodes.PATH_UNRESOLVED, `${raw} leads into the broker's own process (${link})`);
  }
  if (link.startsWith('/proc/')) {
    // An fd of a pipe, socket or deleted file names nothing a rule can match: deny.
    if (ANON_LINK.test(text) || text.endsWith(' (deleted)')) {
      throw new BrokerError(ErrorCodes.PATH_NOT_FOUND, `${raw} is not a path on the file system (${text})`, { errno: 'ENOENT' });
    }
  }
  return text;
}

const PROC_PID_DIR = /^\/proc\/(\d+)$/;

/**
 * The broker's own /proc entry (or one of its threads') is never a target: a request
 * must not reach the broker's file descriptors or memory through it.
 */
function refuseBrokerProc(candidate: string): void {
  if (!candidate.startsWith('/proc/')) return;
  const match = PROC_PID_DIR.exec(candidate);
  if (!match) return;
  const pid = Number(match[1]);
  if (pid === process.pid || threadGroupOf(pid) === process.pid) {
    throw new BrokerError(ErrorCodes.PATH_UNRESOLVED, `${candidate} is the broker's own process`);
  }
}

function threadGroupOf(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const line = /^Tgid:\s*(\d+)$/m.exec(status);
    return line ? Number(line[1]) : undefined;
  } catch {
    // No such process (or no procfs): the walk's own lstat reports what is missing.
    return undefined;
  }
}

/** A file-system error while resolving, as a BrokerError with a stable code. */
export function fsFailure(error: unknown, raw: string): BrokerError {
  if (error instanceof BrokerError) return error;
  const errno = errnoOf(error);
  const missing = errno === 'ENOENT' || errno === 'ENOTDIR';
  const code = missing ? ErrorCodes.PATH_NOT_FOUND : ErrorCodes.PATH_UNRESOLVED;
  const what = missing ? 'does not exist' : 'cannot be resolved';
  return new BrokerError(code, `${raw} ${what}${errno ? ` (${errno})` : ''}`, { cause: error, errno });
}
