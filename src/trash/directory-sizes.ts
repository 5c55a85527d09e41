import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { decodeTrashPath, encodeTrashPath } from './path-encoding.js';
import { isErrno } from './fs-failure.js';

/**
 * `$trash/directorysizes` (trash spec 1.0): a cache, one line per trashed directory,
 * `<bytes on disk> <mtime of its .trashinfo, epoch seconds> <percent-encoded name>`.
 * It is only a cache: readers recompute a missing or stale entry, so a lost update under
 * concurrency is harmless. Updates are written to a temp file and renamed into place so
 * no reader ever sees half a file.
 */

export interface DirectorySizeEntry {
  name: string;
  size: number;
  mtime: number;
}

const FILE = 'directorysizes';

/** Disk usage like `du -B1`: allocated blocks of the tree, the directory itself included, hard links counted once. */
export async function diskUsage(root: string): Promise<number> {
  let total = 0;
  const seen = new Set<string>();
  const pending = [root];
  while (pending.length > 0) {
    const current = pending.pop();
    if (current === undefined) break;
    const stat = await fs.lstat(current, { bigint: true });
    if (stat.nlink > 1n && !stat.isDirectory()) {
      const key = `${stat.dev}:${stat.ino}`;
      if (seen.has(key)) continue;
      seen.add(key);
    }
    total += Number(stat.blocks) * 512;
    if (stat.isDirectory()) {
      for (const entry of await fs.readdir(current)) pending.push(join(current, entry));
    }
  }
  return total;
}

export function parseDirectorySizes(text: string): DirectorySizeEntry[] {
  const entries: DirectorySizeEntry[] = [];
  for (const line of text.split('\n')) {
    const m = /^(\d+) (\d+) (\S+)$/.exec(line);
    if (m === null) continue;
    try {
      entries.push({ size: Number(m[1]), mtime: Number(m[2]), name: decodeTrashPath(m[3] ?? '') });
    } catch {
      // A line we cannot decode is dropped; the cache rebuilds it on demand.
    }
  }
  return entries;
}

export async function readDirectorySizes(trashDir: string): Promise<DirectorySizeEntry[]> {
  try {
    return parseDirectorySizes(await fs.readFile(join(trashDir, FILE), 'utf8'));
  } catch (error) {
    if (isErrno(error, 'ENOENT')) return [];
    throw error;
  }
}

async function writeDirectorySizes(trashDir: string, entries: readonly DirectorySizeEntry[]): Promise<void> {
  const target = join(trashDir, FILE);
  const temp = join(trashDir, `.${FILE}.${randomBytes(6).toString('hex')}.tmp`);
  const text = entries.map((e) => `${e.size} ${e.mtime} ${encodeTrashPath(e.name)}\n`).join('');
  try {
    await fs.writeFile(temp, text, { mode: 0o600, flag: 'wx' });
    await fs.rename(temp, target);
  } catch (error) {
    await fs.unlink(temp).catch(() => undefined);
    throw error;
  }
}

/** Adds or replaces `name`'s entry, dropping entries whose item is gone from files/. */
export async function recordDirectorySize(trashDir: string, name: string): Promise<DirectorySizeEntry> {
  const [size, infoStat] = await Promise.all([
    diskUsage(join(trashDir, 'files', name)),
    fs.stat(join(trashDir, 'info', `${name}.trashinfo`)),
  ]);
  const entry: DirectorySizeEntry = { name, size, mtime: Math.floor(infoStat.mtimeMs / 1000) };
  const present = new Set(await fs.readdir(join(trashDir, 'files')));
  const kept = (await readDirectorySizes(trashDir)).filter((e) => e.name !== name && present.has(e.name));
  await writeDirectorySizes(trashDir, [...kept, entry]);
  return entry;
}

export async function forgetDirectorySize(trashDir: string, name: string): Promise<void> {
  const entries = await readDirectorySizes(trashDir);
  if (!entries.some((e) => e.name === name)) return;
  await writeDirectorySizes(
    trashDir,
    entries.filter((e) => e.name !== name),
  );
}
