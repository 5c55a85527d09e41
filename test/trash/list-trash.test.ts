import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { diskUsage, listTrash, moveToTrash, readDirectorySizes, restoreFromTrash } from '../../src/trash/index.js';
import { FIXED_NOW, makeSandbox, type Sandbox } from './helpers.js';

let box: Sandbox;
beforeEach(async () => {
  box = await makeSandbox();
});
afterEach(async () => {
  await box.cleanup();
});

describe('listTrash', () => {
  it('returns nothing for a trash that does not exist yet', async () => {
    expect(await listTrash(box.homeTrash)).toEqual([]);
  });

  it('lists good entries and reports broken ones without throwing', async () => {
    const good = join(box.work, 'good file.txt');
    await fs.writeFile(good, 'g');
    const item = await moveToTrash(good, { env: box.env, now: FIXED_NOW });
    const info = join(box.homeTrash, 'info');
    const files = join(box.homeTrash, 'files');
    await fs.writeFile(join(info, 'garbage.trashinfo'), 'not an info file');
    await fs.writeFile(join(files, 'garbage'), '');
    await fs.writeFile(join(info, 'gone.trashinfo'), '[Trash Info]\nPath=/gone\nDeletionDate=2024-01-01T00:00:00\n');
    await fs.writeFile(join(info, 'unrelated.txt'), 'ignored');
    await fs.writeFile(join(files, 'no-info'), 'ignored too');

    const entries = await listTrash(box.homeTrash);

    expect(entries).toEqual([
      {
        status: 'broken',
        name: 'garbage',
        trashDir: box.homeTrash,
        infoPath: join(info, 'garbage.trashinfo'),
        trashedPath: join(files, 'garbage'),
        problem: expect.stringMatching(/no \[Trash Info\] group/),
      },
      {
        status: 'broken',
        name: 'gone',
        trashDir: box.homeTrash,
        infoPath: join(info, 'gone.trashinfo'),
        trashedPath: join(files, 'gone'),
        problem: expect.stringMatching(/missing from files/),
      },
      {
        status: 'ok',
        name: 'good file.txt',
        trashDir: box.homeTrash,
        infoPath: item.infoPath,
        trashedPath: item.trashedPath,
        originalPath: good,
        encodedPath: `${box.work}/good%20file.txt`,
        deletedAt: FIXED_NOW,
      },
    ]);
  });
});

describe('directorysizes cache', () => {
  it('records a trashed directory when asked, and forgets it on restore', async () => {
    const dir = join(box.work, 'big dir');
    await fs.mkdir(join(dir, 'sub'), { recursive: true });
    await fs.writeFile(join(dir, 'a'), Buffer.alloc(10_000, 1));
    await fs.writeFile(join(dir, 'sub', 'b'), Buffer.alloc(5_000, 2));
    await fs.link(join(dir, 'a'), join(dir, 'sub', 'a-hardlink'));
    const expectedSize = await diskUsage(dir);

    const item = await moveToTrash(dir, { env: box.env, directorySizes: true });

    const infoMtime = Math.floor((await fs.stat(item.infoPath)).mtimeMs / 1000);
    const text = await fs.readFile(join(box.homeTrash, 'directorysizes'), 'utf8');
    expect(text).toBe(`${expectedSize} ${infoMtime} big%20dir\n`);
    expect(await readDirectorySizes(box.homeTrash)).toEqual([{ name: 'big dir', size: expectedSize, mtime: infoMtime }]);

    await restoreFromTrash(item.trashedPath);
    expect(await fs.readFile(join(box.homeTrash, 'directorysizes'), 'utf8')).toBe('');
  });

  it('counts blocks like du: a hard-linked file once, the directories themselves too', async () => {
    const dir = join(box.work, 'du');
    await fs.mkdir(dir);
    await fs.writeFile(join(dir, 'f'), Buffer.alloc(64 * 1024, 7));
    const single = await diskUsage(dir);
    await fs.link(join(dir, 'f'), join(dir, 'g'));
    expect(await diskUsage(dir)).toBe(single);
    const dirBlocks = (await fs.stat(dir)).blocks * 512;
    const fileBlocks = (await fs.stat(join(dir, 'f'))).blocks * 512;
    expect(single).toBe(dirBlocks + fileBlocks);
  });

  it('leaves the cache alone unless asked', async () => {
    const dir = join(box.work, 'plain');
    await fs.mkdir(dir);
    await moveToTrash(dir, { env: box.env });
    expect(await readDirectorySizes(box.homeTrash)).toEqual([]);
  });
});
