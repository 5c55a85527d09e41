/**
 * Keeping a file whole instead of copying it (src/backup/aside.ts, SessionBackupStore's
 * backupAside): only a regular file on the store's file system with one name that nobody
 * holds open for writing is kept by its hash for its performer to move into the store;
 * anything else is copied. Settling after the performer checks that the blob is there, or
 * copies the file when the change did not happen.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, existsSync, lstatSync, openSync, renameSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readForAside, storePlaceOf } from '../../src/backup/aside.js';
import { SessionBackupStore } from '../../src/backup/session-store.js';
import { nativeMetadataOps } from '../../src/native/metadata-ops.js';
import { native } from '../../src/native/loader.js';
import { ErrorCodes } from '../../src/core/index.js';

const TURN = '20261204-120000-abcdef';
const sha = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

let base: string;
let home: string;
let ws: string;
const holders: ChildProcess[] = [];
const stores: SessionBackupStore[] = [];

beforeEach(async () => {
  base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'bsh-aside-')));
  home = path.join(base, 'home');
  ws = path.join(base, 'ws');
  await fs.mkdir(home);
  await fs.mkdir(ws);
});
afterEach(async () => {
  for (const child of holders.splice(0)) child.kill('SIGKILL');
  // Its spare temp files are made in the background: closed first, so nothing writes while the world goes.
  for (const store of stores.splice(0)) await store.close();
  await fs.rm(base, { recursive: true, force: true });
});

async function open(durability: 'each' | 'turn' = 'turn'): Promise<SessionBackupStore> {
  const store = await SessionBackupStore.open({ home, sessionId: 's1', metadata: nativeMetadataOps(), durability });
  stores.push(store);
  return store;
}

/** A python process that maps `file` shared and writable, closes its descriptor and waits; resolves once it holds the mapping. */
async function mapWritable(file: string): Promise<void> {
  const child = spawn('python3', ['-c', 'import mmap,os,sys,time\nfd=os.open(sys.argv[1],os.O_RDWR)\nm=mmap.mmap(fd,0)\nos.close(fd)\nprint("mapped",flush=True)\ntime.sleep(60)', file], { stdio: ['ignore', 'pipe', 'inherit'] });
  holders.push(child);
  await new Promise<void>((resolve) => child.stdout?.once('data', () => resolve()));
}

describe('readForAside', () => {
  const heldForWriting = (fd: number) => native().heldForWriting(fd);
  const read = async (file: string) => readForAside(file, lstatSync(file, { bigint: true }), storePlaceOf(home), heldForWriting, false);

  it('a regular file with one name on the store\'s file system: its hash, read while nobody writes it', async () => {
    const file = path.join(ws, 'f');
    await fs.writeFile(file, 'kept whole\n');
    expect(await read(file)).toMatchObject({ ok: true, sha256: sha('kept whole\n'), size: 11 });
  });

  it.each([
    ['a second name', async (file: string) => fs.link(file, `${file}.other`), /2 names/],
    ['a descriptor open for writing', async (file: string) => void openSync(file, 'a'), /open for writing/],
    ['a writable shared mapping whose descriptor is closed', mapWritable, /open for writing/],
  ])('copied when it has %s', async (_name, prepare, why) => {
    const file = path.join(ws, 'f');
    await fs.writeFile(file, 'data\n');
    await prepare(file);
    const result = await read(file);
    expect(result.ok).toBe(false);
    expect(!result.ok && result.why).toMatch(why);
  });

  it('copied from another file system than the store\'s', async () => {
    const shm = await fs.mkdtemp('/dev/shm/bsh-aside-');
    try {
      const file = path.join(shm, 'f');
      await fs.writeFile(file, 'elsewhere\n');
      expect(await read(file)).toEqual({ ok: false, why: 'on another file system than the store' });
    } finally {
      await fs.rm(shm, { recursive: true, force: true });
    }
  });

  it('copied when nobody can tell whether it is open for writing', async () => {
    const file = path.join(ws, 'f');
    await fs.writeFile(file, 'data\n');
    const result = await readForAside(file, lstatSync(file, { bigint: true }), storePlaceOf(home), undefined, false);
    expect(result.ok).toBe(false);
  });
});

describe('backupAside', () => {
  it('records the file by its hash and hands the blob to move it to; once moved, the blob is the file itself (no byte copied, no cap)', async () => {
    const store = await open();
    store.configure({ fileBackupMaxSizeMB: 1 });
    await store.beginTurn(TURN);
    const file = path.join(ws, 'big');
    const bytes = Buffer.alloc(3 * 1024 * 1024, 7);
    await fs.writeFile(file, bytes);
    const inode = lstatSync(file).ino;
    const kept = await store.backupAside(file, { turnId: TURN, operation: 'delete' });
    if (!kept || !('into' in kept)) throw new Error('not kept whole');
    expect(kept.entry).toMatchObject({ path: file, kind: 'file', sha256: sha(bytes), size: bytes.length });
    expect(kept.into).toBe(store.blobs.absolutePath(sha(bytes)));
    // What the supervisor does: move it there instead of unlinking it.
    renameSync(file, kept.into);
    await kept.settle();
    expect(lstatSync(kept.into).ino).toBe(inode);
    expect(lstatSync(kept.into).mode & 0o777).toBe(0o600);
    expect(store.blobs.pendingSyncs).toBe(1);
    expect((await store.readBlob(sha(bytes))).equals(bytes)).toBe(true);
    await store.commitTurn(TURN, 'deleted');
    expect(store.blobs.pendingSyncs).toBe(0);
  });

  it('a change that did not happen: settling copies the file, still where it was, into the blob', async () => {
    const store = await open('each');
    await store.beginTurn(TURN);
    const file = path.join(ws, 'f');
    await fs.writeFile(file, 'stays\n');
    const kept = await store.backupAside(file, { turnId: TURN, operation: 'delete' });
    if (!kept || !('into' in kept)) throw new Error('not kept whole');
    expect(existsSync(kept.into)).toBe(false);
    await kept.settle();
    expect(lstatSync(kept.into).ino).not.toBe(lstatSync(file).ino);
    expect((await store.readBlob(sha('stays\n'))).toString()).toBe('stays\n');
  });

  it('a file held open for writing is copied as any backup is, and counted once in the turn', async () => {
    const store = await open();
    await store.beginTurn(TURN);
    const file = path.join(ws, 'f');
    await fs.writeFile(file, 'held\n');
    const fd = openSync(file, 'r+');
    try {
      const kept = await store.backupAside(file, { turnId: TURN, operation: 'delete' });
      expect(kept && 'into' in kept).toBe(false);
      expect(kept).toMatchObject({ path: file, sha256: sha('held\n') });
      expect(lstatSync(store.blobs.absolutePath(sha('held\n'))).ino).not.toBe(lstatSync(file).ino);
      expect(await store.backupAside(file, { turnId: TURN, operation: 'delete' })).toBeUndefined();
    } finally {
      closeSync(fd);
    }
  });

  it('a store with a directory replaced takes no backup at all', async () => {
    const store = await open();
    await store.beginTurn(TURN);
    const file = path.join(ws, 'f');
    await fs.writeFile(file, 'data\n');
    await fs.rm(store.layout.tmp, { recursive: true });
    await fs.writeFile(store.layout.tmp, 'not a directory\n');
    await expect(store.backupAside(file, { turnId: TURN, operation: 'delete' })).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED });
  });
});
