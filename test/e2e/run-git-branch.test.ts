/**
 * `git branch -D` and `git branch -m` rewrite `.git/config` through a rename even when
 * they change nothing in it, and that rename used to need a person's approval (exit 77
 * without a terminal; `-m` itself failed with 128). A rewrite that leaves the config as it
 * is now passes in both runtimes; one that changes it (a branch with settings) is still
 * asked about, and the config keeps its bytes.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { GIT_IDENTITY, brokeredShell, describeRun, makeWorld, removeWorld, type World } from './run-helpers.js';

const IDENTITY = GIT_IDENTITY;
let world: World | undefined;
afterEach(() => removeWorld(world));

async function repoWithBranches(): Promise<World> {
  const made = await makeWorld('git-branch');
  const git = (...args: string[]) => execFileSync('git', args, { cwd: made.ws, env: { ...process.env, ...IDENTITY }, stdio: 'ignore' });
  git('init', '-q', '-b', 'main', '.');
  git('commit', '-q', '--allow-empty', '-m', 'one');
  git('branch', 'plain');
  git('branch', 'tracked');
  git('branch', '--set-upstream-to=main', 'tracked');
  return made;
}

const branches = (ws: string) => execFileSync('git', ['branch', '--format=%(refname:short)'], { cwd: ws, encoding: 'utf8' }).trim().split('\n');

describe('git branch in the sandbox', () => {
  it.each(['seccomp', 'preload'])('%s: deleting and renaming a branch without settings asks nothing', async (runtime) => {
    world = await repoWithBranches();
    const config = path.join(world.ws, '.git', 'config');
    const before = await fs.readFile(config);
    const command = 'git branch -D plain && git checkout -q -b work && git branch -m work renamed';
    const result = await brokeredShell(world, ['run', '--runtime', runtime, '--session', `branch-${runtime}`, '--', command], { env: IDENTITY });
    expect(result.status, describeRun(result)).toBe(0);
    expect(result.stderr).not.toMatch(/approv/);
    expect(branches(world.ws).sort()).toEqual(['main', 'renamed', 'tracked']);
    expect(await fs.readFile(config)).toEqual(before);
    // The broker's copy went where git's lock was: nothing is left beside the config.
    expect((await fs.readdir(path.join(world.ws, '.git'))).filter((name) => name.includes('config'))).toEqual(['config']);
  });

  it('deleting a branch whose settings are in the config still asks, and the config keeps them', async () => {
    world = await repoWithBranches();
    const config = path.join(world.ws, '.git', 'config');
    const before = await fs.readFile(config, 'utf8');
    expect(before).toContain('[branch "tracked"]');
    const result = await brokeredShell(world, ['run', '--session', 'branch-tracked', '--', 'git branch -D tracked'], { env: IDENTITY });
    expect(result.status, describeRun(result)).toBe(77);
    expect(result.stderr).toContain(`brokered-shell: needs approval: write ${config} by rename of a file`);
    expect(await fs.readFile(config, 'utf8')).toBe(before);
  });
});
