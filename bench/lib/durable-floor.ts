import { createHash } from 'node:crypto';
import { closeSync, constants as C, fdatasyncSync, fsyncSync, lstatSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import path from 'node:path';
import type { KernelRequest } from '../../src/sandbox/index.js';
import { answerAtOnce } from './sandbox-runner.js';
import type { KernelHandler } from './request-counter.js';

/**
 * The least a broker keeping the store's contract (README.md, `fileBackup.durability`
 * `each`: blobs written temp, fsync, rename; the journal line durable before the change)
 * must do before a change to an existing regular file: copy it to a temp file, fsync
 * that, rename it to its content's name, and make the journal line naming it durable (one
 * fdatasync). No policy, no path resolution, no metadata, no directory sync, no dedup
 * check: a lower bound, on the same disk as the workload, for the floor runner with
 * backups (`floor-backup`).
 */
export class DurableBackupFloor {
  readonly #blobs: string;
  readonly #tmp: string;
  readonly #journal: number;
  /** Paths backed up in the current run (one run is one turn: each file once). */
  #seen = new Set<string>();
  #temps = 0;
  backups = 0;

  constructor(store: string) {
    this.#blobs = path.join(store, 'blobs');
    this.#tmp = path.join(store, 'tmp');
    mkdirSync(this.#blobs, { recursive: true });
    mkdirSync(this.#tmp, { recursive: true });
    this.#journal = openSync(path.join(store, 'journal.jsonl'), C.O_WRONLY | C.O_CREAT | C.O_APPEND, 0o600);
  }

  /** A new turn: every file may be backed up once again. */
  beginRun(): void {
    this.#seen = new Set();
    this.backups = 0;
  }

  /** The floor's handler: back up what the request would change, then allow it on its lexical path. */
  readonly handler: KernelHandler = async (request) => {
    const target = changedFile(request);
    if (target !== undefined) this.#backUp(target);
    return answerAtOnce(request);
  };

  close(): void {
    closeSync(this.#journal);
  }

  #backUp(file: string): void {
    if (this.#seen.has(file)) return;
    let data: Buffer;
    try {
      if (!lstatSync(file).isFile()) return;
      data = readFileSync(file);
    } catch {
      return; // nothing there to keep
    }
    this.#seen.add(file);
    const sha256 = createHash('sha256').update(data).digest('hex');
    const tmp = path.join(this.#tmp, String((this.#temps += 1)));
    const fd = openSync(tmp, C.O_WRONLY | C.O_CREAT | C.O_TRUNC, 0o600);
    try {
      writeSync(fd, data);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path.join(this.#blobs, sha256));
    writeSync(this.#journal, `${JSON.stringify({ path: file, sha256, size: data.length })}\n`);
    fdatasyncSync(this.#journal);
    this.backups += 1;
  }
}

const WRITE_ACCESS = C.O_WRONLY | C.O_RDWR;

/** The existing file a request would change (as the product backs up), or undefined. */
export function changedFile(request: KernelRequest): string | undefined {
  switch (request.op) {
    case 'open':
      // An exclusive create changes nothing that exists; any other write-mode open may.
      if ((request.flags & WRITE_ACCESS) === 0 && (request.flags & C.O_TRUNC) === 0) return undefined;
      return (request.flags & C.O_CREAT) !== 0 && (request.flags & C.O_EXCL) !== 0 ? undefined : request.path;
    case 'truncate':
    case 'unlink':
      return request.path;
    case 'rename':
      return request.to;
    default:
      return undefined;
  }
}
