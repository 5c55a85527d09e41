/**
 * The undo cases both runtimes share: every way a command changes an existing file
 * happens, is backed up first (bytes, mode, mtime in the turn's manifest; for a change of
 * the metadata alone, that metadata where the runtime sees it as such) and is undone by
 * `backups restore`, which leaves nothing behind that did not exist before the turn. All
 * cases run as one command (one turn), each in its own directory of the workspace.
 * run-undo.test.ts (seccomp) and preload-undo.test.ts add the cases only they have.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keptFileCount, type TurnManifest } from '../../src/backup/index.js';
import {
  ST,
  blobOf,
  buildTools,
  caseStatuses,
  describeRun,
  entryFor,
  makeWorld,
  onlyTurn,
  removeWorld,
  restoreTurn,
  treeState,
  writeOld,
  type CliRun,
  type NodeState,
  type RunFlags,
  type World,
} from './run-helpers.js';

/** The existing file every case changes: 0640, an old mtime, an "a" for s/a/b/. */
export const ORIG = 'original a content\nsecond line\n';
/** A second existing file (0600) that cases copy, move or rename over `f`. */
export const A = 'the bytes of a\n';
/** ORIG after `s/a/b/` on each line. */
export const SED_ORIG = ORIG.split('\n').map((line) => line.replace('a', 'b')).join('\n');

export interface UndoCase {
  /** Directory in the workspace and the label of its status line. */
  name: string;
  /** Runs in the case's directory. */
  command: string;
  /** Extra preparation beyond f and a. */
  prepare?: (dir: string, world: World) => Promise<void>;
  /** Paths (relative to the case dir) the turn must have backed up. */
  backedUp: string[];
  /**
   * The change leaves the bytes as they are (chmod): a runtime that sees the call itself
   * keeps only the file's metadata (mode, owner, times, xattrs), not a copy of its bytes.
   */
  metadataOnly?: boolean;
  /** Asserts the command's change happened. */
  changed: (dir: string) => Promise<void>;
}

export const read = (dir: string, name: string) => fs.readFile(path.join(dir, name), 'utf8');
export const exists = (dir: string, name: string) =>
  fs.lstat(path.join(dir, name)).then(
    () => true,
    () => false,
  );
export const modeOf = async (dir: string, name: string) => (await fs.lstat(path.join(dir, name))).mode & 0o7777;


/** How a runtime's test file runs the shared suite. */
export interface UndoSuite {
  title: string;
  firstTest: string;
  /** Name of the test world (its temp dir). */
  worldName: string;
  session: string;
  /** Runs the whole script in the runtime under test. */
  run: (world: World, script: string, flags: RunFlags) => Promise<CliRun>;
  /** Lines run before the cases (e.g. one that shows the runtime). */
  preamble?: string[];
  /** More checks of the run as a whole. */
  checkRun?: (result: CliRun) => void;
  /** The runtime's own cases, after the shared ones. */
  extraCases: UndoCase[];
}

