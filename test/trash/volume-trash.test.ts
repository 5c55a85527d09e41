import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/core/errors.js';
import { findTrashDir, listTrash, moveToTrash, restoreFromTrash } from '../../src/trash/index.js';
import { parseMountInfo } from '../../src/trash/mount-point.js';
import { FIXED_NOW, FIXED_NOW_TEXT, exists, makeSandbox, type Sandbox } from './helpers.js';

/**
 * A second volume: a small tmpfs mounted inside the sandbox. These tests run as root
 * (as every session and CI here does); mounts are undone in afterAll.
 */

const uid = process.getuid?.() ?? 0;
let box: Sandbox;
let volume: string;
const mounted: string[] = [];

function mount(args: string[], target: string): void {
  execFileSync('mount', [...args, target], { stdio: 'pipe' });
  mounted.push(target);
}

beforeAll(async () => {
  box = await makeSandbox('bsh-trash-vol-');
  volume = join(box.root, 'volume');
  await fs.mkdir(volume);
  mount(['-t', 'tmpfs', '-o', 'size=4m,mode=0755', 'tmpfs'], volume);
});

afterAll(async () => {
  for (const target of mounted.reverse()) {
    try {
      execFileSync('umount', [target], { stdio: 'pipe' });
    } catch {
      execFileSync('umount', ['-l', target], { stdio: 'pipe' });
    }
  }
  await box.cleanup();
});

beforeEach(async () => {
  for (const entry of await fs.readdir(volume)) await fs.rm(join(volume, entry), { recursive: true, force: true });
});

async function fileOnVolume(rel: string, content: string): Promise<string> {
  const path = join(volume, rel);
  await fs.mkdir(join(path, '..'), { recursive: true });
  await fs.writeFile(path, content);
  return path;
}

