import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/core/errors.js';
import { moveToTrash } from '../../src/trash/index.js';
import { FIXED_NOW, FIXED_NOW_TEXT, exists, makeSandbox, snapshotTree, type Sandbox } from './helpers.js';

let box: Sandbox;
beforeEach(async () => {
  box = await makeSandbox();
});
afterEach(async () => {
  await box.cleanup();
});

const info = (encodedPath: string): string => `[Trash Info]\nPath=${encodedPath}\nDeletionDate=${FIXED_NOW_TEXT}\n`;

describe('moveToTrash into the home trash', () => {
  it('creates the home trash 0700 and moves a file there byte for byte', async () => {
    const file = join(box.work, 'report.bin');
    const bytes = Buffer.from([0, 1, 2, 255, 254, 10, 13, 0]);
    await fs.writeFile(file, bytes);

    const item = await moveToTrash(file, { env: box.env, now: FIXED_NOW });

    expect(item).toEqual({
      originalPath: file,
      trashDir: box.homeTrash,
      trashedPath: join(box.homeTrash, 'files', 'report.bin'),
      infoPath: join(box.homeTrash, 'info', 'report.bin.trashinfo'),
      deletedAt: FIXED_NOW,
      kind: 'home',
    });
    expect(await exists(file)).toBe(false);
    expect(await fs.readFile(item.trashedPath)).toEqual(bytes);
    expect(await fs.readFile(item.infoPath, 'utf8')).toBe(info(file));
    for (const dir of [box.homeTrash, join(box.homeTrash, 'files'), join(box.homeTrash, 'info')]) {
      expect((await fs.stat(dir)).mode & 0o7777).toBe(0o700);
    }
    expect((await fs.stat(item.infoPath)).mode & 0o777).toBe(0o600);
  });

  it('moves a directory tree whole', async () => {
    const dir = join(box.work, 'project');
    await fs.mkdir(join(dir, 'src', 'deep'), { recursive: true });
    await fs.writeFile(join(dir, 'README'), 'hello\n');
    await fs.writeFile(join(dir, 'src', 'deep', 'x.ts'), 'export {};\n');
    await fs.symlink('../README', join(dir, 'src', 'readme-link'));
    await fs.mkdir(join(dir, 'empty'));
    const before = await snapshotTree(dir);

    const item = await moveToTrash(dir, { env: box.env, now: FIXED_NOW });

    expect(await exists(dir)).toBe(false);
    expect(await snapshotTree(item.trashedPath)).toEqual(before);
    expect(await fs.readFile(item.infoPath, 'utf8')).toBe(info(dir));
  });

  it('trashes a symlink itself and leaves its target alone', async () => {
    const target = join(box.work, 'target.txt');
    const link = join(box.work, 'link.txt');
    await fs.writeFile(target, 'keep me');
    await fs.symlink(target, link);

    const item = await moveToTrash(link, { env: box.env, now: FIXED_NOW });

    expect(await exists(link)).toBe(false);
    expect(await fs.readFile(target, 'utf8')).toBe('keep me');
    expect((await fs.lstat(item.trashedPath)).isSymbolicLink()).toBe(true);
    expect(await fs.readlink(item.trashedPath)).toBe(target);
  });

  it('trashes a link to a directory given with a trailing slash as the link', async () => {
    const targetDir = join(box.work, 'real-dir');
    await fs.mkdir(targetDir);
    await fs.writeFile(join(targetDir, 'f'), 'x');
    await fs.symlink(targetDir, join(box.work, 'dir-link'));

    const item = await moveToTrash(`${join(box.work, 'dir-link')}/`, { env: box.env, now: FIXED_NOW });

    expect(item.trashedPath).toBe(join(box.homeTrash, 'files', 'dir-link'));
    expect((await fs.lstat(item.trashedPath)).isSymbolicLink()).toBe(true);
    expect(await fs.readFile(join(targetDir, 'f'), 'utf8')).toBe('x');
  });

  it('trashes a dangling symlink', async () => {
    const link = join(box.work, 'dangling');
    await fs.symlink(join(box.work, 'nowhere'), link);
    const item = await moveToTrash(link, { env: box.env, now: FIXED_NOW });
    expect(await fs.readlink(item.trashedPath)).toBe(join(box.work, 'nowhere'));
  });

  it.each([
    ['with spaces.txt', 'with%20spaces.txt'],
    ['100% done.txt', '100%25%20done.txt'],
    ['café-é.txt', 'caf%C3%A9-%C3%A9.txt'],
    ['日本.txt', '%E6%97%A5%E6%9C%AC.txt'],
  ])('records %j percent-encoded and keeps its name in files/', async (name, encodedName) => {
    const file = join(box.work, name);
    await fs.writeFile(file, `content of ${name}`);

    const item = await moveToTrash(file, { env: box.env, now: FIXED_NOW });

    expect(item.trashedPath).toBe(join(box.homeTrash, 'files', name));
    expect(await fs.readFile(item.trashedPath, 'utf8')).toBe(`content of ${name}`);
    expect(await fs.readFile(item.infoPath, 'utf8')).toBe(info(`${encodeDirs(box.work)}/${encodedName}`));
    expect(await exists(file)).toBe(false);
  });

  it('records the deletion time in whole seconds', async () => {
    const file = join(box.work, 'f');
    await fs.writeFile(file, '');
    const item = await moveToTrash(file, { env: box.env, now: new Date(2030, 11, 31, 23, 59, 58, 999) });
    expect(item.deletedAt).toEqual(new Date(2030, 11, 31, 23, 59, 58));
    expect(await fs.readFile(item.infoPath, 'utf8')).toContain('\nDeletionDate=2030-12-31T23:59:58\n');
  });
});