/** The cases every runtime must handle. */
export const COMMON_UNDO_CASES: UndoCase[] = [
  { name: 'redirect', command: 'echo x > f', backedUp: ['f'], changed: async (d) => expect(await read(d, 'f')).toBe('x\n') },
  { name: 'append', command: 'echo x >> f', backedUp: ['f'], changed: async (d) => expect(await read(d, 'f')).toBe(`${ORIG}x\n`) },
  { name: 'cp', command: 'cp a f', backedUp: ['f'], changed: async (d) => expect(await read(d, 'f')).toBe(A) },
  {
    name: 'mv',
    command: 'mv a f',
    backedUp: ['f', 'a'],
    changed: async (d) => {
      expect(await read(d, 'f')).toBe(A);
      expect(await exists(d, 'a')).toBe(false);
    },
  },
  { name: 'sed', command: 'sed -i s/a/b/ f', backedUp: ['f'], changed: async (d) => expect(await read(d, 'f')).toBe(SED_ORIG) },
  { name: 'truncate', command: 'truncate -s 0 f', backedUp: ['f'], changed: async (d) => expect(await read(d, 'f')).toBe('') },
  { name: 'dd', command: 'dd if=a of=f status=none', backedUp: ['f'], changed: async (d) => expect(await read(d, 'f')).toBe(A) },
  { name: 'rm', command: 'rm f', backedUp: ['f'], changed: async (d) => expect(await exists(d, 'f')).toBe(false) },
  {
    name: 'rm-rf',
    command: 'rm -rf tree',
    prepare: async (dir) => {
      await writeOld(path.join(dir, 'tree', 'top'), 'top file\n', 0o644, 1_100_000_000);
      await writeOld(path.join(dir, 'tree', 'sub', 'deep'), 'deep file\n', 0o600, 1_100_000_001);
      await writeOld(path.join(dir, 'tree', 'sub', 'deeper', 'script'), '#!/bin/sh\necho hi\n', 0o755, 1_100_000_002);
      await fs.symlink('top', path.join(dir, 'tree', 'link'));
    },
    backedUp: ['tree/top', 'tree/sub/deep', 'tree/sub/deeper/script', 'tree/link'],
    changed: async (d) => expect(await exists(d, 'tree')).toBe(false),
  },
  {
    name: 'python',
    command: `python3 -c "open('f','w').write('x')"`,
    backedUp: ['f'],
    changed: async (d) => expect(await read(d, 'f')).toBe('x'),
  },
  {
    name: 'node',
    command: `"$NODE" -e "require('fs').writeFileSync('f','x')"`,
    backedUp: ['f'],
    changed: async (d) => expect(await read(d, 'f')).toBe('x'),
  },
  { name: 'perl', command: `perl -pi -e 's/a/b/' f`, backedUp: ['f'], changed: async (d) => expect(await read(d, 'f')).toBe(SED_ORIG) },
  {
    name: 'sed-absolute',
    command: '/usr/bin/sed -i s/a/b/ f',
    backedUp: ['f'],
    changed: async (d) => expect(await read(d, 'f')).toBe(SED_ORIG),
  },
  {
    name: 'toybox-sed',
    command: 'toybox sed -i s/a/b/ f',
    backedUp: ['f'],
    changed: async (d) => expect(await read(d, 'f')).toBe(SED_ORIG),
  },
  {
    name: 'ftruncate',
    command: '"$TOOLS/ftruncate" f 3',
    backedUp: ['f'],
    changed: async (d) => expect(await read(d, 'f')).toBe(ORIG.slice(0, 3)),
  },
  {
    name: 'mmap',
    command: '"$TOOLS/mmap-write" f XYZ',
    backedUp: ['f'],
    changed: async (d) => expect(await read(d, 'f')).toBe(`XYZ${ORIG.slice(3)}`),
  },
  {
    name: 'python-rename',
    command: `python3 -c "import os; os.rename('a', 'f')"`,
    backedUp: ['f', 'a'],
    changed: async (d) => {
      expect(await read(d, 'f')).toBe(A);
      expect(await exists(d, 'a')).toBe(false);
    },
  },
  {
    name: 'chmod',
    command: 'chmod 600 f',
    backedUp: ['f'],
    metadataOnly: true,
    changed: async (d) => {
      expect(await modeOf(d, 'f')).toBe(0o600);
      expect(await read(d, 'f')).toBe(ORIG);
    },
  },
  {
    name: 'touch',
    command: 'touch -d 2000-01-01 f',
    backedUp: ['f'],
    changed: async (d) => {
      expect((await fs.stat(path.join(d, 'f'))).mtimeMs).toBe(new Date(2000, 0, 1).getTime());
      expect(await read(d, 'f')).toBe(ORIG);
    },
  },
  {
    name: 'tar',
    command: 'tar -xf "$TOOLS/over.tar"',
    prepare: async (dir) => {
      await writeOld(path.join(dir, 'sub', 'g'), 'old g\n', 0o644, 1_200_000_000);
    },
    backedUp: ['f', 'sub/g'],
    changed: async (d) => {
      expect(await read(d, 'f')).toBe('f from tar\n');
      expect(await read(d, 'sub/g')).toBe('g from tar\n');
    },
  },
  {
    name: 'ln-sf',
    command: 'ln -sf other f',
    prepare: async (dir) => writeOld(path.join(dir, 'other'), 'other\n', 0o644),
    backedUp: ['f'],
    changed: async (d) => expect(await fs.readlink(path.join(d, 'f'))).toBe('other'),
  },
  {
    name: 'symlink-alias',
    command: 'echo x > alias',
    prepare: async (dir) => fs.symlink('f', path.join(dir, 'alias')),
    backedUp: ['f'],
    changed: async (d) => {
      expect(await read(d, 'f')).toBe('x\n');
      expect(await fs.readlink(path.join(d, 'alias'))).toBe('f');
    },
  },
  {
    // The O_TMPFILE idiom: write an unnamed file, link it in through /proc/self/fd, rename it over f.
    name: 'tmpfile-publish',
    command: `python3 -c "
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o640)
os.write(fd, b'from tmpfile\\n')
if libc.linkat(-100, b'/proc/self/fd/%d' % fd, -100, b'published', 0x400) != 0:
    raise OSError(ctypes.get_errno(), 'linkat')
os.rename('published', 'f')
"`,
    backedUp: ['f'],
    changed: async (d) => {
      expect(await read(d, 'f')).toBe('from tmpfile\n');
      expect(await exists(d, 'published')).toBe(false);
    },
  },
];

