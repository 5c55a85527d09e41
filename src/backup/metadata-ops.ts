import fs from 'node:fs/promises';
import type { BigIntStats } from 'node:fs';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { errorCode } from './fs-util.js';
import type { SpecialFileType } from './manifest-schema.js';

const run = promisify(execFile);

/**
 * Extended attributes, provided by the native addon when it is built. Calls act on
 * the path itself (no symlink following is needed: we only record xattrs of regular files).
 */
export interface XattrAccess {
  list(path: string): string[];
  get(path: string, name: string): Buffer;
  set(path: string, name: string, value: Buffer): void;
  /** Needed to put a directory's xattrs back when the turn added one (a restored file is a fresh inode and needs none). */
  remove?(path: string, name: string): void;
}

/** Sets atime and mtime to the nanosecond; `noFollow` acts on a symlink itself. */
export type SetTimesNs = (path: string, atimeNs: bigint, mtimeNs: bigint, options: { noFollow: boolean }) => Promise<void>;

/** What a special file is made again from: its type, permission bits, device number, (root only) owner and xattrs (name → base64). */
export interface NodeSpec {
  fileType: SpecialFileType;
  mode: number;
  rdev: number;
  owner?: { uid: number; gid: number };
  xattrs?: Record<string, string>;
}

/**
 * Makes a FIFO, socket or device node at `path` with exactly `spec`'s metadata, set on
 * the node it made (never on a name swapped in meanwhile); returns that node's identity.
 */
export type MakeNode = (path: string, spec: NodeSpec) => { dev: bigint; ino: bigint };

/** What the store needs beyond Node's fs; the native addon can supply all of it later. */
export interface MetadataOps {
  readonly xattrs?: XattrAccess | undefined;
  readonly setTimesNs?: SetTimesNs | undefined;
  /** Node has no mknod: without it a restore cannot make a special file again (that path fails, reported). */
  readonly makeNode?: MakeNode | undefined;
  /**
   * Whether a file is open for writing anywhere (a read lease, aside.ts): without it a file
   * a change removes is copied into the store rather than moved there.
   */
  readonly heldForWriting?: ((fd: number) => boolean) | undefined;
}

/** The names of a file's xattrs; undefined when there is no xattr access. */
export function xattrNames(xattrs: XattrAccess | undefined, file: string): string[] | undefined {
  if (!xattrs) return undefined;
  try {
    return xattrs.list(file);
  } catch (error) {
    // A file system without xattrs simply has none.
    const code = errorCode(error);
    if (code === 'ENOTSUP' || code === 'EOPNOTSUPP') return [];
    throw error;
  }
}

/** Record a file's xattrs as name → base64; undefined when there is no xattr access. */
export function readXattrs(xattrs: XattrAccess | undefined, file: string): Record<string, string> | undefined {
  const names = xattrNames(xattrs, file);
  if (!xattrs || !names) return undefined;
  const out: Record<string, string> = {};
  for (const name of [...names].sort()) out[name] = xattrs.get(file, name).toString('base64');
  return out;
}

/** `@<seconds>.<nanoseconds>` as GNU touch reads it; floors correctly for times before 1970. */
export function touchStamp(ns: bigint): string {
  const billion = 1_000_000_000n;
  let seconds = ns / billion;
  let fraction = ns % billion;
  if (fraction < 0n) {
    seconds -= 1n;
    fraction += billion;
  }
  return `@${seconds}.${fraction.toString().padStart(9, '0')}`;
}

/**
 * Node's utimes goes through a double and libuv rounds to microseconds, so it cannot
 * put back a nanosecond mtime. GNU touch can (utimensat underneath); atime and mtime
 * take one call each because they usually differ. Falls back to Node when touch is
 * missing; the caller checks the result and reports inexact times.
 */
export const setTimesNsWithTouch: SetTimesNs = async (file, atimeNs, mtimeNs, { noFollow }) => {
  const common = ['-c', ...(noFollow ? ['-h'] : [])];
  try {
    await run('touch', [...common, '-a', '-d', touchStamp(atimeNs), '--', file]);
    await run('touch', [...common, '-m', '-d', touchStamp(mtimeNs), '--', file]);
  } catch (error) {
    if (errorCode(error) !== 'ENOENT') throw error;
    const atime = Number(atimeNs) / 1e9;
    const mtime = Number(mtimeNs) / 1e9;
    await (noFollow ? fs.lutimes(file, atime, mtime) : fs.utimes(file, atime, mtime));
  }
};

/**
 * The kernel moves a symlink's atime whenever its target is read, and there is no way
 * to read it without that. Backups and state checks must not change what they record,
 * so when the read moved the atime of the same link, put both times back.
 */
export async function readLinkQuietly(file: string, before: BigIntStats, setTimesNs: SetTimesNs): Promise<string> {
  const target = await fs.readlink(file);
  const after = await fs.lstat(file, { bigint: true }).catch(() => undefined);
  if (!after?.isSymbolicLink()) return target;
  const sameLink = after.ino === before.ino && after.dev === before.dev && after.mtimeNs === before.mtimeNs;
  if (sameLink && after.atimeNs !== before.atimeNs) {
    await setTimesNs(file, before.atimeNs, before.mtimeNs, { noFollow: true }).catch(() => undefined);
  }
  return target;
}
