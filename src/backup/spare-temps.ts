import fs from 'node:fs/promises';
import { constants as C, lstatSync, rmSync } from 'node:fs';
import path from 'node:path';
import { tempName } from './fs-util.js';

/** Name prefix of a spare: an empty temp file made ahead of time. */
export const SPARE_PREFIX = 's-';

/** A spare older than this is not used (GC removes temps older than an hour; see gc.ts). */
const SPARE_MAX_AGE_MS = 10 * 60 * 1000;

/**
 * Empty temp files in the store's private `tmp/`, made on the thread pool while the
 * broker waits for other things, so a backup does not wait for a new inode: on file
 * systems that allocate inodes slowly (ext4 initialising inode tables, network file
 * systems) creating the temp was the largest part of backing up a small file. A spare
 * is only ever an empty regular file of ours; when none is ready, the caller creates
 * its temp as before. Spares left behind are stale temps, removed like any other.
 */
export class SpareTemps {
  readonly #dir: string;
  #want: number;
  readonly #ready: string[] = [];
  /** The refill in flight: one at a time. */
  #filling: Promise<void> | undefined;

  constructor(dir: string, want: number) {
    this.#dir = dir;
    this.#want = want;
  }

  /** A spare's path (empty, regular, recent), or undefined when none is ready. Starts a refill. */
  take(): string | undefined {
    let found: string | undefined;
    while (found === undefined && this.#ready.length > 0) {
      const candidate = this.#ready.pop() as string;
      const stats = lstatSync(candidate, { throwIfNoEntry: false });
      const ours = stats?.isFile() === true && stats.size === 0 && stats.nlink === 1;
      if (ours && Date.now() - stats.mtimeMs < SPARE_MAX_AGE_MS) found = candidate;
      else if (ours) rmSync(candidate, { force: true }); // too old to trust near GC's age; anything else is left as found
    }
    this.refill();
    return found;
  }

  /**
   * Make no more and remove the spares that are ready (the store is closing); resolves once
   * none is left being made, so nothing appears in the directory after.
   */
  async stop(): Promise<void> {
    this.#want = 0;
    for (const file of this.#ready.splice(0)) rmSync(file, { force: true });
    await this.#filling;
  }

  /** Make spares until `want` are ready; one refill at a time, errors only end it (the caller falls back). */
  refill(): void {
    if (this.#filling !== undefined || this.#want === 0) return;
    this.#filling = this.#fill().finally(() => {
      this.#filling = undefined;
    });
  }

  async #fill(): Promise<void> {
    try {
      while (this.#ready.length < this.#want) {
        const file = path.join(this.#dir, tempName(SPARE_PREFIX));
        // Created read-only: no descriptor open for writing lingers (the file system stays remountable read-only).
        const handle = await fs.open(file, C.O_RDONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o600);
        await handle.close();
        if (this.#want === 0) rmSync(file, { force: true }); // stopped meanwhile
        else this.#ready.push(file);
      }
    } catch {
      // No spare this time: backups create their temps themselves.
    }
  }
}