describe('trashing on another volume', () => {
  it('uses $topdir/.Trash-$uid with a relative Path= and restores from it', async () => {
    const path = await fileOnVolume('docs/note é.txt', 'on tmpfs');

    const item = await moveToTrash(path, { env: box.env, now: FIXED_NOW });

    const trashDir = join(volume, `.Trash-${uid}`);
    expect(item).toMatchObject({
      kind: 'user-topdir',
      trashDir,
      trashedPath: join(trashDir, 'files', 'note é.txt'),
      infoPath: join(trashDir, 'info', 'note é.txt.trashinfo'),
    });
    expect(await fs.readFile(item.trashedPath, 'utf8')).toBe('on tmpfs');
    expect(await fs.readFile(item.infoPath, 'utf8')).toBe(
      `[Trash Info]\nPath=docs/note%20%C3%A9.txt\nDeletionDate=${FIXED_NOW_TEXT}\n`,
    );
    expect(await exists(path)).toBe(false);
    expect((await fs.stat(trashDir)).mode & 0o7777).toBe(0o700);
    expect(await exists(box.homeTrash)).toBe(false);
    expect((await listTrash(trashDir))[0]).toMatchObject({ status: 'ok', originalPath: path });

    expect(await restoreFromTrash(item.infoPath)).toEqual({ restoredTo: path });
    expect(await fs.readFile(path, 'utf8')).toBe('on tmpfs');
  });

  it('uses a sticky, real $topdir/.Trash as .Trash/$uid', async () => {
    await fs.mkdir(join(volume, '.Trash'));
    await fs.chmod(join(volume, '.Trash'), 0o1777);
    const path = await fileOnVolume('shared.txt', 'shared');

    const item = await moveToTrash(path, { env: box.env, now: FIXED_NOW });

    const trashDir = join(volume, '.Trash', String(uid));
    expect(item).toMatchObject({ kind: 'shared-topdir', trashDir, trashedPath: join(trashDir, 'files', 'shared.txt') });
    expect(item.ignoredSharedTrash).toBeUndefined();
    expect((await fs.stat(trashDir)).mode & 0o7777).toBe(0o700);
    expect(await fs.readFile(item.infoPath, 'utf8')).toContain('\nPath=shared.txt\n');
    expect(await exists(join(volume, `.Trash-${uid}`))).toBe(false);

    await restoreFromTrash(item.trashedPath);
    expect(await fs.readFile(path, 'utf8')).toBe('shared');
  });

  it('ignores a .Trash without the sticky bit', async () => {
    await fs.mkdir(join(volume, '.Trash'));
    await fs.chmod(join(volume, '.Trash'), 0o777);
    const path = await fileOnVolume('a.txt', 'a');

    const item = await moveToTrash(path, { env: box.env });

    expect(item.trashDir).toBe(join(volume, `.Trash-${uid}`));
    expect(item.ignoredSharedTrash).toMatch(/sticky/);
    expect(await fs.readdir(join(volume, '.Trash'))).toEqual([]);
  });

  it('ignores a .Trash that is a symlink, even to a sticky directory', async () => {
    const real = join(volume, 'real-trash');
    await fs.mkdir(real);
    await fs.chmod(real, 0o1777);
    await fs.symlink(real, join(volume, '.Trash'));
    const path = await fileOnVolume('b.txt', 'b');

    const item = await moveToTrash(path, { env: box.env });

    expect(item.trashDir).toBe(join(volume, `.Trash-${uid}`));
    expect(item.ignoredSharedTrash).toMatch(/symbolic link/);
    expect(await fs.readdir(real)).toEqual([]);
  });

  it('throws, moving nothing, when no trash on the volume can be used', async () => {
    await fs.writeFile(join(volume, `.Trash-${uid}`), 'a file, not a trash');
    const path = await fileOnVolume('stuck.txt', 'stuck');

    await expect(moveToTrash(path, { env: box.env })).rejects.toMatchObject({ code: ErrorCodes.HOST_OP_FAILED });

    expect(await fs.readFile(path, 'utf8')).toBe('stuck');
    expect(await exists(box.homeTrash)).toBe(false);
  });

  it('refuses a .Trash-$uid owned by someone else', async () => {
    await fs.mkdir(join(volume, `.Trash-${uid}`), { mode: 0o700 });
    await fs.chown(join(volume, `.Trash-${uid}`), uid + 4242, uid + 4242);
    const path = await fileOnVolume('mine.txt', 'mine');

    await expect(moveToTrash(path, { env: box.env })).rejects.toMatchObject({
      code: ErrorCodes.HOST_OP_FAILED,
      errno: 'EPERM',
    });
    expect(await fs.readFile(path, 'utf8')).toBe('mine');
  });

  it('uses the home trash when it lives on the same volume as the item', async () => {
    const env = { XDG_DATA_HOME: join(volume, 'xdg') };
    const path = await fileOnVolume('home-side.txt', 'h');

    const item = await moveToTrash(path, { env, now: FIXED_NOW });

    expect(item).toMatchObject({ kind: 'home', trashDir: join(volume, 'xdg', 'Trash') });
    expect(await fs.readFile(item.infoPath, 'utf8')).toContain(`\nPath=${path}\n`);
  });

  it('refuses to trash the mount point itself', async () => {
    await expect(moveToTrash(volume, { env: box.env })).rejects.toMatchObject({ code: ErrorCodes.BAD_REQUEST });
    const mounts = parseMountInfo(await fs.readFile('/proc/self/mountinfo', 'utf8'));
    expect(mounts.find((m) => m.mountPoint === volume)?.fsType).toBe('tmpfs');
  });

  it('finds the bind mount as the top directory, where walking up by st_dev would overshoot', async () => {
    // A bind mount of the volume onto a directory of the same volume: st_dev is the same
    // above and below, but rename() cannot cross the mount, so the trash must sit inside it.
    await fs.mkdir(join(volume, 'source'));
    await fs.mkdir(join(volume, 'outer', 'bound'), { recursive: true });
    const bound = join(volume, 'outer', 'bound');
    mount(['--bind', join(volume, 'source')], bound);
    try {
      const path = join(bound, 'inner.txt');
      await fs.writeFile(path, 'inner');

      expect(await findTrashDir(path, { env: box.env, create: false })).toMatchObject({
        topDir: bound,
        trashDir: join(bound, `.Trash-${uid}`),
      });
      const item = await moveToTrash(path, { env: box.env });
      expect(await fs.readFile(item.trashedPath, 'utf8')).toBe('inner');
      await restoreFromTrash(item.infoPath);
      expect(await fs.readFile(path, 'utf8')).toBe('inner');
    } finally {
      execFileSync('umount', [bound], { stdio: 'pipe' });
      mounted.splice(mounted.indexOf(bound), 1);
    }
  });
});
