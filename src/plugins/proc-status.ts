import { closeSync, constants as C, openSync, readSync } from 'node:fs';

/** Status files kept open at once; more peers than that only cost a reopen each. */
export const MAX_KEPT_STATUS_FILES = 64;
const FIRST_BUFFER_BYTES = 4096;

/**
 * `/proc/PID/status` of socket peers, read through a descriptor kept per pid. A read at
 * offset 0 makes the kernel write the text anew (ids, groups and capabilities as they are
 * now), so nothing is cached but the descriptor. A descriptor stays bound to the process it
 * was opened on: once that process is gone it reads ESRCH, and only then is the pid looked
 * up again, which is all that opening the path on every request ever did. Opening,
 * checking and closing the file cost more than the read itself (≈ 9 against 4 µs).
 */
export class ProcStatusReader {
  readonly #kept = new Map<number, number>();
  readonly #maxKept: number;
  #buffer: Buffer;

  constructor(maxKept = MAX_KEPT_STATUS_FILES, firstBufferBytes = FIRST_BUFFER_BYTES) {
    this.#maxKept = maxKept;
    this.#buffer = Buffer.allocUnsafe(firstBufferBytes);
  }

  /** The status text of process `pid`, or undefined when there is no such process. */
  read(pid: number): string | undefined {
    const kept = this.#kept.get(pid);
    if (kept !== undefined) {
      const text = this.#readWhole(kept);
      if (text !== undefined) return text;
      // Its process is gone; the pid may name another process by now, looked up below.
      this.#forget(pid, kept);
    }
    let fd: number;
    try {
      // close-on-exec: libuv adds O_CLOEXEC to every open.
      fd = openSync(`/proc/${pid}/status`, C.O_RDONLY);
    } catch {
      return undefined;
    }
    const text = this.#readWhole(fd);
    if (text === undefined) {
      closeSync(fd);
      return undefined;
    }
    this.#keep(pid, fd);
    return text;
  }

  /** Descriptors held now. */
  get keptCount(): number {
    return this.#kept.size;
  }

  /** Close every kept descriptor (the broker is closing). The reader stays usable. */
  close(): void {
    for (const [pid, fd] of this.#kept) this.#forget(pid, fd);
  }

  #readWhole(fd: number): string | undefined {
    try {
      let length = readSync(fd, this.#buffer, 0, this.#buffer.length, 0);
      // A full buffer may hold only part of it (thousands of groups): read it again, whole.
      while (length === this.#buffer.length) {
        this.#buffer = Buffer.allocUnsafe(this.#buffer.length * 2);
        length = readSync(fd, this.#buffer, 0, this.#buffer.length, 0);
      }
      return length === 0 ? undefined : this.#buffer.toString('utf8', 0, length);
    } catch {
      return undefined;
    }
  }

  #keep(pid: number, fd: number): void {
    if (this.#kept.size >= this.#maxKept) {
      const [oldestPid, oldestFd] = this.#kept.entries().next().value as [number, number];
      this.#forget(oldestPid, oldestFd);
    }
    this.#kept.set(pid, fd);
  }

  #forget(pid: number, fd: number): void {
    this.#kept.delete(pid);
    try {
      closeSync(fd);
    } catch {
      // already closed: nothing is held
    }
  }
}
