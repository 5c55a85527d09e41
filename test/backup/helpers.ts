import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach } from 'vitest';
import { SessionBackupStore, type OpenStoreOptions } from '../../src/backup/session-store.js';
import { setTimesNsWithTouch } from '../../src/backup/metadata-ops.js';

const made: string[] = [];

/** A fresh temp dir, removed after the test. Realpath'd: stores record resolved paths. */
export async function tempDir(prefix = 'bsh-backup-'): Promise<string> {
  const dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), prefix)));
  made.push(dir);
  return dir;
}

afterEach(async () => {
  while (made.length > 0) {
    const dir = made.pop();
    if (dir) await fs.rm(dir, { recursive: true, force: true });
  }
});

export interface Fixture {
  home: string;
  work: string;
  store: SessionBackupStore;
}

export async function fixture(options: Partial<OpenStoreOptions> = {}): Promise<Fixture> {
  const home = await tempDir('bsh-home-');
  const work = await tempDir('bsh-work-');
  const store = await SessionBackupStore.open({ home, sessionId: 'session-1', ...options });
  return { home, work, store };
}

/** Every file under `dir`, relative, sorted. */
export async function filesUnder(dir: string): Promise<string[]> {
  const entries = await fs.readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries
    .filter((e) => !e.isDirectory())
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)))
    .sort();
}

/** Give a file distinctive nanosecond times, so a restore that loses precision shows. */
export async function stampTimes(file: string, atimeNs: bigint, mtimeNs: bigint): Promise<void> {
  await setTimesNsWithTouch(file, atimeNs, mtimeNs, { noFollow: true });
}

export async function lstatNs(file: string) {
  return fs.lstat(file, { bigint: true });
}
