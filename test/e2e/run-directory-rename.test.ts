/**
 * A directory renamed whole in the real kernel sandbox is one record, no copy of what it
 * holds, and a rewind renames it back (the same directory, its inode kept): exact, with
 * what the turn changed inside it afterwards put right under the names it had before,
 * and undone again by `--undo-last`. When the turn reuses the name a rename left empty,
 * the renames are recorded path by path from then on, and the rewind is still exact.
 */
import { lstatSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BackupHome } from '../../src/backup/index.js';
import { describeRun, makeWorld, onlyTurn, removeWorld, restoreTurn, type World } from './run-helpers.js';
import { rescueOf, restore, stampDirs, treeSnapshot, turnIn } from './rewind-helpers.js';

let world: World | undefined;
afterEach(async () => {
  await removeWorld(world);
  world = undefined;
});

async function tree(root: string, dirs: number, files: number): Promise<void> {
  for (let d = 0; d < dirs; d++) {
    await fs.mkdir(path.join(root, `d${d}`), { recursive: true });
    for (let f = 0; f < files; f++) await fs.writeFile(path.join(root, `d${d}`, `f${f}.txt`), `file ${d}/${f}\n`);
  }
}

describe('a directory renamed whole', () => {
  it('is one record with no blob; the rewind renames the same directory back, and --undo-last renames it again', { timeout: 60_000 }, async () => {
    world = await makeWorld('rename-dir');
    const dir = path.join(world.ws, 'case');
    await tree(path.join(dir, 'src'), 10, 100);
    await stampDirs(dir);
    const before = await treeSnapshot(dir);
    const inode = lstatSync(path.join(dir, 'src')).ino;
    const turn = await turnIn(world, 'rename-dir', dir, 'mv src moved');
    const after = await treeSnapshot(dir);
    const manifest = await onlyTurn(world, 'rename-dir');
    expect(manifest.files).toEqual([]);
    const renamed = (manifest.structure ?? []).filter((e) => e.kind === 'renamed');
    expect(renamed).toEqual([expect.objectContaining({ path: path.join(dir, 'src'), to: path.join(dir, 'moved') })]);
    expect(renamed[0]?.kind === 'renamed' && renamed[0].tree).toHaveLength(1010);
    expect(await (await new BackupHome({ home: world.home }).session('rename-dir')).blobs.list()).toEqual([]);

    const rewound = await restore(world, turn, '--session', 'rename-dir');
    expect(rewound.status, describeRun(rewound)).toBe(0);
    expect(await treeSnapshot(dir)).toEqual(before);
    expect(lstatSync(path.join(dir, 'src')).ino).toBe(inode);
    const undone = await restore(world, '--undo-last', '--session', 'rename-dir');
    expect(undone.status, describeRun(undone)).toBe(0);
    expect(undone.out).toContain(`undoing turn ${rescueOf(rewound)}`);
    expect(await treeSnapshot(dir)).toEqual(after);
    expect(lstatSync(path.join(dir, 'moved')).ino).toBe(inode);
  });

  it('what the turn changes inside it after the rename is put right under its old names, and what it makes there goes', { timeout: 60_000 }, async () => {
    world = await makeWorld('rename-inside');
    const dir = path.join(world.ws, 'case');
    await tree(path.join(dir, 'src'), 2, 3);
    await stampDirs(dir);
    const before = await treeSnapshot(dir);
    const turn = await turnIn(world, 'rename-inside', dir, 'mv src lib && echo more >> lib/d0/f0.txt && rm lib/d1/f2.txt && chmod 600 lib/d0/f1.txt && echo new > lib/new.txt && mkdir lib/d2 && mv lib lib2');
    const manifest = await onlyTurn(world, 'rename-inside');
    // The changes inside are recorded under the names they had before the turn.
    expect(manifest.files.map((f) => path.relative(dir, f.path)).sort()).toEqual(['src/d0/f0.txt', 'src/d1/f2.txt']);
    expect((manifest.structure ?? []).filter((e) => e.kind === 'renamed').map((e) => path.relative(dir, e.path))).toEqual(['src', 'lib']);
    const rewound = await restoreTurn(world, turn);
    expect(rewound.status, describeRun(rewound)).toBe(0);
    expect(await treeSnapshot(dir)).toEqual(before);
  });

  it('reusing the name it left (mv build build.old && mkdir build) records the renames path by path; the rewind is exact', { timeout: 60_000 }, async () => {
    world = await makeWorld('rename-reuse');
    const dir = path.join(world.ws, 'case');
    await tree(path.join(dir, 'build'), 2, 4);
    await stampDirs(dir);
    const before = await treeSnapshot(dir);
    const turn = await turnIn(world, 'rename-reuse', dir, 'mv build build.old && mkdir build && echo fresh > build/out.txt && echo more >> build.old/d0/f0.txt');
    const manifest = await onlyTurn(world, 'rename-reuse');
    expect((manifest.structure ?? []).filter((e) => e.kind === 'renamed' && e.expanded)).toHaveLength(1);
    const rewound = await restoreTurn(world, turn);
    expect(rewound.status, describeRun(rewound)).toBe(0);
    expect(await treeSnapshot(dir)).toEqual(before);
  });
});
