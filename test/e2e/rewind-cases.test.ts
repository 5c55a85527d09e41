/**
 * `backups restore TURN` rewinds a turn made by `brokered-shell run` in the real kernel
 * sandbox, one case per kind of change, each in its own directory and session:
 * afterwards the whole directory — files, symlinks, directories, with modes, owners,
 * mtimes (directories' too), content and xattrs — is as it was before the turn. Then
 * `backups restore --undo-last` undoes the rewind: the directory is as the turn left it
 * (what the rewind removed or replaced came back from its rescue turn).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { native } from '../../src/native/loader.js';
import { brokeredShell, describeRun, makeWorld, removeWorld, writeOld, type World } from './run-helpers.js';
import { rescueOf, restore, stampDirs, treeSnapshot, turnIn } from './rewind-helpers.js';

const isRoot = process.geteuid?.() === 0;

interface RewindCase {
  name: string;
  prepare: (dir: string) => Promise<void>;
  command: string;
  /** What the turn must have recorded as created (relative paths): a rewind removes them. */
  created?: string[];
}

const CASES: RewindCase[] = [
  { name: 'modified', prepare: (d) => writeOld(path.join(d, 'f'), 'before\n', 0o640), command: 'echo after > f' },
  { name: 'deleted', prepare: (d) => writeOld(path.join(d, 'f'), 'deleted by the turn\n', 0o600), command: 'rm f' },
  {
    name: 'rm-rf',
    prepare: async (d) => {
      await writeOld(path.join(d, 'tree', 'top'), 'top\n', 0o644);
      await writeOld(path.join(d, 'tree', 'private', 'key'), 'secret\n', 0o600);
      await fs.mkdir(path.join(d, 'tree', 'private', 'drop'));
      await fs.symlink('../top', path.join(d, 'tree', 'private', 'link'));
      await fs.chmod(path.join(d, 'tree', 'private', 'drop'), 0o1777);
      await fs.chmod(path.join(d, 'tree', 'private'), 0o700);
      await fs.chmod(path.join(d, 'tree'), 0o750);
    },
    command: 'rm -rf tree',
  },
  { name: 'renamed', prepare: (d) => writeOld(path.join(d, 'a'), 'the bytes of a\n', 0o600), command: 'mv a b', created: ['b'] },
  {
    name: 'renamed-over',
    prepare: async (d) => {
      await writeOld(path.join(d, 'a'), 'the bytes of a\n', 0o600, 1_100_000_001);
      await writeOld(path.join(d, 'f'), 'the old f\n', 0o644, 1_100_000_002);
    },
    command: 'mv a f',
  },
  {
    name: 'renamed-directory',
    prepare: async (d) => {
      await writeOld(path.join(d, 'dir', 'top'), 'top\n', 0o644);
      await writeOld(path.join(d, 'dir', 'sub', 'deep'), 'deep\n', 0o600);
      await fs.chmod(path.join(d, 'dir', 'sub'), 0o700);
      await fs.chmod(path.join(d, 'dir'), 0o751);
    },
    command: 'mv dir moved',
    created: ['moved', 'moved/top', 'moved/sub', 'moved/sub/deep'],
  },
  { name: 'created-file', prepare: async () => undefined, command: 'echo made by the turn > new.txt', created: ['new.txt'] },
  {
    name: 'created-tree',
    prepare: async () => undefined,
    command: 'mkdir -p out/lib && echo object > out/lib/a.o && ln -s lib/a.o out/alias && chmod 700 out/lib',
    created: ['out', 'out/lib', 'out/lib/a.o', 'out/alias'],
  },
  {
    name: 'symlink-target',
    prepare: async (d) => {
      await fs.mkdir(path.join(d, 'v1'));
      await fs.mkdir(path.join(d, 'v2'));
      await fs.symlink('v1', path.join(d, 'current'));
    },
    command: 'ln -sfn v2 current',
  },
  {
    name: 'symlink-replaced',
    prepare: async (d) => {
      await writeOld(path.join(d, 'real'), 'real\n');
      await fs.symlink('real', path.join(d, 'link'));
    },
    command: 'rm link && echo standalone > link',
  },
  {
    name: 'metadata',
    prepare: async (d) => {
      await writeOld(path.join(d, 'm'), 'mode\n', 0o644);
      await writeOld(path.join(d, 't'), 'times\n', 0o644);
      await writeOld(path.join(d, 'x'), 'xattrs\n', 0o644);
      native().setXattr(path.join(d, 'x'), 'user.colour', Buffer.from('blue'));
    },
    command: `chmod 600 m && touch -d 2000-01-01 t && python3 -c "import os; os.setxattr('x', 'user.colour', b'red'); os.setxattr('x', 'user.extra', b'1')"`,
  },
  {
    // The sandbox cannot chown (no capabilities), but it can replace a file someone else owns: the rewind puts the owner back.
    name: 'owner',
    prepare: async (d) => {
      await writeOld(path.join(d, 'f'), 'owned by someone else\n', 0o666);
      if (isRoot) await fs.chown(path.join(d, 'f'), 1234, 5678);
    },
    command: 'rm f && echo mine > f',
  },
  {
    // No content, but a rewind must make each again: deleted with its directory, renamed away, replaced by a file, its mode changed.
    name: 'special-files',
    prepare: async (d) => {
      await fs.mkdir(path.join(d, 'runtime'));
      await makeOldNode(path.join(d, 'runtime', 'fifo'), 'p', 0o640);
      await makeOldNode(path.join(d, 'runtime', 'sock'), 'socket', 0o600);
      if (isRoot) await makeOldNode(path.join(d, 'runtime', 'null'), 'c', 0o666);
      await makeOldNode(path.join(d, 'moved'), 'p', 0o644);
      await makeOldNode(path.join(d, 'overwritten'), 'p', 0o600);
      await makeOldNode(path.join(d, 'chmodded'), 'p', 0o600);
      await writeOld(path.join(d, 'replacement'), 'a regular file\n', 0o644);
    },
    command: 'rm -r runtime && mv moved elsewhere && mv replacement overwritten && chmod 644 chmodded',
    created: ['elsewhere'],
  },
];

