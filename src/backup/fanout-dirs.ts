import fs from 'node:fs/promises';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { errorCode, fsyncDir, mkdirPrivate } from './fs-util.js';

/** Slow-path makes in one store before the rest are made ahead: a turn that backs up many files. */
const PREPARE_AFTER = 16;

/** Fan-out directories made between two syncs of `blobs/` while preparing. */
const PREPARE_CHUNK = 32;

/** The fan-out names of `blobs/`: two hex digits, the first byte of a blob's sha256. */
const FANOUT_NAMES = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

export interface FanoutOptions {
  /** Slow-path makes before the others are prepared. Default PREPARE_AFTER; 0 never prepares. */
  prepareAfter?: number;
}

/**
 * The directories under `blobs/` that a blob is named into (`blobs/<ab>/`). Making one is
 * a new inode plus a sync of `blobs/`, paid by the first backup whose hash starts with
 * its two digits: in a fresh store most of the first few hundred backups pay it (on ext4
 * here ≈ 0.4–0.6 ms each, a third of a small backup). Once a store has made a few, the
 * rest are made ahead on the thread pool, a chunk at a time with one sync of `blobs/`
 * per chunk, while the broker waits for other things; a backup then finds its directory
 * known to be durable and makes nothing. A directory is known durable only after a sync
 * of `blobs/` that began after it existed: a backup that finds one the preparation made
 * but has not synced yet syncs `blobs/` itself.
 */
export class FanoutDirs {
  readonly #blobs: string;
  readonly #prepareAfter: number;
  readonly #durable = new Set<string>();
  /** Made (or about to be) by the preparation, and not yet covered by its sync. */
  readonly #unsynced = new Set<string>();
  #slowMakes = 0;
  #preparing: Promise<void> | undefined;
  #stopped = false;

  constructor(blobs: string, options: FanoutOptions = {}) {
    this.#blobs = blobs;
    this.#prepareAfter = options.prepareAfter ?? PREPARE_AFTER;
  }

  /**
   * Make `dir` (a fan-out directory: `blobs/<ab>`) exist. With `sync` its name is durable
   * when this returns; without, `blobs/` is left for the caller's later sync.
   */
  async ensure(dir: string, sync: boolean): Promise<void> {
    if (this.#durable.has(dir)) return;
    if (sync) {
      await mkdirPrivate(dir);
      // mkdirPrivate syncs only what it made itself; the preparation may have made it first.
      if (this.#unsynced.has(dir)) await fsyncDir(this.#blobs);
      this.#durable.add(dir);
    } else {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
    }
    this.#slowMakes += 1;
    if (this.#slowMakes === this.#prepareAfter) this.#startPreparing();
  }

  /** A known directory vanished (a rename into it failed with ENOENT): make it again next time. */
  forget(dir: string): void {
    this.#durable.delete(dir);
  }

  /** Make no more directories; resolves once nothing is in flight. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#preparing;
  }

  /** Whether every fan-out directory is known durable (for tests and benchmarks). */
  get prepared(): boolean {
    return this.#durable.size === FANOUT_NAMES.length;
  }

  /** The preparation, when it has started (for tests: resolves when it ended). */
  get preparing(): Promise<void> | undefined {
    return this.#preparing;
  }

  #startPreparing(): void {
    if (this.#preparing !== undefined || this.#stopped) return;
    this.#preparing = this.#prepare().catch(() => {
      // Nothing lost: backups make their own directories as before.
    });
  }

  async #prepare(): Promise<void> {
    const missing = FANOUT_NAMES.map((name) => path.join(this.#blobs, name)).filter((dir) => !this.#durable.has(dir));
    for (let start = 0; start < missing.length && !this.#stopped; start += PREPARE_CHUNK) {
      const chunk: string[] = [];
      for (const dir of missing.slice(start, start + PREPARE_CHUNK)) {
        if (this.#stopped) break;
        // Marked before the mkdir: a backup that sees the directory must know it may be unsynced.
        this.#unsynced.add(dir);
        chunk.push(dir);
        await fs.mkdir(dir, { mode: 0o700 }).catch((error: unknown) => {
          if (errorCode(error) !== 'EEXIST') throw error;
        });
      }
      // One sync of blobs/ covers every name made before it began, ours and the backups'.
      await fsyncDir(this.#blobs);
      for (const dir of chunk) {
        this.#unsynced.delete(dir);
        this.#durable.add(dir);
      }
    }
  }
}
