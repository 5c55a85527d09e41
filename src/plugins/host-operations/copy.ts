import { closeSync, constants, fchmodSync, fstatSync, ftruncateSync, read, write, promises as fs, type Stats } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative } from 'node:path';
import { promisify } from 'node:util';
import { errnoOf } from '../../core/index.js';
import { withoutPrivilegeBits } from '../set-id-bits.js';
import { fsError, listNames, type FsAt } from './fs-at.js';

const readAt = promisify(read);
const writeAt = promisify(write);
const CHUNK = 256 * 1024;

/**
 * Copy a file or (with recursive) a tree. Every open goes through FsAt so no symlink in
 * the source or destination path is followed; symlinks inside a copied tree are copied
 * as symlinks, never dereferenced. What is read about the source (its type, its mode, a
 * link's text, a directory's entries) is read through a directory fd opened the same
 * way, so a directory swapped for a link after the policy check is never read from.
 */
export async function copyPath(fsAt: FsAt, from: string, to: string, recursive: boolean): Promise<void> {
  const dir = fsAt.openDirectory(dirname(from));
  try {
    await copyEntry(fsAt, from, join(procPath(dir), basename(from)), to, recursive);
  } finally {
    closeSync(dir);
  }
}

/** The path that names exactly the directory an fd holds, whatever is at its old path now. */
function procPath(fd: number): string {
  return `/proc/self/fd/${fd}`;
}

/** `source` is the path as approved; `here` names the same entry through its parent's fd. */
async function copyEntry(fsAt: FsAt, source: string, here: string, to: string, recursive: boolean): Promise<void> {
  const info = await fs.lstat(here);
  if (info.isDirectory()) {
    if (!recursive) throw fsError('EISDIR', `${source} is a directory (copy needs recursive)`);
    if (isWithin(to, source)) throw fsError('EINVAL', `cannot copy ${source} into itself (${to})`);
    await copyTree(fsAt, source, to);
  } else if (info.isSymbolicLink()) {
    fsAt.symlink(await linkText(here, source), to);
  } else if (info.isFile()) {
    await copyFile(fsAt, source, to);
  } else {
    throw fsError('EINVAL', `${source} is not a regular file, directory or symlink`);
  }
}

/** `child` is `parent` or beneath it (a name that merely starts with `..`, like `..cache`, is beneath). */
export function isWithin(child: string, parent: string): boolean {
  const rel = relative(parent, child);
  return rel === '' || (rel !== '..' && !rel.startsWith('../') && !isAbsolute(rel));
}

async function linkText(here: string, source: string): Promise<string> {
  const bytes = await fs.readlink(here, { encoding: 'buffer' });
  const text = bytes.toString('utf8');
  // The native symlink call takes a string: refuse rather than write a different target.
  if (!Buffer.from(text, 'utf8').equals(bytes)) throw fsError('EILSEQ', `the link ${source} holds a name that is not valid UTF-8`);
  return text;
}

/** One regular file's bytes to `to` (exported for its tests: the caller has looked at `from` already). */
export async function copyFile(fsAt: FsAt, from: string, to: string): Promise<void> {
  // Non-blocking: the source may have been swapped for a FIFO since it was looked at (a regular file reads the same).
  const input = fsAt.open(from, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const source = fstatSync(input);
    if (!source.isFile()) throw fsError('EINVAL', `${from} is not a regular file`);
    const { fd: output, created } = openDestination(fsAt, to, source);
    try {
      await pump(input, output);
      // A new file gets the source's mode once it is complete, less set-uid and set-gid (a
      // privileged program the requester could not make itself), as cp without -p does; an
      // existing one keeps its own, as cp does.
      if (created) fchmodSync(output, withoutPrivilegeBits(source.mode & 0o7777, false));
    } finally {
      closeSync(output);
    }
  } finally {
    closeSync(input);
  }
}

function openDestination(fsAt: FsAt, to: string, source: Stats): { fd: number; created: boolean } {
  try {
    // Owner-only until the bytes are in; the final mode is set afterwards.
    return { fd: fsAt.open(to, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600), created: true };
  } catch (error) {
    if (errnoOf(error) !== 'EEXIST') throw error;
  }
  const notRegular = () => fsError('EINVAL', `${to} is not a regular file; a copy only writes over regular files`);
  let fd: number;
  try {
    // Non-blocking: a FIFO would otherwise hold the broker's only thread until a reader came.
    fd = fsAt.open(to, constants.O_WRONLY | constants.O_NONBLOCK);
  } catch (error) {
    // ENXIO: a FIFO with no reader, or a socket.
    throw errnoOf(error) === 'ENXIO' ? notRegular() : error;
  }
  try {
    const existing = fstatSync(fd);
    if (!existing.isFile()) throw notRegular();
    // Truncating the source itself (same path or a hard link) would lose it.
    if (existing.dev === source.dev && existing.ino === source.ino) throw fsError('EINVAL', `${to} is the file being copied`);
    // Written in place, a file's other names change too, and only this one was judged and backed up
    // (a tree copy reaches files the policy never looked at one by one).
    if (existing.nlink > 1) throw fsError('EPERM', `${to} has ${existing.nlink} hard links; writing it in place would change the other names too`);
    ftruncateSync(fd, 0);
    return { fd, created: false };
  } catch (error) {
    closeSync(fd);
    throw error;
  }
}

async function pump(input: number, output: number): Promise<void> {
  const buffer = Buffer.allocUnsafe(CHUNK);
  for (let position = 0; ; ) {
    const { bytesRead } = await readAt(input, buffer, 0, buffer.length, position);
    if (bytesRead === 0) return;
    for (let done = 0; done < bytesRead; ) {
      const { bytesWritten } = await writeAt(output, buffer, done, bytesRead - done, position + done);
      done += bytesWritten;
    }
    position += bytesRead;
  }
}

async function copyTree(fsAt: FsAt, from: string, to: string): Promise<void> {
  const dir = fsAt.openDirectory(from);
  try {
    const mode = fstatSync(dir).mode & 0o7777;
    // Writable by us while it fills; the source's mode is applied at the end.
    const created = makeDirectory(fsAt, to, mode | 0o700);
    const here = procPath(dir);
    for (const name of await listNames(here)) {
      await copyEntry(fsAt, join(from, name), join(here, name), join(to, name), true);
    }
    if (created) fsAt.chmod(to, withoutPrivilegeBits(mode, true));
  } finally {
    closeSync(dir);
  }
}

/** mkdir, or merge into a directory already there (never into a file or through a link). */
function makeDirectory(fsAt: FsAt, path: string, mode: number): boolean {
  try {
    fsAt.mkdir(path, mode);
    return true;
  } catch (error) {
    if (errnoOf(error) !== 'EEXIST') throw error;
    let existing: number;
    try {
      existing = fsAt.openDirectory(path);
    } catch {
      throw error;
    }
    closeSync(existing);
    return false;
  }
}
