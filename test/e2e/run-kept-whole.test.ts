/**
 * `brokered-shell run` in the real kernel sandbox: a file that `rm` or a rename over it
 * removes is moved into the backup store instead of copied (the blob is the old file's
 * own inode), so its size does not matter; one still open for writing, or with another
 * name, is copied as before. A change of metadata alone (chmod -R) keeps the metadata,
 * no bytes. Every case restores byte for byte.
 */
import { lstatSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BackupHome } from '../../src/backup/index.js';
import { describeRun, makeWorld, onlyTurn, removeWorld, restoreTurn, run, sha256, type World } from './run-helpers.js';
import { stampDirs, treeSnapshot } from './rewind-helpers.js';

let world: World | undefined;
afterEach(async () => {
  await removeWorld(world);
  world = undefined;
});

/** The inode of the blob the turn keeps `file` in. */
async function blobInode(world: World, session: string, file: string): Promise<bigint> {
  const turn = await onlyTurn(world, session);
  const entry = turn.files.find((f) => f.path === file);
  if (!entry?.sha256) throw new Error(`no content entry for ${file}`);
  const store = await new BackupHome({ home: world.home }).session(session);
  return lstatSync(store.blobs.absolutePath(entry.sha256), { bigint: true }).ino;
}

describe('files a change removes, kept whole', () => {
  it('rm of a 27 MB file (over the 10 MiB cap) moves it into the store; the restore brings it back', { timeout: 60_000 }, async () => {
    world = await makeWorld('kept-rm');
    const file = path.join(world.ws, 'big.bin');
    const bytes = Buffer.alloc(27 * 1024 * 1024);
    for (let i = 0; i < bytes.length; i += 4096) bytes.writeUInt32LE(i, i);
    await fs.writeFile(file, bytes);
    const inode = lstatSync(file, { bigint: true }).ino;
    const result = await run(world, 'rm big.bin', { session: 'kept-rm' });
    expect(result.status, describeRun(result)).toBe(0);
    await expect(fs.lstat(file)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await blobInode(world, 'kept-rm', file)).toBe(inode);
    const turn = await onlyTurn(world, 'kept-rm');
    const restored = await restoreTurn(world, turn.id);
    expect(restored.status, describeRun(restored)).toBe(0);
    expect(sha256(await fs.readFile(file))).toBe(sha256(bytes));
  });

  it('sed -i renames its new file over the old one: the old one goes into the store', { timeout: 30_000 }, async () => {
    world = await makeWorld('kept-sed');
    const file = path.join(world.ws, 'notes.txt');
    await fs.writeFile(file, 'alpha\nbeta\n');
    await fs.chmod(file, 0o640);
    const inode = lstatSync(file, { bigint: true }).ino;
    const result = await run(world, 'sed -i s/alpha/gamma/ notes.txt', { session: 'kept-sed' });
    expect(result.status, describeRun(result)).toBe(0);
    expect(await fs.readFile(file, 'utf8')).toBe('gamma\nbeta\n');
    expect(await blobInode(world, 'kept-sed', file)).toBe(inode);
    const restored = await restoreTurn(world, (await onlyTurn(world, 'kept-sed')).id);
    expect(restored.status, describeRun(restored)).toBe(0);
    expect(await fs.readFile(file, 'utf8')).toBe('alpha\nbeta\n');
    expect((await fs.stat(file)).mode & 0o777).toBe(0o640);
  });

  it.each([
    ['still open for writing', 'exec 3>>held.txt; rm held.txt'],
    ['with a second name', 'ln held.txt other.txt && rm held.txt'],
  ])('a file %s is copied, not moved, and restored', { timeout: 30_000 }, async (_name, command) => {
    world = await makeWorld('kept-copied');
    const file = path.join(world.ws, 'held.txt');
    await fs.writeFile(file, 'the old bytes\n');
    const inode = lstatSync(file, { bigint: true }).ino;
    const result = await run(world, command, { session: 'kept-copied' });
    expect(result.status, describeRun(result)).toBe(0);
    expect(await blobInode(world, 'kept-copied', file)).not.toBe(inode);
    await fs.rm(path.join(world.ws, 'other.txt'), { force: true });
    const restored = await restoreTurn(world, (await onlyTurn(world, 'kept-copied')).id, ['--force']);
    expect(restored.status, describeRun(restored)).toBe(0);
    expect(await fs.readFile(file, 'utf8')).toBe('the old bytes\n');
  });

  it('chmod -R keeps each file\'s metadata and no byte of it; the restore puts every mode back', { timeout: 60_000 }, async () => {
    world = await makeWorld('kept-chmod');
    const tree = path.join(world.ws, 'tree');
    for (let d = 0; d < 4; d++) {
      await fs.mkdir(path.join(tree, `d${d}`), { recursive: true });
      for (let f = 0; f < 25; f++) await fs.writeFile(path.join(tree, `d${d}`, `f${f}`), `file ${d}/${f}\n`, { mode: 0o644 });
    }
    await stampDirs(tree);
    const before = await treeSnapshot(tree);
    const result = await run(world, 'chmod -R go-r tree', { session: 'kept-chmod' });
    expect(result.status, describeRun(result)).toBe(0);
    expect(result.stderr).toMatch(/backed up 100 files/);
    const turn = await onlyTurn(world, 'kept-chmod');
    expect(turn.files).toEqual([]);
    expect((turn.structure ?? []).filter((e) => e.kind === 'metadata')).toHaveLength(100);
    const store = await new BackupHome({ home: world.home }).session('kept-chmod');
    expect(await store.blobs.list()).toEqual([]);
    const restored = await restoreTurn(world, turn.id);
    expect(restored.status, describeRun(restored)).toBe(0);
    expect(await treeSnapshot(tree)).toEqual(before);
  });
});
