import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/core/errors.js';
import { moveToTrash, restoreFromTrash, type TrashedItem } from '../../src/trash/index.js';
import { exists, makeSandbox, snapshotTree, type Sandbox } from './helpers.js';

let box: Sandbox;
beforeEach(async () => {
  box = await makeSandbox();
});
afterEach(async () => {
  await box.cleanup();
});

async function trashFile(name: string, content: string | Buffer): Promise<{ path: string; item: TrashedItem }> {
  const path = join(box.work, name);
  await fs.writeFile(path, content);
  return { path, item: await moveToTrash(path, { env: box.env }) };
}

describe('restoreFromTrash', () => {
  it('puts the bytes back and removes the info file (given files/ path)', async () => {
    const bytes = Buffer.from('ünïcode bytes \u0000 and more');
    const { path, item } = await trashFile('back.txt', bytes);

    expect(await restoreFromTrash(item.trashedPath)).toEqual({ restoredTo: path });

    expect(await fs.readFile(path)).toEqual(bytes);
    expect(await exists(item.trashedPath)).toBe(false);
    expect(await exists(item.infoPath)).toBe(false);
  });

  it('restores a directory tree given its info path', async () => {
    const dir = join(box.work, 'tree');
    await fs.mkdir(join(dir, 'a', 'b'), { recursive: true });
    await fs.writeFile(join(dir, 'a', 'b', 'c.txt'), 'deep');
    await fs.symlink('a/b/c.txt', join(dir, 'link'));
    const before = await snapshotTree(dir);
    const item = await moveToTrash(dir, { env: box.env });

    await restoreFromTrash(item.infoPath);

    expect(await snapshotTree(dir)).toEqual(before);
    expect(await exists(item.infoPath)).toBe(false);
  });

  it('refuses when something exists at the original path, and overwrites on request', async () => {
    const { path, item } = await trashFile('clash.txt', 'old');
    await fs.writeFile(path, 'newer');

    await expect(restoreFromTrash(item.trashedPath)).rejects.toMatchObject({
      code: ErrorCodes.RESTORE_CONFLICT,
      errno: 'EEXIST',
    });
    expect(await fs.readFile(path, 'utf8')).toBe('newer');
    expect(await exists(item.infoPath)).toBe(true);

    await restoreFromTrash(item.trashedPath, { overwrite: true });
    expect(await fs.readFile(path, 'utf8')).toBe('old');
    expect(await exists(item.infoPath)).toBe(false);
  });

  it('with overwrite, replaces an empty directory but never a non-empty one', async () => {
    const { path, item } = await trashFile('was-a-file', 'file bytes');
    await fs.mkdir(path);
    await fs.writeFile(join(path, 'inside'), 'keep');

    await expect(restoreFromTrash(item.trashedPath, { overwrite: true })).rejects.toMatchObject({
      code: ErrorCodes.RESTORE_CONFLICT,
      errno: 'ENOTEMPTY',
    });
    expect(await fs.readFile(join(path, 'inside'), 'utf8')).toBe('keep');

    await fs.rm(join(path, 'inside'));
    await restoreFromTrash(item.trashedPath, { overwrite: true });
    expect(await fs.readFile(path, 'utf8')).toBe('file bytes');
  });

  it('with overwrite, replaces a file with a trashed directory', async () => {
    const dir = join(box.work, 'd');
    await fs.mkdir(dir);
    await fs.writeFile(join(dir, 'x'), 'x');
    const item = await moveToTrash(dir, { env: box.env });
    await fs.writeFile(dir, 'a file took its place');

    await restoreFromTrash(item.trashedPath, { overwrite: true });

    expect(await fs.readFile(join(dir, 'x'), 'utf8')).toBe('x');
  });

  it('refuses, and says so, when the parent directory is gone', async () => {
    const parent = join(box.work, 'sub');
    await fs.mkdir(parent);
    const path = join(parent, 'orphaned.txt');
    await fs.writeFile(path, 'content');
    const item = await moveToTrash(path, { env: box.env });
    await fs.rmdir(parent);

    const failure = restoreFromTrash(item.trashedPath);
    await expect(failure).rejects.toMatchObject({
      code: ErrorCodes.HOST_OP_FAILED,
      errno: 'ENOENT',
      details: { missingParent: parent },
    });
    await expect(failure).rejects.toThrow(/no longer exists/);
    expect(await exists(parent)).toBe(false);
    expect(await fs.readFile(item.trashedPath, 'utf8')).toBe('content');
    expect(await exists(item.infoPath)).toBe(true);
  });

  it('uses the injected rename, and a failing one leaves the trash entry intact', async () => {
    const { path, item } = await trashFile('r.txt', 'r');
    const failing = (): void => {
      throw Object.assign(new Error('simulated EPERM'), { code: 'EPERM' });
    };
    await expect(restoreFromTrash(item.infoPath, { rename: failing })).rejects.toMatchObject({
      code: ErrorCodes.HOST_OP_FAILED,
      errno: 'EPERM',
    });
    expect(await exists(item.infoPath)).toBe(true);
    expect(await exists(path)).toBe(false);
  });

  it.each([
    ['a path outside files/ and info/', (item: TrashedItem) => join(item.trashDir, 'elsewhere')],
    ['a relative path', () => 'files/x'],
  ])('refuses %s', async (_label, pick) => {
    const { item } = await trashFile('q.txt', 'q');
    await expect(restoreFromTrash(pick(item))).rejects.toMatchObject({ code: ErrorCodes.BAD_REQUEST });
  });

  it('refuses a broken info file and a Path= with ".."', async () => {
    const { item } = await trashFile('b.txt', 'b');
    await fs.writeFile(item.infoPath, '[Trash Info]\nPath=/x%ZZ\nDeletionDate=2024-01-01T00:00:00\n');
    await expect(restoreFromTrash(item.infoPath)).rejects.toMatchObject({ code: ErrorCodes.BAD_REQUEST });
    await fs.writeFile(item.infoPath, '[Trash Info]\nPath=../../etc/x\nDeletionDate=2024-01-01T00:00:00\n');
    await expect(restoreFromTrash(item.infoPath)).rejects.toMatchObject({ code: ErrorCodes.BAD_REQUEST });
    expect(await fs.readFile(item.trashedPath, 'utf8')).toBe('b');
  });

  it('resolves a relative Path= in the home trash against XDG_DATA_HOME', async () => {
    const { item } = await trashFile('rel.txt', 'rel');
    await fs.writeFile(item.infoPath, '[Trash Info]\nPath=restored%20here.txt\nDeletionDate=2024-01-01T00:00:00\n');
    const result = await restoreFromTrash(item.infoPath);
    expect(result.restoredTo).toBe(join(box.env.XDG_DATA_HOME ?? '', 'restored here.txt'));
    expect(await fs.readFile(result.restoredTo, 'utf8')).toBe('rel');
  });
});
