import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listTrash, moveToTrash, restoreFromTrash } from '../../src/trash/index.js';
import { candidateName } from '../../src/trash/claim-name.js';
import { exists, makeSandbox, type Sandbox } from './helpers.js';

let box: Sandbox;
beforeEach(async () => {
  box = await makeSandbox();
});
afterEach(async () => {
  await box.cleanup();
});

async function fileIn(dir: string, name: string, content: string): Promise<string> {
  await fs.mkdir(dir, { recursive: true });
  const path = join(dir, name);
  await fs.writeFile(path, content);
  return path;
}

describe('name collisions', () => {
  it.each([
    ['a.txt', 1, 'a.txt'],
    ['a.txt', 2, 'a.2.txt'],
    ['archive.tar.gz', 3, 'archive.tar.3.gz'],
    ['.bashrc', 2, '.bashrc.2'],
    ['Makefile', 12, 'Makefile.12'],
  ])('candidate %s #%i is %s', (base, attempt, expected) => {
    expect(candidateName(base, attempt)).toBe(expected);
  });

  it('keeps <name>.trashinfo within NAME_MAX for long names, without splitting characters', () => {
    const long = `${'é'.repeat(120)}.txt`; // 244 bytes
    for (const attempt of [1, 2, 999]) {
      const name = candidateName(long, attempt);
      expect(Buffer.byteLength(`${name}.trashinfo`)).toBeLessThanOrEqual(255);
      expect(name.endsWith(attempt === 1 ? '.txt' : `.${attempt}.txt`)).toBe(true);
      expect(name).not.toContain('\uFFFD');
    }
  });

  it('trashes a long name that would not fit with the .trashinfo suffix', async () => {
    const name = `${'x'.repeat(250)}.txt`;
    const file = await fileIn(box.work, name, 'long');
    const item = await moveToTrash(file, { env: box.env });
    expect(await fs.readFile(item.trashedPath, 'utf8')).toBe('long');
    const [entry] = await listTrash(box.homeTrash);
    expect(entry).toMatchObject({ status: 'ok', originalPath: file });
  });

  it('gives two same-named files from two dirs a.txt and a.2.txt, each restorable to its own place', async () => {
    const first = await fileIn(join(box.work, 'one'), 'a.txt', 'first');
    const second = await fileIn(join(box.work, 'two'), 'a.txt', 'second');

    const itemOne = await moveToTrash(first, { env: box.env });
    const itemTwo = await moveToTrash(second, { env: box.env });

    expect(itemOne.trashedPath).toBe(join(box.homeTrash, 'files', 'a.txt'));
    expect(itemTwo.trashedPath).toBe(join(box.homeTrash, 'files', 'a.2.txt'));
    expect(itemTwo.infoPath).toBe(join(box.homeTrash, 'info', 'a.2.txt.trashinfo'));
    expect(await fs.readFile(itemTwo.trashedPath, 'utf8')).toBe('second');

    // Restore in the opposite order: each goes home by its own info file, not by its name.
    expect(await restoreFromTrash(itemTwo.trashedPath)).toEqual({ restoredTo: second });
    expect(await restoreFromTrash(itemOne.infoPath)).toEqual({ restoredTo: first });
    expect(await fs.readFile(first, 'utf8')).toBe('first');
    expect(await fs.readFile(second, 'utf8')).toBe('second');
    expect(await listTrash(box.homeTrash)).toEqual([]);
  });

  it('does not rename over an orphan left in files/ without an info file', async () => {
    await fs.mkdir(join(box.homeTrash, 'files'), { recursive: true });
    await fs.mkdir(join(box.homeTrash, 'info'), { recursive: true });
    await fs.writeFile(join(box.homeTrash, 'files', 'a.txt'), 'orphan');
    const file = await fileIn(box.work, 'a.txt', 'new');

    const item = await moveToTrash(file, { env: box.env });

    expect(item.trashedPath).toBe(join(box.homeTrash, 'files', 'a.2.txt'));
    expect(await fs.readFile(join(box.homeTrash, 'files', 'a.txt'), 'utf8')).toBe('orphan');
    expect(await fs.readdir(join(box.homeTrash, 'info'))).toEqual(['a.2.txt.trashinfo']);
  });

  it('loses and overwrites nothing when many same-named items are trashed at once', async () => {
    const count = 40;
    const originals = await Promise.all(
      Array.from({ length: count }, (_, i) => fileIn(join(box.work, `dir-${i}`), 'same.txt', `content ${i}`)),
    );
    // A rename that yields first widens the window between claim and move.
    const slowRename = async (from: string, to: string): Promise<void> => {
      await new Promise((resolve) => setImmediate(resolve));
      await fs.rename(from, to);
    };

    const items = await Promise.all(originals.map((path) => moveToTrash(path, { env: box.env, rename: slowRename })));

    const names = items.map((item) => item.trashedPath);
    expect(new Set(names).size).toBe(count);
    expect((await fs.readdir(join(box.homeTrash, 'files'))).sort()).toEqual(
      ['same.txt', ...Array.from({ length: count - 1 }, (_, i) => `same.${i + 2}.txt`)].sort(),
    );
    for (const [i, item] of items.entries()) {
      expect(item.originalPath).toBe(originals[i]);
      expect(await fs.readFile(item.trashedPath, 'utf8')).toBe(`content ${i}`);
      expect(await exists(originals[i] ?? '')).toBe(false);
    }
    const entries = await listTrash(box.homeTrash);
    expect(entries.filter((e) => e.status === 'ok')).toHaveLength(count);

    // And every one of them goes back to its own directory with its own bytes.
    await Promise.all(items.map((item) => restoreFromTrash(item.infoPath)));
    for (const [i, path] of originals.entries()) expect(await fs.readFile(path, 'utf8')).toBe(`content ${i}`);
    expect(await fs.readdir(join(box.homeTrash, 'files'))).toEqual([]);
    expect(await fs.readdir(join(box.homeTrash, 'info'))).toEqual([]);
  });
});
