/**
 * Splits a byte stream into newline-terminated lines, refusing lines longer than a
 * limit so a client cannot make the broker buffer without bound.
 */
export class LineSplitter {
  readonly #maxBytes: number;
  #parts: Buffer[] = [];
  #pending = 0;
  #overflowed = false;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  /** Bytes of a line not yet terminated. */
  get pendingBytes(): number {
    return this.#pending;
  }

  /** The bytes of the line not yet terminated. */
  get pending(): Buffer {
    return Buffer.concat(this.#parts);
  }

  get overflowed(): boolean {
    return this.#overflowed;
  }

  /** Feed a chunk; returns the complete lines (without the newline). Stops at overflow. */
  push(chunk: Buffer): Buffer[] {
    const lines: Buffer[] = [];
    let start = 0;
    while (!this.#overflowed) {
      const newline = chunk.indexOf(0x0a, start);
      const end = newline === -1 ? chunk.length : newline;
      if (this.#pending + (end - start) > this.#maxBytes) {
        this.#overflowed = true;
        this.#parts = [];
        this.#pending = 0;
        break;
      }
      if (newline === -1) {
        if (end > start) {
          this.#parts.push(chunk.subarray(start));
          this.#pending += end - start;
        }
        break;
      }
      this.#parts.push(chunk.subarray(start, end));
      lines.push(this.#parts.length === 1 ? (this.#parts[0] as Buffer) : Buffer.concat(this.#parts));
      this.#parts = [];
      this.#pending = 0;
      start = newline + 1;
    }
    return lines;
  }
}
