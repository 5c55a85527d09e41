/**
 * A backup that reuses an existing blob (deduplication) against a concurrent GC
 * (`backups prune`, gc.ts). The reused blob is named by no journal line until the backup
 * has returned, so only its mtime can protect it: BlobStore refreshes it before checking
 * the blob, and writes the blob anew when it is gone or damaged. Each case runs the real
 * GC, with its seams placing the backup at the worst moment, and ends by reading the
 * blob back through the store (hash-verified).
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { collectGarbage, type GcFaults } from '../../src/backup/gc.js';
import { SessionBackupStore } from '../../src/backup/session-store.js';
import { sessionStoreDir, sha256 } from './fault-helpers.js';
import { closeLater, closeOpened } from '../helpers/close-opened.js';

const SESSION = 'gc-race';
const DAY_MS = 24 * 60 * 60 * 1000;

let base: string | undefined;
afterEach(async () => {
  await closeOpened();
  if (base) await fs.rm(base, { recursive: true, force: true });
  base = undefined;
});

interface Setup {
  home: string;
  store: SessionBackupStore;
  /** A source file whose content is already stored, in an old blob no turn names. */
  file: string;
  content: string;
  blobPath: string;
}

/** An old unreferenced blob, as a crashed backup or a pruned turn leaves one. */
async function setup(content: string): Promise<Setup> {
  base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'bsh-gc-race-')));
  const home = path.join(base, 'home');
  const file = path.join(base, 'source.txt');
  await fs.writeFile(file, content);
  const store = closeLater(await SessionBackupStore.open({ home, sessionId: SESSION, reflink: false }));
  const stored = await store.blobs.snapshot(file, await fs.lstat(file, { bigint: true }), 1 << 20);
  const blobPath = path.join(sessionStoreDir(home, SESSION), stored.blob);
  const old = new Date(Date.now() - 2 * DAY_MS);
  await fs.utimes(blobPath, old, old);
  return { home, store, file, content, blobPath };
}

/** A backup's blob step: snapshot the file (reusing the blob of the same content). */
async function reuse(s: Setup): Promise<string> {
  const stored = await s.store.blobs.snapshot(s.file, await fs.lstat(s.file, { bigint: true }), 1 << 20);
  expect(stored.sha256).toBe(sha256(s.content));
  return stored.sha256;
}

const gc = (s: Setup, faults?: GcFaults) => collectGarbage({ home: s.home, sessionId: SESSION, ...(faults ? { faults } : {}) });

describe('a reused blob against a concurrent GC', () => {
  it('reused before GC starts (its journal line not written yet): GC keeps it', async () => {
    const s = await setup('reused, entry not journaled yet\n');
    const before = Date.now();
    const sha = await reuse(s);
    expect((await fs.stat(s.blobPath)).mtimeMs).toBeGreaterThanOrEqual(before - 1000);
    expect(await gc(s)).toMatchObject({ blobsRemoved: 0, blobsKeptRecent: 1 });
    expect((await s.store.readBlob(sha)).toString()).toBe(s.content);
  });

  it('reused between GC\'s first look and its move: the fresh mtime travels with it, GC puts it back', async () => {
    const s = await setup('reused while GC decides\n');
    const report = await gc(s, { beforeQuarantine: async () => void (await reuse(s)) });
    expect(report).toMatchObject({ blobsRemoved: 0, blobsKeptRecent: 1 });
    expect((await s.store.readBlob(sha256(s.content))).toString()).toBe(s.content);
    expect(await fs.readdir(path.join(sessionStoreDir(s.home, SESSION), 'gc'))).toEqual([]);
  });

  it('reused while GC holds it in quarantine: the backup writes it anew, and GC\'s copy goes', async () => {
    const s = await setup('reused while quarantined\n');
    const report = await gc(s, { afterQuarantine: async () => void (await reuse(s)) });
    expect(report).toMatchObject({ blobsRemoved: 1 });
    expect((await s.store.readBlob(sha256(s.content))).toString()).toBe(s.content);
  });

  it('a damaged blob of the same name is replaced by the verified copy, not reused', async () => {
    const s = await setup('the real content\n');
    await fs.writeFile(s.blobPath, 'bit rot\n');
    const sha = await reuse(s);
    expect(await fs.readFile(s.blobPath, 'utf8')).toBe(s.content);
    expect((await s.store.readBlob(sha)).toString()).toBe(s.content);
  });
});
