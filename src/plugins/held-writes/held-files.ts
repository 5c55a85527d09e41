import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { BROKER_ENV } from '../../requests/broker-env.js';

/** A file a process of the session can still write: through a descriptor, or a shared writable mapping. */
export interface HeldFile {
  path: string;
  pid: number;
  uid: number;
  gid: number;
  /** The tool call and trace the process was started for (its BROKERED_SHELL_* environment). */
  toolCallId?: string;
  traceId?: string;
}

const O_ACCMODE = 0o3;
const O_PATH = 0o10000000;
/** What the kernel appends to the link of a descriptor whose file has no name any more. */
const DELETED = ' (deleted)';

const readText = (file: string): string | undefined => {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
};

/** The value of `name` in a NUL-separated environment block, or undefined. */
function envValue(environ: string, name: string): string | undefined {
  const key = `${name}=`;
  for (const entry of environ.split('\0')) if (entry.startsWith(key)) return entry.slice(key.length);
  return undefined;
}

/** The effective uid and gid from /proc/PID/status. */
function idsOf(pid: number): { uid: number; gid: number } | undefined {
  const status = readText(`/proc/${pid}/status`);
  const uid = /^Uid:\s+\d+\s+(\d+)/m.exec(status ?? '')?.[1];
  const gid = /^Gid:\s+\d+\s+(\d+)/m.exec(status ?? '')?.[1];
  return uid === undefined || gid === undefined ? undefined : { uid: Number(uid), gid: Number(gid) };
}

/** The named files a process holds open for writing (not read-only, not O_PATH). */
function writableDescriptors(pid: number): string[] {
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const fd of fds) {
    let target: string;
    try {
      target = readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue;
    }
    // Pipes, sockets and anonymous inodes are not paths; a deleted file has no name to restore.
    if (!target.startsWith('/') || target.endsWith(DELETED)) continue;
    const flags = /^flags:\s+([0-7]+)/m.exec(readText(`/proc/${pid}/fdinfo/${fd}`) ?? '')?.[1];
    if (flags === undefined) continue;
    const value = Number.parseInt(flags, 8);
    if ((value & O_ACCMODE) !== 0 && (value & O_PATH) === 0) out.push(target);
  }
  return out;
}

/** The files a process maps shared and writable: their pages reach the file whether or not a descriptor is left. */
function writableMappings(pid: number): string[] {
  const maps = readText(`/proc/${pid}/maps`);
  if (!maps) return [];
  const out: string[] = [];
  for (const line of maps.split('\n')) {
    // address perms offset dev inode path; perms "rw?s" is a shared writable mapping.
    const match = /^\S+ (\S{4}) \S+ \S+ \d+\s+(\/.*)$/.exec(line);
    const perms = match?.[1];
    const file = match?.[2];
    if (!perms || !file || perms[1] !== 'w' || perms[3] !== 's' || file.endsWith(DELETED)) continue;
    out.push(file);
  }
  return out;
}

/**
 * Every file that a process of session `sessionId` (one whose environment names it in
 * BROKERED_SHELL_SESSION_ID, as every process the broker serves is started) can still
 * write without asking again: held open for writing, or mapped shared and writable. One
 * holder per path. Processes this one may not inspect are passed over: they are another
 * user's, and the broker serves none of them.
 */
export function heldWritableFiles(sessionId: string, options: { proc?: string; self?: number } = {}): HeldFile[] {
  const self = options.self ?? process.pid;
  let entries: string[];
  try {
    entries = readdirSync(options.proc ?? '/proc');
  } catch {
    return [];
  }
  const held = new Map<string, HeldFile>();
  for (const entry of entries) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid <= 0 || pid === self) continue;
    const environ = readText(`/proc/${pid}/environ`);
    if (!environ || envValue(environ, BROKER_ENV.sessionId) !== sessionId) continue;
    const files = [...writableDescriptors(pid), ...writableMappings(pid)].filter((file) => !held.has(file));
    if (files.length === 0) continue;
    const ids = idsOf(pid);
    if (!ids) continue;
    const toolCallId = envValue(environ, BROKER_ENV.toolCallId);
    const traceId = envValue(environ, BROKER_ENV.traceId);
    for (const file of files) {
      const holder: HeldFile = { path: file, pid, uid: ids.uid, gid: ids.gid };
      if (toolCallId) holder.toolCallId = toolCallId;
      if (traceId) holder.traceId = traceId;
      held.set(file, holder);
    }
  }
  return [...held.values()];
}
