import { closeSync, constants as C, fstatSync, openSync, read, readFileSync, readSync, type BigIntStats } from 'node:fs';
import { promisify } from 'node:util';
import { createHash } from 'node:crypto';
import { sameIdentity, unchanged } from './blob-copy.js';
import { SMALL_FILE_BYTES, openSourceSync } from './blob-small.js';
import { CHUNK_SIZE, fdatasyncFd } from './fs-util.js';

/**
 * Keeping a file whole instead of copying it: the change that removes or replaces it (an
 * unlink, a rename over it) moves it into the store under its hash, so its size does not
 * matter and nothing is written. That is exact only while nothing can change the file
 * once its hash is taken, so it is done only for a regular file
 *
 * - on the store's own file system and mount (a rename cannot cross either),
 * - with no other name (another name would still write the blob), and
 * - that nobody holds open for writing: a read lease, which the kernel grants only then,
 *   is taken and let go while the hash is read (writable shared mappings count too).
 *   After the move its only name is in the store, which no sandboxed process may open
 *   for writing, so it stays as hashed.
 *
 * Otherwise it is copied, as any in-place change's old version is.
 */
export type AsideRead = { ok: true; sha256: string; size: number; stats: BigIntStats } | { ok: false; why: string };

/** Whether a descriptor of the file behind a read-only `fd` is open for writing; throws when it cannot tell. */
export type HeldForWriting = (fd: number) => boolean;

/** Where the store is: a file moves in only from the same device and mount. */
export interface StorePlace {
  device: bigint;
  mountId: string | undefined;
}

/** The store's place, from its blobs directory. */
export function storePlaceOf(dir: string): StorePlace {
  const fd = openSync(dir, C.O_RDONLY | C.O_DIRECTORY);
  try {
    return { device: fstatSync(fd, { bigint: true }).dev, mountId: mountIdOf(fd) };
  } finally {
    closeSync(fd);
  }
}

/** The mount an open descriptor is on, as /proc says (a bind mount shares the device, not the mount). */
function mountIdOf(fd: number): string | undefined {
  try {
    return /^mnt_id:\s*(\d+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))?.[1];
  } catch {
    return undefined;
  }
}

/** The hash `file` (which `seen` describes) would be kept under, or why it must be copied instead; `sync` makes its data durable first. */
export async function readForAside(file: string, seen: BigIntStats, store: StorePlace, heldForWriting: HeldForWriting | undefined, sync: boolean): Promise<AsideRead> {
  if (!seen.isFile()) return { ok: false, why: 'not a regular file' };
  if (seen.dev !== store.device || store.mountId === undefined) return { ok: false, why: 'on another file system than the store' };
  if (seen.nlink !== 1n) return { ok: false, why: `it has ${seen.nlink} names` };
  if (!heldForWriting) return { ok: false, why: 'no way to tell whether it is open for writing' };
  let fd: number;
  try {
    fd = openSourceSync(file);
  } catch (error) {
    return { ok: false, why: `cannot be opened (${(error as NodeJS.ErrnoException).code ?? String(error)})` };
  }
  try {
    const before = fstatSync(fd, { bigint: true });
    if (!before.isFile() || !sameIdentity(before, seen) || before.nlink !== 1n) return { ok: false, why: 'it changed before it could be read' };
    if (mountIdOf(fd) !== store.mountId) return { ok: false, why: 'on another mount than the store' };
    let held: boolean;
    try {
      held = heldForWriting(fd);
    } catch (error) {
      return { ok: false, why: `cannot tell whether it is open for writing (${(error as NodeJS.ErrnoException).code ?? String(error)})` };
    }
    if (held) return { ok: false, why: 'it is open for writing' };
    const { sha256, size } = before.size <= BigInt(SMALL_FILE_BYTES) ? hashFdSync(fd) : await hashFd(fd);
    const after = fstatSync(fd, { bigint: true });
    if (!unchanged(before, after) || size !== Number(before.size)) return { ok: false, why: 'it changed while it was read' };
    // Durably kept: its data reaches the disk before the change may move it (durability 'each').
    if (sync) await fdatasyncFd(fd);
    return { ok: true, sha256, size, stats: before };
  } finally {
    closeSync(fd);
  }
}

const readAt = promisify(read);

/** The sha-256 and length of what a small file's `fd` holds, read synchronously (cheaper than a thread-pool hop). */
function hashFdSync(fd: number): { sha256: string; size: number } {
  const hash = createHash('sha256');
  const buffer = Buffer.allocUnsafe(SMALL_FILE_BYTES + 1);
  let position = 0;
  for (;;) {
    const got = readSync(fd, buffer, 0, buffer.length, position);
    if (got === 0) break;
    hash.update(buffer.subarray(0, got));
    position += got;
  }
  return { sha256: hash.digest('hex'), size: position };
}

/** The same for a large file, on the thread pool, so the broker's clients are served meanwhile. */
async function hashFd(fd: number): Promise<{ sha256: string; size: number }> {
  const hash = createHash('sha256');
  const buffer = Buffer.allocUnsafe(CHUNK_SIZE);
  let position = 0;
  for (;;) {
    const { bytesRead } = await readAt(fd, buffer, 0, buffer.length, position);
    if (bytesRead === 0) break;
    hash.update(buffer.subarray(0, bytesRead));
    position += bytesRead;
  }
  return { sha256: hash.digest('hex'), size: position };
}
