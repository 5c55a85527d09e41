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

/** read → write until EOF; full writes only; throws SourceTooLarge past `limit` bytes. */
export async function pump(source: fs.FileHandle, target: fs.FileHandle, onChunk: (chunk: Buffer) => void, limit: number): Promise<number> {
  const buffer = await readBufferFor(source);
  let position = 0;
  for (;;) {
    const { bytesRead } = await source.read(buffer, 0, buffer.length, position);
    if (bytesRead === 0) return position;
    position += bytesRead;
    if (position > limit) throw new SourceTooLarge(`more than ${limit} bytes`);
    const chunk = buffer.subarray(0, bytesRead);
    onChunk(chunk);
    let written = 0;
    while (written < bytesRead) {
      const { bytesWritten } = await target.write(chunk, written, bytesRead - written);
      if (bytesWritten <= 0) throw new Error('short write');
      written += bytesWritten;
    }
  }
}
