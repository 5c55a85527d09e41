/**
 * Git obeys config and hooks from more places than `.git/config` and `.git/hooks`: a
 * `.git/commondir` sends it to another directory for both, and any folder holding a
 * `HEAD` is a repository of its own when git runs there. A command in the sandbox must
 * not set up either without a person's approval; the person's own git run afterwards,
 * outside the sandbox, then runs nothing the command planted.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { GIT_IDENTITY, brokeredShell, describeRun, makeWorld, removeWorld, run, type World } from './run-helpers.js';
import { runtimeArgs } from './preload-helpers.js';

const IDENTITY = GIT_IDENTITY;
let world: World | undefined;
afterEach(() => removeWorld(world));

/** git as the person runs it later, outside the sandbox; its status and what it printed. */
function personRunsGit(cwd: string, args: readonly string[]): { status: number; out: string } {
  try {
    return { status: 0, out: execFileSync('git', args, { cwd, env: { ...process.env, ...IDENTITY }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }) };
  } catch (error) {
    const failed = error as { status?: number; stdout?: string; stderr?: string };
    return { status: failed.status ?? -1, out: `${failed.stdout ?? ''}${failed.stderr ?? ''}` };
  }
}

async function exists(file: string): Promise<boolean> {
  return fs.lstat(file).then(
    () => true,
    () => false,
  );
}

async function repository(prefix: string): Promise<World> {
  const made = await makeWorld(prefix);
  personRunsGit(made.ws, ['init', '-q', '.']);
  personRunsGit(made.ws, ['commit', '-q', '--allow-empty', '-m', 'one']);
  return made;
}

/** An fsmonitor that leaves a mark where git runs it. */
const FSMONITOR_CONFIG = `printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = "touch planted-ran; false"\\n'`;

