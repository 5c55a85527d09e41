/**
 * `backups restore --to TURN` after three `brokered-shell run` turns of one session in
 * the real kernel sandbox: the whole workspace — every file, symlink and directory with
 * its mode, owner, mtime, content and xattrs — is as it was before the first turn; one
 * `--undo-last` brings back the tree the three turns left. Also: the dry run, the JSON
 * report, the stop at a turn with conflicts, and `backups list --json` entries of paths
 * recorded without content.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RewindReport } from '../../src/backup/index.js';
import { brokeredShell, describeRun, makeWorld, removeWorld, writeOld, type World } from './run-helpers.js';
import { restore, stampDirs, treeSnapshot, turnIn, type Tree } from './rewind-helpers.js';

const SESSION = 'three-turns';

let world: World;
let turns: string[];
/** trees[0]: before turn 1; trees[i]: after turn i. */
let trees: Tree[];

beforeEach(async () => {
  world = await makeWorld('rewind-to');
  const at = (rel: string) => path.join(world.ws, rel);
  await writeOld(at('README'), 'readme v1\n', 0o644, 1_100_000_001);
  await writeOld(at('src/main.c'), 'int main(void) { return 0; }\n', 0o640, 1_100_000_002);
  await writeOld(at('src/util/helpers.c'), 'void help(void) {}\n', 0o600, 1_100_000_003);
  await writeOld(at('old.log'), 'log\n', 0o600, 1_100_000_004);
  await writeOld(at('cache/a/entry'), 'cached\n', 0o644, 1_100_000_005);
  await fs.symlink('src/main.c', at('entry'));
  await fs.chmod(at('src/util'), 0o750);
  await fs.chmod(at('cache/a'), 0o700);
  await stampDirs(world.ws);
  trees = [await treeSnapshot(world.ws)];
  turns = [];
  const turn = async (command: string, message: string) => {
    turns.push(await turnIn(world, SESSION, world.ws, command, message));
    trees.push(await treeSnapshot(world.ws));
  };
  await turn('echo readme v2 > README && mkdir build && echo object 1 > build/main.o && rm old.log', 'turn 1');
  await turn('mv src/util src/lib && echo object 2 > build/main.o && chmod 600 src/main.c && ln -sfn src/lib/helpers.c entry', 'turn 2');
  await turn(`rm -rf cache && mv src/lib/helpers.c src/helpers.c && echo readme v3 > README && python3 -c "import os; os.setxattr('README', 'user.v', b'3')"`, 'turn 3');
});
afterEach(() => removeWorld(world));

describe('backups restore --to TURN', () => {
  it('rewinds three turns, newest first: the whole tree is as before the first, byte for byte with modes and mtimes; --undo-last brings the last state back', async () => {
    expect(new Set(trees.map((t) => JSON.stringify(t))).size).toBe(4);
    const rewound = await restore(world, '--to', turns[0]!, '--session', SESSION);
    expect(rewound.status, describeRun(rewound)).toBe(0);
    expect(rewound.stderr).toBe('');
    expect(rewound.out.split('\n').filter((line) => line.startsWith('turn '))).toEqual([
      `turn ${turns[2]} (turn 3):`,
      `turn ${turns[1]} (turn 2):`,
      `turn ${turns[0]} (turn 1):`,
    ]);
    expect(rewound.out).toContain(`rewound 3 turn(s): the files are as they were before turn ${turns[0]}`);
    expect(await treeSnapshot(world.ws)).toEqual(trees[0]);

    const undone = await restore(world, '--undo-last');
    expect(undone.status, describeRun(undone)).toBe(0);
    expect(await treeSnapshot(world.ws)).toEqual(trees[3]);
  });

  it('--to the second turn leaves the tree as the first turn left it', async () => {
    const rewound = await restore(world, '--to', turns[1]!);
    expect(rewound.status, describeRun(rewound)).toBe(0);
    expect(await treeSnapshot(world.ws)).toEqual(trees[1]);
  });

  it('--dry-run --json: a report per turn, planned on the tree the newer turns would leave; nothing changes', async () => {
    const listed = await brokeredShell(world, ['backups', 'list', '--json']);
    const result = await restore(world, '--to', turns[0]!, '--dry-run', '--json');
    expect(result.status, describeRun(result)).toBe(0);
    const report = JSON.parse(result.out) as RewindReport;
    expect(report).toMatchObject({ sessionId: SESSION, to: turns[0], dryRun: true, complete: true, notInTurn: [] });
    expect(report.rescueTurnId).toBeUndefined();
    expect(report.turns.map((t) => [t.turnId, t.conflicts])).toEqual([
      [turns[2], []],
      [turns[1], []],
      [turns[0], []],
    ]);
    // Turn 1 created build/main.o (turn 2 rewrote it): rewinding turn 1 removes it.
    expect(report.turns[2]?.restored).toEqual(expect.arrayContaining([expect.objectContaining({ path: path.join(world.ws, 'build', 'main.o'), action: 'remove' })]));
    expect(await treeSnapshot(world.ws)).toEqual(trees[3]);
    expect((await brokeredShell(world, ['backups', 'list', '--json'])).out).toBe(listed.out);
  });

  it('stops at the first turn with conflicts: exit 3, that turn and older ones untouched; --force rewinds them all', async () => {
    // A person edits a file only turn 2 changed.
    const main = path.join(world.ws, 'src', 'main.c');
    await fs.chmod(main, 0o644);
    const stopped = await restore(world, '--to', turns[0]!);
    expect(stopped.status, describeRun(stopped)).toBe(3);
    expect(stopped.stderr).toContain(`conflict ${main}: mode is 644, expected 600`);
    expect(stopped.stderr).toContain(`stopped at turn ${turns[1]}: 1 conflict(s), nothing of it was changed (--force to rewind anyway); older turns were not touched`);
    expect(await treeSnapshot(world.ws)).toEqual({ ...trees[2], 'src/main.c': { ...trees[2]!['src/main.c']!, mode: 0o644 } });

    const forced = await restore(world, '--to', turns[0]!, '--force');
    expect(forced.status, describeRun(forced)).toBe(0);
    expect(await treeSnapshot(world.ws)).toEqual(trees[0]);
  });

  it('backups list --json: created paths and directories next to the files, with the contract fields', async () => {
    const listed = await brokeredShell(world, ['backups', 'list', '--session', SESSION, '--json']);
    expect(listed.status).toBe(0);
    const json = JSON.parse(listed.out) as {
      turns: Array<{ id: string; files: Array<{ path: string }>; structure: Array<{ path: string; operation: string; kind: string; size: number; sha256: string | null; mode: number }> }>;
    };
    const first = json.turns.find((t) => t.id === turns[0]);
    expect(first?.files.map((f) => path.relative(world.ws, f.path)).sort()).toEqual(['README', 'old.log']);
    expect(first?.structure).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ path: path.join(world.ws, 'build'), operation: 'mkdir', kind: 'absent', size: 0, sha256: null, mode: 0 }),
        expect.objectContaining({ path: path.join(world.ws, 'build', 'main.o'), operation: 'open', kind: 'absent', size: 0, sha256: null, mode: 0 }),
        expect.objectContaining({ path: world.ws, kind: 'directory', size: 0, sha256: null, mode: trees[0]!['.']!.mode }),
      ]),
    );
  });
});
