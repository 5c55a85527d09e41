import fs from 'node:fs/promises';
import nodeFs, { closeSync, constants as C, lstatSync, mkdirSync, openSync, type BigIntStats } from 'node:fs';
import path from 'node:path';
import { createHash, randomBytes } from 'node:crypto';

/** 1 MiB: big enough to keep syscalls few, small enough to stay out of the way. */
export const CHUNK_SIZE = 1024 * 1024;

/** A name for a temp file that no one else will pick (kept short: it may sit beside a 255-byte name). */
export function tempName(prefix: string): string {
  return `${prefix}${process.pid}-${randomBytes(8).toString('hex')}.tmp`;
}

/** fsync (or fdatasync) an open descriptor on the thread pool; through the module object, so a test can count the syncs. */
function syncFd(fd: number, dataOnly: boolean): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const done = (error: NodeJS.ErrnoException | null) => (error ? reject(error) : resolve());
    if (dataOnly) nodeFs.fdatasync(fd, done);
    else nodeFs.fsync(fd, done);
  });
}

/**
 * Open `file` (cheap, synchronous: no thread-pool round trip), sync it on the pool (it
 * waits for the disk) and close it. Three pool hops became one: a backup syncs up to four
 * times, and each hop costs tens of µs before the disk does anything.
 */
async function syncPath(file: string, flags: number, dataOnly: boolean): Promise<void> {
  const fd = openSync(file, flags);
  try {
    await syncFd(fd, dataOnly);
  } finally {
    closeSync(fd);
  }
}

/** Make a rename or unlink in `dir` durable. */
export async function fsyncDir(dir: string): Promise<void> {
  await syncPath(dir, C.O_RDONLY | C.O_DIRECTORY, false);
}

/** Make a file's content durable (fsync through a fresh read-only descriptor). */
export async function fsyncFile(file: string): Promise<void> {
  await syncPath(file, C.O_RDONLY | C.O_NOFOLLOW, false);
}

/** Make a file's data (and the metadata needed to read it: size, blocks) durable, not its times. */
export async function fdatasyncFile(file: string): Promise<void> {
  await syncPath(file, C.O_RDONLY | C.O_NOFOLLOW, true);
}

/** fdatasync an open descriptor on the thread pool. */
export function fdatasyncFd(fd: number): Promise<void> {
  return syncFd(fd, true);
}

/**
 * Wait for every promise to settle (none left running), then throw the first failure or
 * return the values: for work that must not race what comes after it.
 */
export async function settleAll<T extends readonly unknown[]>(promises: T): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const results = await Promise.allSettled(promises);
  for (const result of results) if (result.status === 'rejected') throw result.reason;
  return results.map((result) => (result as PromiseFulfilledResult<unknown>).value) as { -readonly [K in keyof T]: Awaited<T[K]> };
}

/** fdatasyncFile, and nothing when the file is gone. */
export async function fdatasyncIfPresent(file: string): Promise<void> {
  try {
    await fdatasyncFile(file);
  } catch (error) {
    if (errorCode(error) !== 'ENOENT') throw error;
  }
}

/** `fn` over `items`, at most `limit` calls in flight. */
export async function inBatches<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++] as T);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** mkdir -p with 0700, and durable: the parent of each directory made is fsynced. */
export async function mkdirPrivate(dir: string): Promise<void> {
  // Synchronous: nearly always the directory is there (a blob's fan-out directory at each
  // backup), an answer the kernel gives at once, where the pool cost a round trip.
  const first = mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (first === undefined) return;
  let current = dir;
  while (current.length >= first.length) {
    await fsyncDir(path.dirname(current));
    if (current === first) break;
    current = path.dirname(current);
  }
}

/**
 * Directories directly under `parent` (which must already be durable), 0700: made one after
 * another, then one sync of `parent` makes every new name durable at once.
 */
export async function mkdirChildrenPrivate(parent: string, dirs: readonly string[]): Promise<void> {
  let made = false;
  for (const dir of dirs) {
    if (path.dirname(dir) !== parent) throw new Error(`${dir} is not directly under ${parent}`);
    try {
      mkdirSync(dir, { mode: 0o700 });
      made = true;
    } catch (error) {
      if (errorCode(error) !== 'EEXIST') throw error;
    }
  }
  if (made) await fsyncDir(parent);
}

export async function removeQuietly(file: string): Promise<void> {
  await fs.rm(file, { force: true }).catch(() => undefined);
}

/**
 * Write a whole file so readers see the old or the new content, never a mix: temp file
 * in `tmpDir` (same file system as `target`), fsync, rename, fsync the directory. With
 * `sync: false` neither sync (the page cache keeps it through a kill of this process).
 * `alongside` (another sync the file depends on) starts once the file has its name, with
 * the directory's sync, so one commit of the file system's journal can serve both.
 */