describe('git directories beyond .git/config and .git/hooks', () => {
  it('a .git/commondir pointing at a prepared directory needs approval; without it, git runs nothing planted', async () => {
    world = await repository('git-commondir');
    // The common dir needs no HEAD: git takes it from .git and the rest from there.
    const command = [
      'mkdir common',
      'cp -r .git/objects .git/refs common/',
      `${FSMONITOR_CONFIG} > common/config`,
      'echo ../common > .git/commondir',
    ].join(' && ');
    const result = await run(world, command, { session: 'commondir' });
    expect(result.status, describeRun(result)).toBe(77);
    expect(result.stderr).toContain(`brokered-shell: needs approval: write ${path.join(world.ws, '.git', 'commondir')}`);
    expect(await exists(path.join(world.ws, '.git', 'commondir'))).toBe(false);
    expect(personRunsGit(world.ws, ['status', '--short']).status).toBe(0);
    expect(await exists(path.join(world.ws, 'planted-ran'))).toBe(false);
  });

  it('a bare repository made in a subfolder needs approval for its HEAD; without it, the folder is no repository', async () => {
    world = await repository('git-bare-new');
    const docs = path.join(world.ws, 'docs');
    const result = await run(world, `git init -q --bare docs; ${FSMONITOR_CONFIG} >> docs/config`, { session: 'bare-new' });
    expect(result.status, describeRun(result)).toBe(77);
    expect(result.stderr).toContain(`brokered-shell: needs approval: write ${path.join(docs, 'HEAD')}`);
    expect(await exists(path.join(docs, 'HEAD'))).toBe(false);
    // git in docs finds the workspace's repository, not one of the command's.
    const found = personRunsGit(docs, ['rev-parse', '--absolute-git-dir']);
    expect(found.out.trim(), found.out).toBe(path.join(await fs.realpath(world.ws), '.git'));
    expect(personRunsGit(docs, ['status', '--short']).status).toBe(0);
    expect(await exists(path.join(docs, 'planted-ran'))).toBe(false);
  });

  it.each(['seccomp', 'preload'])('%s: a symlink into .git, where a bare repository was built, needs approval', async (runtime) => {
    world = await repository(`git-into-dot-git-${runtime}`);
    // Under .git/refs names are branch names, not config: a repository is built there freely, its config before its HEAD.
    const command = [
      'mkdir -p .git/refs/stage/sub/objects .git/refs/stage/sub/refs',
      `${FSMONITOR_CONFIG} > .git/refs/stage/sub/config`,
      'echo "ref: refs/heads/main" > .git/refs/stage/sub/HEAD',
      'ln -s .git/refs/stage/sub sub',
    ].join(' && ');
    const result = await brokeredShell(world, ['run', ...runtimeArgs(world, runtime), '--session', `into-${runtime}`, '--', command]);
    expect(result.status, describeRun(result)).toBe(77);
    expect(result.stderr).toContain(`brokered-shell: needs approval: write ${path.join(world.ws, 'sub')} by link`);
    expect(result.stderr).toContain('would be a symlink into a git directory');
    expect(await exists(path.join(world.ws, 'sub'))).toBe(false);
  });

  it('a hard link of such a symlink, made in the temp dir, needs approval too', async () => {
    world = await repository('git-into-dot-git-hard-link');
    const command = [
      'mkdir -p .git/refs/stage/sub/objects .git/refs/stage/sub/refs',
      `${FSMONITOR_CONFIG} > .git/refs/stage/sub/config`,
      'echo "ref: refs/heads/main" > .git/refs/stage/sub/HEAD',
      // The temp dir is the command's own: the symlink made there is asked about by nobody.
      'ln -s "$PWD/.git/refs/stage/sub" "$TMPDIR/l"',
      'ln -P "$TMPDIR/l" sub',
    ].join(' && ');
    const result = await run(world, command, { session: 'into-hard-link' });
    expect(result.status, describeRun(result)).toBe(77);
    expect(result.stderr).toContain('would be a symlink into a git directory');
    expect(await exists(path.join(world.ws, 'sub'))).toBe(false);
  });

  it('a repository whose git dir is elsewhere in the workspace (--separate-git-dir) commits with no question', async () => {
    world = await makeWorld('git-separate-dir');
    const tree = path.join(world.ws, 'tree');
    await fs.mkdir(tree);
    await fs.writeFile(path.join(tree, 'a.txt'), 'a\n');
    await fs.mkdir(path.join(world.ws, 'git-dirs'));
    expect(personRunsGit(tree, ['init', '-q', '--separate-git-dir', path.join(world.ws, 'git-dirs', 'one')]).status).toBe(0);
    // The first commit makes logs/HEAD in the git dir, the next ones update HEAD there.
    const result = await run(world, 'cd tree && git add -A && git commit -q -m one && echo b > b.txt && git add -A && git commit -q -m two', { session: 'separate' }, { env: IDENTITY });
    expect(result.status, describeRun(result)).toBe(0);
    expect(result.stderr).not.toMatch(/approv/);
    expect(personRunsGit(tree, ['rev-list', '--count', 'HEAD']).out.trim()).toBe('2');
  });

  describe('beside a repository whose git dir is elsewhere in the workspace', () => {
    async function separate(prefix: string): Promise<{ tree: string; gitDir: string }> {
      world = await makeWorld(prefix);
      const tree = path.join(world.ws, 'tree');
      await fs.mkdir(tree);
      await fs.mkdir(path.join(world.ws, 'git-dirs'));
      const gitDir = path.join(world.ws, 'git-dirs', 'one');
      expect(personRunsGit(tree, ['init', '-q', '--separate-git-dir', gitDir]).status).toBe(0);
      expect(personRunsGit(tree, ['commit', '-q', '--allow-empty', '-m', 'one']).status).toBe(0);
      return { tree, gitDir };
    }

    it("a worktree's git dir keeps its commondir protected after its HEAD is removed", async () => {
      const { tree, gitDir } = await separate('git-separate-worktree');
      expect(personRunsGit(tree, ['worktree', 'add', '-q', '../wt']).status).toBe(0);
      const admin = path.join(gitDir, 'worktrees', 'wt');
      const command = `rm git-dirs/one/worktrees/wt/HEAD; echo ../../../../notes > git-dirs/one/worktrees/wt/commondir; exit 0`;
      const result = await run(world!, command, { session: 'separate-worktree' });
      expect(result.status, describeRun(result)).toBe(77);
      expect(result.stderr).toContain(`brokered-shell: needs approval: write ${path.join(admin, 'commondir')}`);
      expect(await fs.readFile(path.join(admin, 'commondir'), 'utf8')).toBe('../..\n');
    });

    it("removing the git dir's own HEAD (its worktrees need none) needs approval, and its config stays protected", async () => {
      const { tree, gitDir } = await separate('git-separate-remove-head');
      expect(personRunsGit(tree, ['worktree', 'add', '-q', '../wt']).status).toBe(0);
      const configBefore = await fs.readFile(path.join(gitDir, 'config'), 'utf8');
      const result = await run(world!, `rm git-dirs/one/HEAD; ${FSMONITOR_CONFIG} >> git-dirs/one/config; exit 0`, { session: 'separate-remove-head' });
      expect(result.status, describeRun(result)).toBe(77);
      expect(result.stderr).toContain(`brokered-shell: needs approval: delete ${path.join(gitDir, 'HEAD')}`);
      expect(await fs.readFile(path.join(gitDir, 'config'), 'utf8')).toBe(configBefore);
      expect(personRunsGit(path.join(world!.ws, 'wt'), ['status', '--short']).status).toBe(0);
      expect(await exists(path.join(world!.ws, 'wt', 'planted-ran'))).toBe(false);
    });

    it('a relative symlink moved to where it names a folder in the git dir needs approval', async () => {
      await separate('git-separate-moved-link');
      const command = [
        'mkdir -p git-dirs/one/refs/x/objects git-dirs/one/refs/x/refs',
        `${FSMONITOR_CONFIG} > git-dirs/one/refs/x/config`,
        'echo "ref: refs/heads/main" > git-dirs/one/refs/x/HEAD',
        // Made at the top, ../git-dirs names a folder beside the workspace; moved into tree, it names the git dir.
        'ln -s ../git-dirs/one/refs/x docs',
        'mv docs tree/docs',
      ].join(' && ');
      const result = await run(world!, command, { session: 'separate-moved-link' });
      expect(result.status, describeRun(result)).toBe(77);
      expect(result.stderr).toContain('would be a symlink into a git directory');
      expect(await exists(path.join(world!.ws, 'tree', 'docs'))).toBe(false);
    });
  });

  it("an existing bare repository's config and hooks need approval, like .git's", async () => {
    world = await repository('git-bare-existing');
    const docs = path.join(world.ws, 'docs');
    personRunsGit(world.ws, ['init', '-q', '--bare', 'docs']);
    const configBefore = await fs.readFile(path.join(docs, 'config'), 'utf8');
    const command = `${FSMONITOR_CONFIG} >> docs/config; printf '#!/bin/sh\\ntouch hook-ran\\n' > docs/hooks/post-checkout; exit 0`;
    const result = await run(world, command, { session: 'bare-existing' });
    expect(result.status, describeRun(result)).toBe(77);
    expect(result.stderr).toContain(`brokered-shell: needs approval: write ${path.join(docs, 'config')}`);
    expect(result.stderr).toContain(`brokered-shell: needs approval: write ${path.join(docs, 'hooks', 'post-checkout')}`);
    expect(await fs.readFile(path.join(docs, 'config'), 'utf8')).toBe(configBefore);
    expect(await exists(path.join(docs, 'hooks', 'post-checkout'))).toBe(false);
    // Its objects and refs stay the command's to change, as .git's are.
    const fetched = await run(world, 'git -C docs fetch -q .. HEAD:refs/heads/main && git -C docs rev-parse -q --verify main', { session: 'bare-existing' });
    expect(fetched.status, describeRun(fetched)).toBe(0);
  });
});
