import { constants, lstatSync, readFileSync, readlinkSync, type Stats } from 'node:fs';
import path from 'node:path';
import { BrokerError, ErrorCodes, errnoOf } from '../../core/index.js';
import { native } from '../../native/loader.js';

/** Linux's MAXSYMLINKS: more links than this in one walk is a loop. */
const MAX_LINKS = 40;

export interface WalkOptions {
  /** Follow a symlink in the final component (else the link itself is the answer). */
  followFinal: boolean;
  /** A missing final component is fine: the answer is where a create would land. */
  allowMissingFinal: boolean;
}

/** What the walk needs to know about an entry: an `lstat` result, or the addon's brief one. */
export type EntryStats = Pick<Stats, 'nlink' | 'isFile' | 'isDirectory' | 'isSymbolicLink'>;

/** Where a walk ended and what it found there (`null`: nothing, a create would land there). */
export interface WalkResult {
  path: string;
  stats: EntryStats | null;
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
 * inline on a local file system; the request waits for the answer either way. A path
 * with no link, dot or /proc in it, the usual case, is walked by the addon in one call.
 */
export function walkSync(raw: string, options: WalkOptions): WalkResult {
  return (options.followFinal && walkPlain(raw, options.allowMissingFinal)) || walkByComponents(raw, options);
}

/** The walk itself, one `lstat` per component (exported so tests can hold the addon's shortcut to it). */
export function walkByComponents(raw: string, options: WalkOptions): WalkResult {
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

/**
 * The addon's walk of a path with no link, dot or /proc in it (native/addon/plain-walk.cc):
 * the same answer in one call, at a fraction of the per-component cost. `undefined` for
 * any other path, which `walkByComponents` then resolves from the start. Without the
 * addon (not built on this machine) every path takes the JS walk: slower, not different.
 */
export function walkPlain(raw: string, allowMissingFinal: boolean): WalkResult | undefined {
  const walker = plainWalkerOf();
  if (!walker || NOT_FOR_ADDON.test(raw)) return undefined;
  let found: number;
  try {
    found = walker(raw, allowMissingFinal);
  } catch {
    // Only a bad argument throws there; the walk by components reports what is wrong.
    return undefined;
  }
  if (found === PLAIN_NOT) return undefined;
  const walked = raw.length > 1 && (raw.endsWith('/') || raw.includes('//')) ? `/${raw.split('/').filter(Boolean).join('/')}` : raw;
  return { path: walked, stats: found === PLAIN_ABSENT ? null : new BriefStats(found % 65536, Math.floor(found / 65536)) };
}

/**
 * What the addon would lstat must be the bytes Node would: no NUL (Node refuses it), and
 * no surrogate, so a lone one's replacement cannot differ (a character beyond the BMP
 * just takes the JS walk).
 */
const NOT_FOR_ADDON = /[\0\uD800-\uDFFF]/;
const PLAIN_ABSENT = -1;
const PLAIN_NOT = -2;
type PlainWalker = (path: string, allowMissingFinal: boolean) => number;
let plainWalker: PlainWalker | null | undefined;

/** The addon's function, loaded once; `null` when the addon cannot be loaded here. */
function plainWalkerOf(): PlainWalker | null {
  if (plainWalker === undefined) {
    try {
      plainWalker = native().walkPlain;
    } catch {
      plainWalker = null;
    }
  }
  return plainWalker;
}

/** The mode and link count the addon reports, asked the way a Stats object is. */
class BriefStats implements EntryStats {
  constructor(
    readonly mode: number,
    readonly nlink: number,
  ) {}
  isFile(): boolean {
    return (this.mode & constants.S_IFMT) === constants.S_IFREG;
  }
  isDirectory(): boolean {
    return (this.mode & constants.S_IFMT) === constants.S_IFDIR;
  }
  isSymbolicLink(): boolean {
    return (this.mode & constants.S_IFMT) === constants.S_IFLNK;
  }
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