/** A FIFO, socket or (root) the null device's node with `mode` and old times. */
async function makeOldNode(file: string, type: 'p' | 'c' | 'socket', mode: number): Promise<void> {
  if (type === 'socket') execFileSync('python3', ['-c', 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])', file]);
  else execFileSync('mknod', type === 'c' ? [file, 'c', '1', '3'] : [file, 'p']);
  await fs.chmod(file, mode);
  await fs.utimes(file, 1_300_000_000, 1_300_000_000);
}

let world: World;
beforeAll(async () => {
  world = await makeWorld('rewind');
});
afterAll(() => removeWorld(world));

async function caseDir(name: string, prepare: (dir: string) => Promise<void>): Promise<string> {
  const dir = path.join(world.ws, name);
  await fs.mkdir(dir);
  await prepare(dir);
  await stampDirs(dir);
  return dir;
}

describe('backups restore TURN, then --undo-last', () => {
  it.each(CASES)('$name', async (c) => {
    const dir = await caseDir(c.name, c.prepare);
    const before = await treeSnapshot(dir);
    const turn = await turnIn(world, c.name, dir, c.command);
    const after = await treeSnapshot(dir);
    expect(after).not.toEqual(before);
    if (c.created) {
      const listed = await brokeredShell(world, ['backups', 'show', turn, '--json']);
      const shown = JSON.parse(listed.out) as { structure: Array<{ path: string; kind: string; size: number; sha256: null; mode: number }> };
      const created = shown.structure.filter((e) => e.kind === 'absent');
      expect(created.map((e) => path.relative(dir, e.path)).sort()).toEqual([...c.created].sort());
      expect(created.every((e) => e.size === 0 && e.sha256 === null && e.mode === 0)).toBe(true);
    }

    const rewound = await restore(world, turn, '--session', c.name);
    expect(rewound.status, describeRun(rewound)).toBe(0);
    expect(rewound.stderr).toBe('');
    expect(await treeSnapshot(dir)).toEqual(before);
    for (const rel of c.created ?? []) expect(rewound.out).toContain(`removed ${path.join(dir, rel)} (created by the turn)`);

    const undone = await restore(world, '--undo-last', '--session', c.name);
    expect(undone.status, describeRun(undone)).toBe(0);
    expect(undone.out).toContain(`undoing turn ${rescueOf(rewound)} (restore of ${turn})`);
    expect(await treeSnapshot(dir)).toEqual(after);
  });
});

