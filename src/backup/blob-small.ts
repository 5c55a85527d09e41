import { closeSync, constants as C, fstatSync, lstatSync, openSync, readFileSync, readSync, writeSync, type BigIntStats } from 'node:fs';
import { createHash } from 'node:crypto';
import { SourceChanged, SourceTooLarge, sameIdentity, unchanged } from './blob-copy.js';
import { errorCode } from './fs-util.js';

/**
 * Files up to this size are copied into the store with synchronous calls (blob-store.ts).
 * A backup of a 1 KiB file through promises made about twenty thread-pool round trips,
 * ≈ 1.4 ms, for work the page cache does in microseconds; the event loop is held for
 * about as long as one of those round trips.
 */
export const SMALL_FILE_BYTES = 256 * 1024;

export interface CopiedBlob {
  sha256: string;
  size: number;
  /** The source's metadata, taken before reading it. */
  stats: BigIntStats;
}

/**
 * Copy the small regular file `file` (which `seen` describes) into `tmp`: a new file, or
 * an empty spare made ahead of time (spare-temps.ts),
 * the same checks as the streaming copy: it must be the same file, unchanged from before
 * the read to after `afterCopy` (the test seam), and the temp must hold exactly the bytes
 * read. Throws SourceChanged (the caller retries), SourceTooLarge, or the fs error.
 */
export async function copySmallToTemp(
  file: string,
  seen: BigIntStats,
  tmp: { path: string; spare: boolean },
  maxBytes: number,
  afterCopy?: (tmp: string) => void | Promise<void>,
): Promise<CopiedBlob> {
  const source = openSourceSync(file);
  try {
    const before = fstatSync(source, { bigint: true });
    if (!before.isFile() || !sameIdentity(before, seen)) throw new SourceChanged(`${file} was replaced`);
    if (before.size > BigInt(maxBytes)) throw new SourceTooLarge(`${file} is ${before.size} bytes`);
    const data = readExactly(source, Number(before.size), file);
    const sha256 = createHash('sha256').update(data).digest('hex');
    writeTemp(tmp.path, data, tmp.spare);
    if (afterCopy) await afterCopy(tmp.path);
    const after = fstatSync(source, { bigint: true });
    const current = lstatSync(file, { bigint: true });
    if (!unchanged(before, after) || !sameIdentity(current, before)) throw new SourceChanged(`${file} changed during copy`);
    // What is about to be kept must be what was read.
    const kept = readNoFollow(tmp.path);
    if (kept.length !== data.length || createHash('sha256').update(kept).digest('hex') !== sha256) {
      throw new Error(`the copy of ${file} does not match what was read`);
    }
    return { sha256, size: data.length, stats: before };
  } finally {
    closeSync(source);
  }
}

/** The content of an intact blob hashes to its name (synchronous: only for small blobs). */
export function smallBlobIsIntact(file: string, sha256: string): boolean {
  let data: Buffer;
  try {
    data = readNoFollow(file);
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return false;
    throw error;
  }
  return createHash('sha256').update(data).digest('hex') === sha256;
}

/** The whole file, never through a final symlink. */
function readNoFollow(file: string): Buffer {
  const fd = openSync(file, C.O_RDONLY | C.O_NOFOLLOW);
  try {
    return readFileSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Like openForSnapshot (fs-util.ts), synchronously. */
export function openSourceSync(file: string): number {
  const base = C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK;
  const noAtime = C.O_NOATIME ?? 0;
  if (noAtime !== 0) {
    try {
      return openSync(file, base | noAtime);
    } catch (error) {
      if (errorCode(error) !== 'EPERM') throw error;
    }
  }
  return openSync(file, base);
}

/** Exactly `size` bytes from offset 0, or SourceChanged when the file is shorter or longer now. */
function readExactly(fd: number, size: number, file: string): Buffer {
  const buffer = Buffer.allocUnsafe(size + 1);
  let length = 0;
  while (length < buffer.length) {
    const read = readSync(fd, buffer, length, buffer.length - length, length);
    if (read === 0) break;
    length += read;
  }
  if (length !== size) throw new SourceChanged(`${file} changed size during copy`);
  return buffer.subarray(0, size);
}

/** Write `data` as the whole of `tmp`: created exclusively, or a spare of ours truncated (and recreated if it went). */
function writeTemp(tmp: string, data: Buffer, spare: boolean): void {
  const fd = openSync(tmp, C.O_WRONLY | C.O_CREAT | C.O_NOFOLLOW | (spare ? C.O_TRUNC : C.O_EXCL), 0o600);
  try {
    let written = 0;
    while (written < data.length) {
      const n = writeSync(fd, data, written, data.length - written);
      if (n <= 0) throw new Error('short write');
      written += n;
    }
  } finally {
    closeSync(fd);
  }
}
