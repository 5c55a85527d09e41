/**
 * A rebase a command leaves stopped is carried out when the person continues it, outside
 * the sandbox: `run` says so, with what its plan and strategy would run.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { GIT_IDENTITY, describeRun, makeWorld, removeWorld, restoreTurn, run, turnsOf, type World } from './run-helpers.js';

let world: World | undefined;
afterEach(() => removeWorld(world));

function personsGit(cwd: string, args: readonly string[]): string {
  return execFileSync('git', args, { cwd, env: { ...process.env, ...GIT_IDENTITY }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

async function repositoryWithThreeCommits(prefix: string): Promise<World> {
  const made = await makeWorld(prefix);
  personsGit(made.ws, ['init', '-q', '.']);
  for (const name of ['one', 'two', 'three']) {
    await fs.writeFile(path.join(made.ws, name), `${name}\n`);
    personsGit(made.ws, ['add', name]);
    personsGit(made.ws, ['commit', '-q', '-m', name]);
  }
  return made;
}

const env = Object.entries(GIT_IDENTITY)
  .map(([name, value]) => `${name}=${value}`)
  .join(' ');
/** An interactive rebase of the last two commits, stopped after the first by a `break`, with `extra` appended to its plan. */
const stoppedRebase = (extra: string) => `${env} GIT_SEQUENCE_EDITOR="sed -i -e '1a break'${extra ? ` -e '\\$a ${extra}'` : ''}" git rebase -q -i HEAD~2`;

describe('a stopped rebase the command leaves', () => {
  it('is named on stderr with the commands its plan runs, and its plan is left as the command made it', async () => {
    world = await repositoryWithThreeCommits('git-plan-exec');
    const result = await run(world, stoppedRebase('exec touch continued-ran'), { session: 'plan-exec' });
    expect(result.status, describeRun(result)).toBe(0);
    const git = path.join(world.ws, '.git');
    expect(result.stderr).toContain(
      `brokered-shell: warning: a stopped rebase left in ${git} will run outside the sandbox at git rebase --continue: exec touch continued-ran; read ${path.join(git, 'rebase-merge')} first, or git rebase --abort`,
    );
    expect(await fs.readFile(path.join(git, 'rebase-merge', 'git-rebase-todo'), 'utf8')).toMatch(/^exec touch continued-ran$/m);
    // What the warning is about: the person's continue runs it.
    personsGit(world.ws, ['rebase', '--continue']);
    expect(await fs.readFile(path.join(world.ws, 'continued-ran'), 'utf8')).toBe('');
  });

  it('is named when a merge strategy it saved is a program of its own', async () => {
    world = await repositoryWithThreeCommits('git-plan-strategy');
    // Reorder so the next pick is no fast-forward (git then merges with the strategy), stop, and plant one.
    const command = [
      `${env} GIT_SEQUENCE_EDITOR="sed -i -n -e '2p;2a break' -e '1h;\\$G;1d;\\$p'" git rebase -q -i HEAD~2`,
      'mkdir git-merge-',
      `printf '#!/bin/sh\\ntouch strategy-ran\\nexec git merge-recursive "$@"\\n' > git-merge-/x`,
      'chmod +x git-merge-/x',
      'echo /x > .git/rebase-merge/strategy',
    ].join(' && ');
    const result = await run(world, command, { session: 'plan-strategy' });
    expect(result.status, describeRun(result)).toBe(0);
    expect(result.stderr).toContain('at git rebase --continue: the merge strategy "/x", a program (git-merge-/x);');
    personsGit(world.ws, ['rebase', '--continue']);
    expect(await fs.readFile(path.join(world.ws, 'strategy-ran'), 'utf8')).toBe('');
  });

  it('is named even when its plan runs nothing', async () => {
    world = await repositoryWithThreeCommits('git-plan-plain');
    const result = await run(world, stoppedRebase(''), { session: 'plan-plain' });
    expect(result.status, describeRun(result)).toBe(0);
    const git = path.join(world.ws, '.git');
    expect(result.stderr).toContain(
      `brokered-shell: warning: a stopped rebase left in ${git} is carried out at git rebase --continue, outside the sandbox: read ${path.join(git, 'rebase-merge')} first, or git rebase --abort`,
    );
  });

  it('cannot be swapped for a symlink that a later turn could change unseen', async () => {
    world = await repositoryWithThreeCommits('git-plan-symlink');
    const command = `${stoppedRebase('')} && mv .git/rebase-merge stash && ln -s ../stash .git/rebase-merge`;
    const result = await run(world, command, { session: 'plan-symlink' });
    expect(result.status, describeRun(result)).toBe(77);
    expect(result.stderr).toContain(`brokered-shell: needs approval: write ${path.join(world.ws, '.git', 'rebase-merge')}`);
    expect((await fs.lstat(path.join(world.ws, '.git', 'rebase-merge')).catch(() => undefined))?.isSymbolicLink() ?? false).toBe(false);
  });

  it('is named again when a restore brings it back', async () => {
    world = await repositoryWithThreeCommits('git-plan-restore');
    expect((await run(world, stoppedRebase('exec touch continued-ran'), { session: 'plan-restore' })).stderr).toContain('warning: a stopped rebase');
    const aborted = await run(world, `${env} git rebase --abort`, { session: 'plan-restore' });
    expect(aborted.status, describeRun(aborted)).toBe(0);
    expect(aborted.stderr).not.toContain('warning');
    const abortTurn = (await turnsOf(world, 'plan-restore')).at(-1);
    if (!abortTurn) throw new Error('no turn recorded for the abort');
    const restored = await restoreTurn(world, abortTurn.id);
    expect(restored.status, describeRun(restored)).toBe(0);
    expect(restored.stderr).toContain(`brokered-shell: warning: a stopped rebase left in ${path.join(world.ws, '.git')} will run outside the sandbox at git rebase --continue: exec touch continued-ran;`);
  });

  it('is named when a restore makes its folder a git directory again', async () => {
    world = await repositoryWithThreeCommits('git-plan-restore-objects');
    const head = personsGit(world.ws, ['rev-parse', 'HEAD']).trim();
    const onto = personsGit(world.ws, ['rev-parse', 'HEAD~1']).trim();
    // Turn 1 takes the objects away; turn 2 leaves a rebase where no git directory is then.
    expect((await run(world, 'rm -rf .git/objects', { session: 'plan-objects' })).status).toBe(0);
    const plant = [
      'mkdir .git/rebase-merge && cd .git/rebase-merge',
      "printf 'exec touch continued-ran\\n' > git-rebase-todo",
      `echo ${head} > orig-head && echo ${onto} > onto && echo refs/heads/main > head-name && touch interactive && : > done`,
    ].join(' && ');
    const planted = await run(world, plant, { session: 'plan-objects' });
    expect(planted.status, describeRun(planted)).toBe(0);
    expect(planted.stderr).not.toContain('warning');
    // The person's restore of turn 1 brings the objects back, and with them the rebase.
    const firstTurn = (await turnsOf(world, 'plan-objects'))[0];
    if (!firstTurn) throw new Error('no turn recorded');
    const restored = await restoreTurn(world, firstTurn.id);
    expect(restored.status, describeRun(restored)).toBe(0);
    expect(restored.stderr).toContain(`brokered-shell: warning: a stopped rebase left in ${path.join(world.ws, '.git')} will run outside the sandbox at git rebase --continue: exec touch continued-ran;`);
  });
});