/** The temp dir's own path encoded (it is plain ASCII on every platform we run on, but stay honest). */
function encodeDirs(dir: string): string {
  return dir
    .split('/')
    .map((part) => encodeURIComponent(part))
    .join('/');
}

describe('moveToTrash refusals (nothing is moved, nothing is deleted)', () => {
  it('refuses a relative path', async () => {
    await expect(moveToTrash('work/a', { env: box.env })).rejects.toMatchObject({ code: ErrorCodes.BAD_REQUEST });
  });

  it('reports a missing item with its errno', async () => {
    await expect(moveToTrash(join(box.work, 'missing'), { env: box.env })).rejects.toMatchObject({
      code: ErrorCodes.HOST_OP_FAILED,
      errno: 'ENOENT',
    });
  });

  it('refuses items already in the trash and directories that hold the trash', async () => {
    const file = join(box.work, 'a.txt');
    await fs.writeFile(file, 'a');
    const item = await moveToTrash(file, { env: box.env });
    await expect(moveToTrash(item.trashedPath, { env: box.env })).rejects.toMatchObject({ code: ErrorCodes.BAD_REQUEST });
    await expect(moveToTrash(box.env.XDG_DATA_HOME ?? '', { env: box.env })).rejects.toMatchObject({
      code: ErrorCodes.BAD_REQUEST,
    });
    expect(await fs.readFile(item.trashedPath, 'utf8')).toBe('a');
  });

  it('throws when the home trash cannot be created, and leaves the item in place', async () => {
    // A regular file where XDG_DATA_HOME should be: mkdir fails even for root.
    await fs.writeFile(join(box.root, 'xdg-data'), 'not a dir');
    const file = join(box.work, 'stay.txt');
    await fs.writeFile(file, 'stay');
    await expect(moveToTrash(file, { env: box.env })).rejects.toMatchObject({ code: ErrorCodes.HOST_OP_FAILED });
    expect(await fs.readFile(file, 'utf8')).toBe('stay');
  });

  it('removes the claimed .trashinfo when the rename throws, leaving the original untouched', async () => {
    const file = join(box.work, 'precious.txt');
    await fs.writeFile(file, 'precious');
    const failing = (): Promise<void> => Promise.reject(Object.assign(new Error('simulated EIO'), { code: 'EIO' }));

    await expect(moveToTrash(file, { env: box.env, rename: failing })).rejects.toMatchObject({
      code: ErrorCodes.HOST_OP_FAILED,
      errno: 'EIO',
    });

    expect(await fs.readFile(file, 'utf8')).toBe('precious');
    expect(await fs.readdir(join(box.homeTrash, 'info'))).toEqual([]);
    expect(await fs.readdir(join(box.homeTrash, 'files'))).toEqual([]);
  });

  it('passes the injected rename the item and its place in files/', async () => {
    const file = join(box.work, 'via-broker.txt');
    await fs.writeFile(file, 'x');
    const calls: Array<[string, string]> = [];
    const item = await moveToTrash(file, {
      env: box.env,
      rename: async (from, to) => {
        calls.push([from, to]);
        await fs.rename(from, to);
      },
    });
    expect(calls).toEqual([[file, item.trashedPath]]);
  });
});
