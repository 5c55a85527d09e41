import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, expect } from 'vitest';
import { createLogger, type Logger } from '../../src/core/logger.js';
import { backupEntrySchema, type BackupEntry } from '../../src/backup/manifest-schema.js';
import { SessionBackupStore, type OpenStoreOptions } from '../../src/backup/session-store.js';
import { setTimesNsWithTouch } from '../../src/backup/metadata-ops.js';
import { SPARE_PREFIX } from '../../src/backup/spare-temps.js';
import { closeLater, closeOpened } from '../helpers/close-opened.js';

const made: string[] = [];

/** A fresh temp dir, removed after the test. Realpath'd: stores record resolved paths. */
export async function tempDir(prefix = 'bsh-backup-'): Promise<string> {
  const dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), prefix)));
  made.push(dir);
  return dir;
}

afterEach(async () => {
  await closeOpened();
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
  closeLater(store);
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

/**
 * What a store's tmp/ holds besides spares (empty temp files made ahead for backups,
 * src/backup/spare-temps.ts): the leftovers of a write, which a failed or finished
 * backup must not leave.
 */
export async function tempsLeft(root: string): Promise<string[]> {
  const dir = path.join(root, 'tmp');
  const left: string[] = [];
  for (const name of await filesUnder(dir)) {
    const stats = await fs.lstat(path.join(dir, name));
    if (!(name.startsWith(SPARE_PREFIX) && stats.isFile() && stats.size === 0)) left.push(name);
  }
  return left;
}

/** Give a file distinctive nanosecond times, so a restore that loses precision shows. */
export async function stampTimes(file: string, atimeNs: bigint, mtimeNs: bigint): Promise<void> {
  await setTimesNsWithTouch(file, atimeNs, mtimeNs, { noFollow: true });
}

export async function lstatNs(file: string) {
  return fs.lstat(file, { bigint: true });
}

export interface JournalOnDisk {
  /** The whole file. */
  text: string;
  lines: string[];
  header: Record<string, unknown>;
  files: BackupEntry[];
}

/**
 * An open turn's journal as it is on disk, parsed here rather than by the store: every
 * line complete, a header first, then one schema-valid entry per line.
 */
export async function journalOnDisk(root: string, turnId: string): Promise<JournalOnDisk> {
  const text = await fs.readFile(path.join(root, 'turns', `${turnId}.journal`), 'utf8');
  expect(text.endsWith('\n')).toBe(true);
  const lines = text.slice(0, -1).split('\n');
  const [header, ...entries] = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  return { text, lines, header: header ?? {}, files: entries.map((e) => backupEntrySchema.parse(e)) };
}

/** An open turn on disk: a journal and no manifest yet. */
export async function openTurnOnDisk(root: string, turnId: string): Promise<JournalOnDisk> {
  await expect(fs.access(path.join(root, 'turns', `${turnId}.json`))).rejects.toMatchObject({ code: 'ENOENT' });
  return journalOnDisk(root, turnId);
}

/** A logger that keeps what it logs at warn and above. */
export function capturingLogger(): { logger: Logger; warnings: () => Array<Record<string, unknown>> } {
  const lines: string[] = [];
  const logger = createLogger({ level: 'warn', destination: { write: (line: string) => void lines.push(line) } });
  return { logger, warnings: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}
