/**
 * Rewinding several turns of a session (`backups restore --to TURN`): the turn and every
 * later one, newest first, through the same code as one turn, into one rescue turn.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { TurnManifest } from '../../src/backup/index.js';
import { plant, recorder, stampDirs, treeSnapshot, type NodeSnap, type Recorder } from './rewind-helpers.js';

type Tree = Record<string, NodeSnap>;

interface History {
  rec: Recorder;
  turns: TurnManifest[];
  /** trees[i]: before turn i+1 (trees[0] before the first, trees[3] after the last). */
  trees: Tree[];
}

/** Three turns that build on each other: edits, creations, deletions, renames of files and directories. */
async function threeTurns(): Promise<History> {
  const rec = await recorder();
  const at = (rel: string) => path.join(rec.ws, rel);
  await plant(at('README'), 'readme v1\n', 0o644, 1_500_000_001);
  await plant(at('src/main.c'), 'int main() { return 0; }\n', 0o640, 1_500_000_002);
  await plant(at('src/util/helpers.c'), 'void help(void) {}\n', 0o600, 1_500_000_003);
  await plant(at('old.log'), 'log\n', 0o600, 1_500_000_004);
  await plant(at('cache/entry'), 'cached\n', 0o644, 1_500_000_005);
  await fs.symlink('src/main.c', at('entry'));
  await fs.chmod(at('src/util'), 0o750);
  await stampDirs(rec.ws);
  const trees = [await treeSnapshot(rec.ws)];
  const turns: TurnManifest[] = [];

  // Turn 1: edit, create a build tree, delete a log.
  await rec.write(at('README'), 'readme v2\n');
  await rec.mkdir(at('build'), 0o755);
  await rec.write(at('build/main.o'), 'object 1\n');
  await rec.unlink(at('old.log'));
  turns.push(await rec.commit('turn 1'));
  trees.push(await treeSnapshot(rec.ws));

  // Turn 2: rename a directory, edit a file turn 1 created, chmod, re-point a link.
  await rec.rename(at('src/util'), at('src/lib'));
  await rec.write(at('build/main.o'), 'object 2\n');
  await rec.chmod(at('src/main.c'), 0o600);
  await rec.unlink(at('entry'));
  await rec.symlink('src/lib/helpers.c', at('entry'));
  turns.push(await rec.commit('turn 2'));
  trees.push(await treeSnapshot(rec.ws));

  // Turn 3: rm -rf a tree, move a file, edit a file turn 1 edited.
  await rec.rmTree(at('cache'));
  await rec.rename(at('src/lib/helpers.c'), at('src/helpers.c'));
  await rec.write(at('README'), 'readme v3\n');
  turns.push(await rec.commit('turn 3'));
  trees.push(await treeSnapshot(rec.ws));
  return { rec, turns, trees };
}

