import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { SessionBackupStore } from '../../src/backup/session-store.js';
import type { TurnManifest } from '../../src/backup/manifest-schema.js';
import { tempDir } from './helpers.js';
import { closeLater } from '../helpers/close-opened.js';

/** Shared by the retention-*.test.ts files: real stores on real files. */

export const sha = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');

export const SESSION = 'sess-r';

/** Contents of distinct sizes, so byte sums say exactly which blobs are counted. */
export const A1 = '1'.repeat(99) + '\n'; // 100 B
export const A2 = '2'.repeat(199) + '\n'; // 200 B
export const A3 = '3'.repeat(399) + '\n'; // 400 B
export const A4 = '4'.repeat(799) + '\n'; // 800 B (a.txt after T4; never backed up)
export const S = 's'.repeat(999) + '\n'; // 1000 B, backed up by T1 and T2 (one blob)

export const T1 = '20260101-000000-aaaaa1';
export const T2 = '20260102-000000-aaaaa2';
export const T3 = '20260103-000000-aaaaa3';
export const T4 = '20260104-000000-aaaaa4';

export const dayIso = (day: number) => `2026-01-${String(day).padStart(2, '0')}T00:00:00.000Z`;

export interface Built {
  home: string;
  work: string;
  root: string;
  a: string;
  b: string;
  /** Each turn's manifest as committed. */
  turns: TurnManifest[];
}

/** Open a session's store whose clock reads `iso`. */
export function openAt(home: string, sessionId: string, iso: string): Promise<SessionBackupStore> {
  return SessionBackupStore.open({ home, sessionId, clock: () => new Date(iso), reflink: false }).then(closeLater);
}

/** Back up each path, then change the files, then commit: one turn as the broker makes it. */
export async function turn(
  home: string,
  sessionId: string,
  turnId: string,
  iso: string,
  paths: string[],
  change: () => Promise<void>,
): Promise<TurnManifest> {
  const store = await openAt(home, sessionId, iso);
  try {
    await store.beginTurn(turnId, { startedAt: iso });
    for (const p of paths) await store.backup(p, { turnId, operation: 'open' });
    await change();
    return await store.commitTurn(turnId, `turn ${turnId}`);
  } finally {
    // Quiet before the caller looks at the home: no spare temp still being made.
    await store.close();
  }
}

/**
 * Session `sess-r`, four turns a day apart (T1 on Jan 1 … T4 on Jan 4):
 *
 *   T1  a.txt = A1, b.txt = S   then a.txt := A2
 *   T2  a.txt = A2, b.txt = S   then a.txt := A3     (S shared with T1: one blob)
 *   T3  a.txt = A3              then a.txt := A1
 *   T4  a.txt = A1              then a.txt := A4     (A1 shared with T1: one blob)
 *
 * Blobs: A1 100 + A2 200 + A3 400 + S 1000 = 1700 B stored; entries sum to
 * 1100 + 1200 + 400 + 100 = 2800 B logical. Every blob is aged past the GC grace period,
 * as the blobs of turns days old are.
 */
export async function buildStore(): Promise<Built> {
  const home = await tempDir('bsh-ret-home-');
  const work = await tempDir('bsh-ret-work-');
  const a = path.join(work, 'a.txt');
  const b = path.join(work, 'b.txt');
  await fs.writeFile(a, A1);
  await fs.writeFile(b, S);
  const turns = [
    await turn(home, SESSION, T1, dayIso(1), [a, b], () => fs.writeFile(a, A2)),
    await turn(home, SESSION, T2, dayIso(2), [a, b], () => fs.writeFile(a, A3)),
    await turn(home, SESSION, T3, dayIso(3), [a], () => fs.writeFile(a, A1)),
    await turn(home, SESSION, T4, dayIso(4), [a], () => fs.writeFile(a, A4)),
  ];
  const root = path.join(home, 'workspace', 'sessions', SESSION, 'modify_backup');
  await ageBlobs(root);
  return { home, work, root, a, b, turns };
}

/** Two hours ago: older than the one-hour grace period. */
export const hoursAgo = (hours: number) => new Date(Date.now() - hours * 60 * 60 * 1000);

/** Make every blob of a store look written two hours ago. */
export async function ageBlobs(root: string, when = hoursAgo(2)): Promise<void> {
  for (const file of await blobFiles(root)) await fs.utimes(path.join(root, file), when, when);
}

/** `blobs/ab/<sha>` paths under a store root, sorted. */
export async function blobFiles(root: string): Promise<string[]> {
  const entries = await fs.readdir(path.join(root, 'blobs'), { recursive: true, withFileTypes: true }).catch(() => []);
  return entries
    .filter((e) => e.isFile())
    .map((e) => path.relative(root, path.join(e.parentPath, e.name)))
    .sort();
}

/** The shas of the blobs on disk. */
export async function blobShas(root: string): Promise<string[]> {
  return (await blobFiles(root)).map((f) => path.basename(f)).sort();
}

/** Every file and directory under `dir` with its content hash, size, mode and mtime: "nothing changed" is equality. */
export async function treeState(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const entries = await fs.readdir(dir, { recursive: true, withFileTypes: true });
  for (const e of entries) {
    const file = path.join(e.parentPath, e.name);
    const stats = await fs.lstat(file, { bigint: true });
    const content = e.isFile() ? sha(await fs.readFile(file)) : e.isDirectory() ? 'dir' : 'other';
    out[path.relative(dir, file)] = `${content} ${stats.size} ${stats.mode} ${stats.mtimeNs}`;
  }
  return out;
}