describe('conflicts', () => {
  it('a file changed after the turn is refused (exit 3, listed, untouched); --force restores it; --undo-last brings the later version back', async () => {
    const dir = await caseDir('conflict', (d) => writeOld(path.join(d, 'f'), 'before\n', 0o640));
    const before = await treeSnapshot(dir);
    const turn = await turnIn(world, 'conflict', dir, 'echo by the turn > f && echo new > g');
    const f = path.join(dir, 'f');
    await fs.writeFile(f, 'a person edited this later\n');
    const edited = await treeSnapshot(dir);

    const refused = await restore(world, turn);
    expect(refused.status, describeRun(refused)).toBe(3);
    expect(refused.stderr).toMatch(new RegExp(`^conflict ${f}: .*\\(changed-since-turn; --force to restore anyway\\)$`, 'm'));
    expect(await fs.readFile(f, 'utf8')).toBe('a person edited this later\n');
    // The rest of the turn was rewound (g, which the turn created, is gone).
    expect(refused.out).toContain(`removed ${path.join(dir, 'g')} (created by the turn)`);
    const refusedRescue = rescueOf(refused);

    const forced = await restore(world, turn, '--force');
    expect(forced.status, describeRun(forced)).toBe(0);
    expect(forced.out).toContain(`restored ${f} (forced)`);
    expect(await treeSnapshot(dir)).toEqual(before);

    // --undo-last undoes the forced restore: the person's edit is back.
    const undone = await restore(world, '--undo-last', '--session', 'conflict');
    expect(undone.status, describeRun(undone)).toBe(0);
    expect(undone.out).toContain(`undoing turn ${rescueOf(forced)}`);
    expect(await fs.readFile(f, 'utf8')).toBe('a person edited this later\n');
    expect(refusedRescue).not.toBe(rescueOf(forced));
    expect((await treeSnapshot(dir))['f']).toEqual(edited['f']);
  });

  it('a file the turn made, rewritten later at the same size with its mtime put back, is a conflict', async () => {
    const dir = await caseDir('conflict-created', () => Promise.resolve());
    const turn = await turnIn(world, 'conflict-created', dir, 'printf "generated\\n" > report.txt');
    const report = path.join(dir, 'report.txt');
    const { mtimeNs } = await fs.stat(report, { bigint: true });
    // What a turn makes is not hashed at commit: size, mode and mtime were all that told a change.
    await fs.writeFile(report, 'DIFFERENT\n');
    const stamp = `@${mtimeNs / 1_000_000_000n}.${(mtimeNs % 1_000_000_000n).toString().padStart(9, '0')}`;
    execFileSync('touch', ['-m', '-d', stamp, report]);
    expect((await fs.stat(report, { bigint: true })).mtimeNs).toBe(mtimeNs);
    const refused = await restore(world, turn);
    expect(refused.status, describeRun(refused)).toBe(3);
    expect(refused.stderr).toContain(`conflict ${report}: written since`);
    expect(await fs.readFile(report, 'utf8')).toBe('DIFFERENT\n');
  });

  it('undoing a rename, then the turn that made the file, is no conflict (though the inode number may come back)', async () => {
    const dir = await caseDir('conflict-reused-inode', () => Promise.resolve());
    const made = await turnIn(world, 'conflict-reused-inode', dir, 'echo made by the first turn > a');
    const moved = await turnIn(world, 'conflict-reused-inode', dir, 'mv a b');
    const undoMove = await restore(world, moved);
    expect(undoMove.status, describeRun(undoMove)).toBe(0);
    const undoMade = await restore(world, made);
    expect(undoMade.status, describeRun(undoMade)).toBe(0);
    expect(await fs.readdir(dir)).toEqual([]);
  });

  it('an xattr or owner change after the turn is a change too', async () => {
    const dir = await caseDir('conflict-metadata', (d) => writeOld(path.join(d, 'f'), 'before\n', 0o644));
    const turn = await turnIn(world, 'conflict-metadata', dir, 'echo by the turn > f');
    const f = path.join(dir, 'f');
    native().setXattr(f, 'user.later', Buffer.from('x'));
    const byXattr = await restore(world, turn, '--dry-run');
    expect(byXattr.status).toBe(3);
    expect(byXattr.stderr).toContain(`conflict ${f}: extended attributes differ (user.later)`);
    native().removeXattr(f, 'user.later');
    if (isRoot) {
      await fs.chown(f, 4321, 8765);
      const byOwner = await restore(world, turn, '--dry-run');
      expect(byOwner.status).toBe(3);
      expect(byOwner.stderr).toContain(`conflict ${f}: owner is 4321:8765`);
      await fs.chown(f, 0, 0);
    }
    const clean = await restore(world, turn, '--dry-run');
    expect(clean.status, describeRun(clean)).toBe(0);
    expect(clean.out).toContain(`would restore ${f}`);
  });
});
