/**
 * What a repository's git config points git at — its hooks folder, the files it
 * includes, the programs its commands name — needs approval to change, through the real
 * kernel sandbox: refused with `run --no`, the file stays unwritten and the person's own
 * git, run afterwards outside the sandbox, runs nothing the command planted.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { GIT_IDENTITY, brokeredShell, describeRun, makeWorld, removeWorld, type World } from './run-helpers.js';

let world: World | undefined;
afterEach(() => removeWorld(world));

/** git as the person runs it later, outside the sandbox, with no config of the machine's. */
function personRunsGit(cwd: string, args: readonly string[]): number {
  try {
    execFileSync('git', args, { cwd, env: { ...process.env, ...GIT_IDENTITY, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' }, stdio: 'ignore' });
    return 0;
  } catch (error) {
    return (error as { status?: number }).status ?? -1;
  }
}

const exists = (file: string) =>
  fs.lstat(file).then(
    () => true,
    () => false,
  );

async function repository(prefix: string): Promise<World> {
  const made = await makeWorld(prefix);
  expect(personRunsGit(made.ws, ['init', '-q', '.'])).toBe(0);
  expect(personRunsGit(made.ws, ['commit', '-q', '--allow-empty', '-m', 'one'])).toBe(0);
  return made;
}

/** `run --no [flags] -- COMMAND`: what needs approval is refused without asking. */
const runRefusing = (w: World, session: string, command: string, extra: readonly string[] = []) => brokeredShell(w, ['run', '--no', '--session', session, ...extra, '--', command], { env: GIT_IDENTITY });

/** A hook that leaves a mark where git runs it (its folder made already, as husky's install makes .husky/_). */
const PLANT_HOOK = (file: string) => `printf '#!/bin/sh\\ntouch hook-ran\\n' > ${file} && chmod +x ${file}`;

describe('git config that points git elsewhere', () => {
  it.each(['.githooks', '.husky/_'])('core.hooksPath = %s: a hook written there needs approval; refused, the next commit runs nothing', async (hooks) => {
    world = await repository(`git-config-hooks-${hooks.replace(/\W/g, '')}`);
    expect(personRunsGit(world.ws, ['config', 'core.hooksPath', hooks])).toBe(0);
    const hook = path.join(world.ws, hooks, 'pre-commit');
    await fs.mkdir(path.dirname(hook), { recursive: true });
    const result = await runRefusing(world, 'hooks', PLANT_HOOK(`${hooks}/pre-commit`));
    expect(result.stderr, describeRun(result)).toContain(`write ${hook}`);
    expect(await exists(hook)).toBe(false);
    expect(personRunsGit(world.ws, ['commit', '-q', '--allow-empty', '-m', 'two'])).toBe(0);
    expect(await exists(path.join(world.ws, 'hook-ran'))).toBe(false);
  });

  it('a file .git/config includes is config: an fsmonitor written there is refused, and git status runs nothing', async () => {
    world = await repository('git-config-include');
    await fs.appendFile(path.join(world.ws, '.git', 'config'), '[include]\n\tpath = ../team.gitconfig\n');
    const command = `printf '[core]\\n\\tfsmonitor = "touch planted-ran; false"\\n' > team.gitconfig`;
    const result = await runRefusing(world, 'include', command);
    expect(result.stderr, describeRun(result)).toContain(`write ${path.join(world.ws, 'team.gitconfig')}`);
    expect(await exists(path.join(world.ws, 'team.gitconfig'))).toBe(false);
    expect(personRunsGit(world.ws, ['status', '--short'])).toBe(0);
    expect(await exists(path.join(world.ws, 'planted-ran'))).toBe(false);
  });

  it('a program core.fsmonitor names in the work tree needs approval; refused, git status runs nothing planted', async () => {
    world = await repository('git-config-fsmonitor');
    expect(personRunsGit(world.ws, ['config', 'core.fsmonitor', 'tools/fsmonitor.sh'])).toBe(0);
    await fs.mkdir(path.join(world.ws, 'tools'));
    const result = await runRefusing(world, 'fsmonitor', "printf '#!/bin/sh\\ntouch planted-ran\\n' > tools/fsmonitor.sh && chmod +x tools/fsmonitor.sh");
    expect(result.stderr, describeRun(result)).toContain(`write ${path.join(world.ws, 'tools', 'fsmonitor.sh')}`);
    expect(await exists(path.join(world.ws, 'tools', 'fsmonitor.sh'))).toBe(false);
    personRunsGit(world.ws, ['status', '--short']);
    expect(await exists(path.join(world.ws, 'planted-ran'))).toBe(false);
  });

  it('a config changed with approval in the turn protects what it names from then on: the hook is asked about too', async () => {
    world = await repository('git-config-reread');
    const command = `git config core.hooksPath newhooks && mkdir -p newhooks && ${PLANT_HOOK('newhooks/pre-commit')}`;
    const result = await brokeredShell(world, ['run', '--yes', '--session', 'reread', '--', command], { env: GIT_IDENTITY });
    expect(result.status, describeRun(result)).toBe(0);
    expect(result.stderr).toContain(`write ${path.join(world.ws, '.git', 'config')}`);
    // Made after the config named it, the hooks folder is asked about (here approved whole: the command made it).
    expect(result.stderr).toContain(`write ${path.join(world.ws, 'newhooks')} by mkdir`);
    expect(result.stderr).toContain('is the hooks folder core.hooksPath names');
  });

  it('a nested repository in the workspace is followed too', async () => {
    world = await makeWorld('git-config-nested');
    const nested = path.join(world.ws, 'vendor', 'lib');
    await fs.mkdir(nested, { recursive: true });
    expect(personRunsGit(nested, ['init', '-q', '.'])).toBe(0);
    expect(personRunsGit(nested, ['config', 'core.hooksPath', '.hooks'])).toBe(0);
    await fs.mkdir(path.join(nested, '.hooks'));
    const result = await runRefusing(world, 'nested', PLANT_HOOK('vendor/lib/.hooks/pre-commit'));
    expect(result.stderr, describeRun(result)).toContain(`write ${path.join(nested, '.hooks', 'pre-commit')}`);
    expect(await exists(path.join(nested, '.hooks', 'pre-commit'))).toBe(false);
  });

  it('a config git cannot read makes every write in its repository ask', async () => {
    world = await repository('git-config-unreadable');
    await fs.appendFile(path.join(world.ws, '.git', 'config'), '[core\n');
    const result = await runRefusing(world, 'unreadable', 'echo x > notes.txt');
    expect(result.stderr, describeRun(result)).toContain(`write ${path.join(world.ws, 'notes.txt')}`);
    expect(await exists(path.join(world.ws, 'notes.txt'))).toBe(false);
  });
});