export async function writeFileAtomic(
  target: string,
  data: string | Uint8Array,
  tmpDir: string,
  options: { sync?: boolean; alongside?: (() => Promise<void>) | undefined } = {},
): Promise<void> {
  const sync = options.sync !== false;
  const tmp = path.join(tmpDir, tempName('w-'));
  try {
    const handle = await fs.open(tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o600);
    try {
      await handle.writeFile(data);
      if (sync) await handle.sync();
    } finally {
      await handle.close();
    }
    await fs.rename(tmp, target);
  } catch (error) {
    await removeQuietly(tmp);
    throw error;
  }
  await settleAll([sync ? fsyncDir(path.dirname(target)) : undefined, options.alongside?.()]);
}

/**
 * Open a file for reading without following a final symlink, without blocking on a FIFO
 * swapped in behind our back, and (where we may) without touching its atime: a backup
 * must not change the metadata it records.
 */
export async function openForSnapshot(file: string): Promise<fs.FileHandle> {
  const base = C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK;
  const noAtime = C.O_NOATIME ?? 0;
  if (noAtime !== 0) {
    try {
      return await fs.open(file, base | noAtime);
    } catch (error) {
      // O_NOATIME needs ownership or CAP_FOWNER; fall back to a plain read.
      if (errorCode(error) !== 'EPERM') throw error;
    }
  }
  return fs.open(file, base);
}

/**
 * A read buffer sized to the file (one byte more, so EOF shows on the second read), at
 * most CHUNK_SIZE. A fixed 1 MiB per backup of a 1 KiB file was external memory that
 * made V8 run a full GC every few dozen backups; small ones come from Node's pool.
 */
export async function readBufferFor(handle: fs.FileHandle): Promise<Buffer> {
  const { size } = await handle.stat();
  return Buffer.allocUnsafe(Math.min(CHUNK_SIZE, size + 1));
}

/** sha256 and length of an open file's content from offset 0. */
export async function hashHandle(handle: fs.FileHandle, limit = Number.MAX_SAFE_INTEGER): Promise<{ sha256: string; size: number }> {
  const hash = createHash('sha256');
  const buffer = await readBufferFor(handle);
  let position = 0;
  for (;;) {
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, position);
    if (bytesRead === 0) break;
    hash.update(buffer.subarray(0, bytesRead));
    position += bytesRead;
    if (position > limit) throw new RangeError(`file is larger than ${limit} bytes`);
  }
  return { sha256: hash.digest('hex'), size: position };
}

/**
 * Hash a regular file by path (never following a final symlink, never waiting on it),
 * reading at most `limit` bytes: past it, it throws a RangeError. A file under /proc says
 * it holds 0 bytes and then gives more (some without end), so callers pass its size; the
 * limit (and O_NONBLOCK) also stops a device or FIFO swapped in since the caller's lstat.
 */
export async function hashFile(file: string, limit = Number.MAX_SAFE_INTEGER): Promise<{ sha256: string; size: number }> {
  const handle = await openForSnapshot(file);
  try {
    return await hashHandle(handle, limit);
  } finally {
    await handle.close();
  }
}

/** lstat with nanosecond times; undefined when nothing is there. */
export async function lstatOrUndefined(file: string): Promise<BigIntStats | undefined> {
  try {
    return await fs.lstat(file, { bigint: true });
  } catch (error) {
    const code = errorCode(error);
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw error;
  }
}

/**
 * lstat for the hot path of recording a path the turn is about to create: synchronous,
 * and without building an error for the common answer "nothing there" (a rejected
 * promise with a stack costs more than the lstat itself).
 */
export function lstatNowOrUndefined(file: string): BigIntStats | undefined {
  try {
    return lstatSync(file, { bigint: true, throwIfNoEntry: false });
  } catch (error) {
    if (errorCode(error) === 'ENOTDIR') return undefined;
    throw error;
  }
}

export function errorCode(error: unknown): string | undefined {
  if (typeof error === 'object' && error !== null && 'code' in error) {
    const code = (error as { code: unknown }).code;
    return typeof code === 'string' ? code : undefined;
  }
  return undefined;
}

export type FileType = 'file' | 'symlink' | 'directory' | 'fifo' | 'socket' | 'char-device' | 'block-device' | 'unknown';

export function fileTypeOf(stats: BigIntStats): FileType {
  if (stats.isFile()) return 'file';
  if (stats.isSymbolicLink()) return 'symlink';
  if (stats.isDirectory()) return 'directory';
  if (stats.isFIFO()) return 'fifo';
  if (stats.isSocket()) return 'socket';
  if (stats.isCharacterDevice()) return 'char-device';
  if (stats.isBlockDevice()) return 'block-device';
  return 'unknown';
}

/** Permission bits only (incl. setuid/setgid/sticky), as manifests record them. */
export function permissionBits(stats: BigIntStats): number {
  return Number(stats.mode & 0o7777n);
}

/** ns since the epoch → ISO string (ms precision: for people; the ns string is the truth). */
export function isoFromNs(ns: bigint): string {
  const ms = ns >= 0n ? ns / 1_000_000n : -((-ns + 999_999n) / 1_000_000n);
  return new Date(Number(ms)).toISOString();
}
