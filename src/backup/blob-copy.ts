import fs from 'node:fs/promises';
import { constants as C, type BigIntStats } from 'node:fs';
import { createHash } from 'node:crypto';
import { readBufferFor } from './fs-util.js';

/** The byte copying under BlobStore (blob-store.ts): source → temp file, hashed on the way. */

/** The source grew past the cap while we copied it. */
export class SourceTooLarge extends Error {}

/** The source changed while we copied it; the caller retries. */
export class SourceChanged extends Error {}

export const sameIdentity = (a: BigIntStats, b: BigIntStats) => a.dev === b.dev && a.ino === b.ino;
export const unchanged = (a: BigIntStats, b: BigIntStats) =>
  sameIdentity(a, b) && a.size === b.size && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs;

/** Copy `source` (from offset 0) into a new temp file, hashing what was read. */
export async function streamCopy(source: fs.FileHandle, tmp: string, maxBytes: number): Promise<string> {
  const target = await fs.open(tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o600);
  try {
    const hash = createHash('sha256');
    await pump(source, target, (chunk) => hash.update(chunk), maxBytes);
    return hash.digest('hex'); // synced only if it is kept (see #commitTemp)
  } finally {
    await target.close();
  }
}

/**
 * read → write until EOF into an empty `target`; full writes only; throws SourceTooLarge
 * past `limit` bytes. A chunk of zeros is not written but left a hole (the size is set at
 * the end), so a sparse file's backup and its restore stay sparse: same bytes, not a
 * gigabyte of zeros on disk.
 */
export async function pump(source: fs.FileHandle, target: fs.FileHandle, onChunk: (chunk: Buffer) => void, limit: number): Promise<number> {
  const buffer = await readBufferFor(source);
  let position = 0;
  let endsInHole = false;
  for (;;) {
    const { bytesRead } = await source.read(buffer, 0, buffer.length, position);
    if (bytesRead === 0) break;
    if (position + bytesRead > limit) throw new SourceTooLarge(`more than ${limit} bytes`);
    const chunk = buffer.subarray(0, bytesRead);
    onChunk(chunk);
    endsInHole = isZeros(chunk);
    if (!endsInHole) await writeAll(target, chunk, position);
    position += bytesRead;
  }
  if (endsInHole) await target.truncate(position);
  return position;
}

async function writeAll(target: fs.FileHandle, chunk: Buffer, position: number): Promise<void> {
  let written = 0;
  while (written < chunk.length) {
    const { bytesWritten } = await target.write(chunk, written, chunk.length - written, position + written);
    if (bytesWritten <= 0) throw new Error('short write');
    written += bytesWritten;
  }
}

let zeros = Buffer.alloc(0);

/** Whether a chunk is all zero bytes (a memcmp against zeros, not a loop in JavaScript). */
function isZeros(chunk: Buffer): boolean {
  if (chunk.length === 0 || chunk[0] !== 0 || chunk[chunk.length - 1] !== 0) return false;
  if (zeros.length < chunk.length) zeros = Buffer.alloc(chunk.length);
  return chunk.equals(zeros.subarray(0, chunk.length));
}