/** Defines the whole undo suite for one runtime. */
export function defineUndoSuite(suite: UndoSuite): void {
  const CASES = [...COMMON_UNDO_CASES, ...suite.extraCases];
  let world: World;
  let before: Record<string, NodeState>;
  let result: CliRun;
  let statuses: Map<string, number>;
  let manifest: TurnManifest;
  const caseDir = (c: UndoCase) => path.join(world.ws, c.name);

  /** The archive the tar case extracts: an `f` and a `sub/g` over the existing ones. */
  async function makeArchive(): Promise<void> {
    const stage = path.join(world.base, 'stage');
    await writeOld(path.join(stage, 'f'), 'f from tar\n', 0o640, 1_300_000_000);
    await writeOld(path.join(stage, 'sub', 'g'), 'g from tar\n', 0o644, 1_300_000_000);
    await fs.chmod(path.join(stage, 'sub'), 0o755);
    const { execFileSync } = await import('node:child_process');
    execFileSync('tar', ['-C', stage, '-cf', path.join(world.tools, 'over.tar'), 'f', 'sub']);
  }

    beforeAll(async () => {
    world = await makeWorld(suite.worldName);
    buildTools(world, ['ftruncate', 'mmap-write']);
    await makeArchive();
    for (const c of CASES) {
      const dir = caseDir(c);
      await writeOld(path.join(dir, 'f'), ORIG, 0o640, 981_173_045);
      await writeOld(path.join(dir, 'a'), A, 0o600, 981_000_000);
      await c.prepare?.(dir, world);
      await fs.chmod(dir, 0o755);
    }
    before = await treeState(world.ws);
    const script = [ST, ...(suite.preamble ?? []), ...CASES.map((c) => `(cd ${c.name} && ${c.command}); st ${c.name}`)].join('\n');
    result = await suite.run(world, script, { session: suite.session, message: 'every way to change f' });
    statuses = caseStatuses(result.out);
    manifest = await onlyTurn(world, suite.session);
  });

  afterAll(() => removeWorld(world));

  describe(suite.title, () => {
    it(suite.firstTest, () => {
      expect(result.status, describeRun(result)).toBe(0);
      suite.checkRun?.(result);
      expect([...statuses.keys()]).toEqual(CASES.map((c) => c.name));
      expect(manifest.message).toBe('every way to change f');
      expect(result.stderr).toContain(`brokered-shell: turn ${manifest.id} backed up ${keptFileCount(manifest)} files`);
      expect(result.stderr).not.toContain('brokered-shell: denied');
    });

    it.each(CASES)('$name: the change happens', async (c) => {
      expect(statuses.get(c.name), describeRun(result)).toBe(0);
      await c.changed(caseDir(c));
    });

    it.each(CASES)('$name: the manifest holds the previous bytes, mode and mtime', async (c) => {
      for (const rel of c.backedUp) {
        const file = path.join(caseDir(c), rel);
        const previous = before[`${c.name}/${rel}`];
        const metadata = c.metadataOnly ? (manifest.structure ?? []).find((e) => e.kind === 'metadata' && e.path === file) : undefined;
        if (metadata?.kind === 'metadata' && previous?.type === 'file' && entryFor(manifest, file) === undefined) {
          expect({ size: metadata.size, mode: metadata.mode, mtimeNs: metadata.mtimeNs }).toEqual({ size: previous.size, mode: previous.mode, mtimeNs: previous.mtimeNs });
          continue;
        }
        const entry = entryFor(manifest, file);
        expect(entry, `${file} is not in the manifest`).toBeDefined();
        if (!entry || !previous) throw new Error('unreachable');
        if (previous.type === 'symlink') {
          expect(entry.kind).toBe('symlink');
          expect(entry.linkTarget).toBe(previous.target);
          continue;
        }
        if (previous.type !== 'file') throw new Error(`${rel} was not a file`);
        expect(entry.kind).toBe('file');
        expect({ sha256: entry.sha256, size: entry.size, mode: entry.mode, mtimeNs: entry.mtimeNs }).toEqual({
          sha256: previous.sha256,
          size: previous.size,
          mode: previous.mode,
          mtimeNs: previous.mtimeNs,
        });
        const saved = await blobOf(world, manifest, entry);
        expect(saved.length).toBe(previous.size);
      }
    });

    it('backs up nothing else: no temp file, no file created during the turn', () => {
      const expected = CASES.flatMap((c) => c.backedUp.map((rel) => path.join(caseDir(c), rel))).sort();
      const metadataOnly = (manifest.structure ?? []).filter((e) => e.kind === 'metadata' && entryFor(manifest, e.path) === undefined).map((e) => e.path);
      expect([...manifest.files.map((f) => f.path), ...metadataOnly].sort()).toEqual(expected);
    });

    it('saved the original bytes themselves', async () => {
      const entry = entryFor(manifest, path.join(world.ws, 'redirect', 'f'));
      if (!entry) throw new Error('redirect/f not backed up');
      expect((await blobOf(world, manifest, entry)).toString('utf8')).toBe(ORIG);
      const a = entryFor(manifest, path.join(world.ws, 'mv', 'a'));
      if (!a) throw new Error('mv/a not backed up');
      expect((await blobOf(world, manifest, a)).toString('utf8')).toBe(A);
    });

    describe('backups restore TURN', () => {
      let restored: CliRun;
      let after: Record<string, NodeState>;

      beforeAll(async () => {
        restored = await restoreTurn(world, manifest.id);
        after = await treeState(world.ws);
      });

      it('restores every file of the turn', () => {
        expect(restored.status, describeRun(restored)).toBe(0);
        for (const entry of manifest.files) expect(restored.out).toContain(`restored ${entry.path}`);
      });

      it.each(CASES)('$name: everything is back byte for byte (mode, mtime) and nothing else is there', (c) => {
        const pick = (tree: Record<string, NodeState>) =>
          Object.fromEntries(Object.entries(tree).filter(([rel]) => rel === c.name || rel.startsWith(`${c.name}/`)));
        expect(pick(after)).toEqual(pick(before));
      });
    });
  });
}
