/**
 * A rebase a command leaves stopped carries out its plan when the person continues it,
 * outside the sandbox: `run` says so when the plan the command left runs commands.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { GIT_IDENTITY, describeRun, makeWorld, removeWorld, run, type World } from './run-helpers.js';

let world: World | undefined;
afterEach(() => removeWorld(world));

function git(cwd: string, args: readonly string[]): string {
  return execFileSync('git', args, { cwd, env: { ...process.env, ...GIT_IDENTITY }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

async function repositoryWithThreeCommits(prefix: string): Promise<World> {
  const made = await makeWorld(prefix);
  git(made.ws, ['init', '-q', '.']);
  for (const name of ['one', 'two', 'three']) {
    await fs.writeFile(path.join(made.ws, name), `${name}\n`);
    git(made.ws, ['add', name]);
    git(made.ws, ['commit', '-q', '-m', name]);
  }
  return made;
}

const env = Object.entries(GIT_IDENTITY)
  .map(([name, value]) => `${name}=${value}`)
  .join(' ');
/** An interactive rebase of the last two commits, stopped after the first by a `break`, with `extra` appended to its plan. */
const stoppedRebase = (extra: string) => `${env} GIT_SEQUENCE_EDITOR="sed -i -e '1a break'${extra ? ` -e '\\$a ${extra}'` : ''}" git rebase -q -i HEAD~2`;

describe('a stopped rebase whose plan runs commands', () => {
  it('is named on stderr with its commands, and its plan is left as the command made it', async () => {
    world = await repositoryWithThreeCommits('git-plan-exec');
    const result = await run(world, stoppedRebase('exec touch continued-ran'), { session: 'plan-exec' });
    expect(result.status, describeRun(result)).toBe(0);
    const plan = path.join(world.ws, '.git', 'rebase-merge', 'git-rebase-todo');
    expect(result.stderr).toContain(
      `brokered-shell: warning: a stopped rebase will run a command outside the sandbox at git rebase --continue: exec touch continued-ran; read ${plan} first, or git rebase --abort`,
    );
    expect(await fs.readFile(plan, 'utf8')).toMatch(/^exec touch continued-ran$/m);
    // What the warning is about: the person's continue runs it.
    git(world.ws, ['rebase', '--continue']);
    expect(await fs.readFile(path.join(world.ws, 'continued-ran'), 'utf8')).toBe('');
  });

  it('is not mentioned when the plan runs nothing', async () => {
    world = await repositoryWithThreeCommits('git-plan-plain');
    const result = await run(world, stoppedRebase(''), { session: 'plan-plain' });
    expect(result.status, describeRun(result)).toBe(0);
    expect(await fs.readFile(path.join(world.ws, '.git', 'rebase-merge', 'git-rebase-todo'), 'utf8')).toMatch(/^pick /m);
    expect(result.stderr).not.toContain('warning');
  });
});