describe('rewind to a turn', () => {
  it('three turns back to before the first: the whole tree byte for byte, modes and mtimes (directories too)', async () => {
    const { rec, turns, trees } = await threeTurns();
    const plan = await rec.backups.rewindPlan(turns[0]!.id, { sessionId: turns[0]!.sessionId });
    expect(plan.turns.map((t) => t.message)).toEqual(['turn 3', 'turn 2', 'turn 1']);
    const report = await plan.store.rewind(plan.turns);
    expect(report).toMatchObject({ to: turns[0]!.id, complete: true, dryRun: false, notInTurn: [] });
    expect(report.stoppedAt).toBeUndefined();
    expect(report.turns.map((t) => [t.turnId, t.conflicts, t.failed])).toEqual([...turns].reverse().map((t) => [t.id, [], []]));
    expect(await treeSnapshot(rec.ws)).toEqual(trees[0]);

    // One rescue turn holds the state before the whole rewind: restoring it undoes all of it.
    const rescue = await plan.store.readTurn(report.rescueTurnId!);
    expect(rescue).toMatchObject({ kind: 'restore', restoreOf: turns[0]!.id, message: `rewind of 3 turns to before ${turns[0]!.id}` });
    expect(report.turns.every((t) => t.rescueTurnId === rescue.id)).toBe(true);
    expect((await rec.backups.lastRestore()).manifest.id).toBe(rescue.id);
    const undo = await plan.store.restore(rescue);
    expect(undo.conflicts).toEqual([]);
    expect(undo.failed).toEqual([]);
    expect(await treeSnapshot(rec.ws)).toEqual(trees[3]);
  });

  it('to the second turn: the tree as turn 1 left it', async () => {
    const { rec, turns, trees } = await threeTurns();
    const plan = await rec.backups.rewindPlan(turns[1]!.id);
    expect(plan.turns.map((t) => t.id)).toEqual([turns[2]!.id, turns[1]!.id]);
    const report = await plan.store.rewind(plan.turns);
    expect(report.complete).toBe(true);
    expect(await treeSnapshot(rec.ws)).toEqual(trees[1]);
  });

  it('a dry run plans every turn on the tree the earlier ones would leave, and changes nothing', async () => {
    const { rec, turns, trees } = await threeTurns();
    const plan = await rec.backups.rewindPlan(turns[0]!.id);
    const report = await plan.store.rewind(plan.turns, { dryRun: true });
    expect(report).toMatchObject({ dryRun: true, complete: true });
    expect(report.rescueTurnId).toBeUndefined();
    for (const turn of report.turns) expect([turn.turnId, turn.conflicts]).toEqual([turn.turnId, []]);
    // Turn 1 created build/main.o, turn 2 changed it: the dry run of turn 1 sees turn 2's rewind as done.
    const turn1 = report.turns.at(-1)!;
    expect(turn1.restored.find((r) => r.path === path.join(rec.ws, 'build', 'main.o'))).toMatchObject({ action: 'remove' });
    expect(await treeSnapshot(rec.ws)).toEqual(trees[3]);
    expect((await plan.store.listTurns()).map((t) => t.id)).toEqual(turns.map((t) => t.id));
  });

  it('a dry run sees a directory a newer turn replaced come back before an older turn\'s paths inside it', async () => {
    const rec = await recorder();
    const at = (rel: string) => path.join(rec.ws, rel);
    await plant(at('d/x'), 'x v1\n', 0o644, 1_500_000_001);
    await stampDirs(rec.ws);
    const before = await treeSnapshot(rec.ws);
    await rec.write(at('d/x'), 'x v2\n');
    const first = await rec.commit('edit d/x');
    await rec.rmTree(at('d'));
    await rec.write(at('d'), 'd is a file now\n');
    await rec.commit('rm -r d; echo > d');
    const plan = await rec.backups.rewindPlan(first.id);
    const dry = await plan.store.rewind(plan.turns, { dryRun: true });
    expect(dry.turns.map((t) => t.conflicts)).toEqual([[], []]);
    expect(dry.complete).toBe(true);
    const real = await plan.store.rewind(plan.turns);
    expect(real.complete).toBe(true);
    // The dry run announced exactly what the rewind then did.
    const actions = (report: typeof real) => report.turns.map((t) => t.restored.map((r) => [r.path, r.action]));
    expect(actions(dry)).toEqual(actions(real));
    expect(await treeSnapshot(rec.ws)).toEqual(before);
  });

  it('stops at the first turn with conflicts (nothing of it changed, older turns untouched); --force goes through', async () => {
    const { rec, turns, trees } = await threeTurns();
    // A person changes a file only turn 2 touched (its mode: turn 2 kept only that), after turn 3.
    const main = path.join(rec.ws, 'src', 'main.c');
    await fs.chmod(main, 0o644);
    const edited = (await treeSnapshot(rec.ws))['src/main.c'];
    const plan = await rec.backups.rewindPlan(turns[0]!.id);
    const report = await plan.store.rewind(plan.turns);
    expect(report).toMatchObject({ complete: false, stoppedAt: turns[1]!.id });
    expect(report.turns.map((t) => t.turnId)).toEqual([turns[2]!.id, turns[1]!.id]);
    expect(report.turns[1]).toMatchObject({ restored: [], conflicts: [{ path: main, reason: 'changed-since-turn' }] });
    // Turn 3 is rewound; turn 2 and turn 1 are not: the tree is as turn 2 left it, but for the person's edit.
    expect(await treeSnapshot(rec.ws)).toEqual({ ...trees[2], 'src/main.c': edited });

    const forced = await plan.store.rewind((await rec.backups.rewindPlan(turns[0]!.id)).turns, { force: true });
    expect(forced.complete).toBe(true);
    expect(await treeSnapshot(rec.ws)).toEqual(trees[0]);
    // The person's change is kept in the forced rewind's rescue turn.
    const kept = (await plan.store.readTurn(forced.rescueTurnId!)).structure?.find((e) => e.path === main);
    expect(kept).toMatchObject({ kind: 'metadata', mode: 0o644 });
  });

  it('a forced rewind cannot bring back bytes a person changed after a turn that kept only a file\'s metadata: that path fails, named', async () => {
    const { rec, turns } = await threeTurns();
    const main = path.join(rec.ws, 'src', 'main.c');
    await fs.writeFile(main, 'int main() { return 1; }\n');
    const plan = await rec.backups.rewindPlan(turns[0]!.id);
    const forced = await plan.store.rewind(plan.turns, { force: true });
    expect(forced.complete).toBe(false);
    expect(forced.turns.flatMap((t) => t.failed)).toEqual([expect.objectContaining({ path: main, message: expect.stringContaining('the turn kept only its metadata') })]);
    expect(await fs.readFile(main, 'utf8')).toBe('int main() { return 1; }\n');
  });

  it('leaves restore turns out of the plan: a turn already restored is found as before', async () => {
    const { rec, turns, trees } = await threeTurns();
    const store = await rec.backups.session(turns[0]!.sessionId);
    await store.restore(turns[2]!.id);
    const plan = await rec.backups.rewindPlan(turns[0]!.id);
    expect(plan.turns.map((t) => t.message)).toEqual(['turn 3', 'turn 2', 'turn 1']);
    const report = await store.rewind(plan.turns);
    expect(report.complete).toBe(true);
    expect(report.turns[0]?.restored).toEqual([]);
    expect(await treeSnapshot(rec.ws)).toEqual(trees[0]);
  });

  it('PATH filters apply to every turn; a path no turn touched refuses the whole rewind', async () => {
    const { rec, turns, trees } = await threeTurns();
    const plan = await rec.backups.rewindPlan(turns[0]!.id);
    const refused = await plan.store.rewind(plan.turns, { paths: [path.join(rec.ws, 'README'), path.join(rec.ws, 'never')] });
    expect(refused).toMatchObject({ complete: false, turns: [], notInTurn: [path.join(rec.ws, 'never')] });
    expect(await treeSnapshot(rec.ws)).toEqual(trees[3]);
    const report = await plan.store.rewind(plan.turns, { paths: [path.join(rec.ws, 'README')] });
    expect(report.complete).toBe(true);
    expect(await fs.readFile(path.join(rec.ws, 'README'), 'utf8')).toBe('readme v1\n');
    expect(await fs.readFile(path.join(rec.ws, 'build', 'main.o'), 'utf8')).toBe('object 2\n');
  });
});
