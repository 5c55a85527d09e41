/**
 * Git tidies up after itself by removing directories upwards until one is not empty:
 * `git stash` ends with rmdir(".git"), which fails with ENOTEMPTY. The policy protects
 * .git (removing it needs a person's approval), so that call must be answered with the
 * kernel's ENOTEMPTY before any question: a stash without a terminal exits 0 and asks
 * nothing, in both runtimes.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { GIT_IDENTITY, brokeredShell, describeRun, makeWorld, onlyTurn, removeWorld, type World } from './run-helpers.js';
import { runtimeArgs } from './preload-helpers.js';

const IDENTITY = GIT_IDENTITY;
let world: World | undefined;
afterEach(() => removeWorld(world));

async function repoWithChange(): Promise<World> {
  const made = await makeWorld('git-cleanup');
  const git = (...args: string[]) => execFileSync('git', args, { cwd: made.ws, env: { ...process.env, ...IDENTITY }, stdio: 'ignore' });
  git('init', '-q', '.');
  await fs.writeFile(path.join(made.ws, 'notes.txt'), 'committed\n');
  git('add', 'notes.txt');
  git('commit', '-q', '-m', 'one');
  await fs.writeFile(path.join(made.ws, 'notes.txt'), 'work in progress\n');
  return made;
}

describe('git stash in the sandbox', () => {
  it.each(['seccomp', 'preload'])('%s: stash and pop run without a question, and the work comes back', async (runtime) => {
    world = await repoWithChange();
    const result = await brokeredShell(world, ['run', ...runtimeArgs(world, runtime), '--session', `stash-${runtime}`, '--', 'git stash -q && cat notes.txt && git stash pop -q'], {
      env: IDENTITY,
    });
    expect(result.status, describeRun(result)).toBe(0);
    expect(result.stderr).not.toMatch(/approv/);
    // Between the two, the stash had put the committed text back.
    expect(result.out).toBe('committed\n');
    expect(await fs.readFile(path.join(world.ws, 'notes.txt'), 'utf8')).toBe('work in progress\n');
    expect((await fs.stat(path.join(world.ws, '.git'))).isDirectory()).toBe(true);
    const turn = await onlyTurn(world, `stash-${runtime}`);
    expect(turn.files.some((entry) => entry.path === path.join(world?.ws ?? '', 'notes.txt'))).toBe(true);
  });
});
