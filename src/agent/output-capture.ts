import type { Readable } from 'node:stream';

/** Default cap on each of stdout and stderr kept in memory: 10 MiB. */
export const DEFAULT_MAX_OUTPUT_BYTES = 10 * 1024 * 1024;

/**
 * The first `limit` bytes of a stream. The rest is read and dropped (so the writer never
 * blocks on a full pipe) and `truncated` says so.
 */
export class BoundedOutput {
  readonly #chunks: Buffer[] = [];
  #size = 0;
  #truncated = false;

  constructor(readonly limit: number) {}

  /**
   * Collect from a stream until it closes; resolves then (at once when there is none).
   * `each` sees every chunk, past the cap too (a live view is not bounded by what is kept).
   */
  drain(stream: Readable | null | undefined, each?: (chunk: Buffer) => void): Promise<void> {
    if (!stream) return Promise.resolve();
    return new Promise((resolve) => {
      stream.on('data', (chunk: Buffer) => {
        this.push(chunk);
        each?.(chunk);
      });
      stream.once('close', () => resolve());
      stream.once('error', () => resolve());
    });
  }

  push(chunk: Buffer): void {
    const room = this.limit - this.#size;
    if (chunk.length > room) this.#truncated = true;
    if (room <= 0) return;
    const kept = chunk.length > room ? chunk.subarray(0, room) : chunk;
    this.#chunks.push(kept);
    this.#size += kept.length;
  }

  get truncated(): boolean {
    return this.#truncated;
  }

  bytes(): Buffer {
    return Buffer.concat(this.#chunks, this.#size);
  }
}
