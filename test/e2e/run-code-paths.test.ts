/**
 * Through the real kernel sandbox: files other tools later obey or run (editor and agent
 * config in the workspace, what a shell, PATH or a tool takes from home) are refused with
 * `run --no` and left unwritten; a rule that would make a backtracking matcher take
 * minutes is answered at once; a rule no path can match stops `run` before anything runs.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { brokeredShell, describeRun, makeWorld, removeWorld, run, type World } from './run-helpers.js';

let world: World | undefined;
afterEach(() => removeWorld(world));

const exists = (file: string) =>
  fs.lstat(file).then(
    () => true,
    () => false,
  );

describe('run --no: config other tools obey or run is left unwritten', () => {
  it('in the workspace, at any depth: .mcp.json, .vscode, .claude, .envrc, .gitmodules; the project\'s own files are written', async () => {
    world = await makeWorld('code-paths-workspace');
    const files = ['.mcp.json', '.vscode/tasks.json', 'packages/app/.claude/settings.json', '.envrc', '.gitmodules', '.devcontainer/devcontainer.json'];
    for (const dir of ['.vscode', 'packages/app/.claude', '.devcontainer']) await fs.mkdir(path.join(world.ws, dir), { recursive: true });
    const command = [...files.map((file) => `echo '{}' > ${file}`), 'echo ok > package.json'].join('; ');
    const result = await brokeredShell(world, ['run', '--no', '--session', 'workspace', '--', command]);
    for (const file of files) {
      expect(result.stderr, describeRun(result)).toContain(`write ${path.join(world.ws, file)}`);
      expect([file, await exists(path.join(world.ws, file))]).toEqual([file, false]);
    }
    expect(await fs.readFile(path.join(world.ws, 'package.json'), 'utf8')).toBe('ok\n');
  });

  it('in home, when home is a writable root: ~/bin/ls, .vimrc, .tmux.conf, .npmrc; other files in home are written', async () => {
    world = await makeWorld('code-paths-home');
    const userHome = path.join(world.base, 'user');
    await fs.mkdir(path.join(userHome, 'bin'), { recursive: true });
    await fs.writeFile(path.join(world.home, 'config.json'), JSON.stringify({ writableRoots: [userHome] }));
    const files = ['bin/ls', '.vimrc', '.tmux.conf', '.npmrc'];
    const command = [...files.map((file) => `echo x > ~/${file}`), 'echo kept > ~/notes.txt'].join('; ');
    const result = await brokeredShell(world, ['run', '--no', '--session', 'home', '--', command], { env: { HOME: userHome } });
    for (const file of files) {
      expect(result.stderr, describeRun(result)).toContain(`write ${path.join(userHome, file)}`);
      expect([file, await exists(path.join(userHome, file))]).toEqual([file, false]);
    }
    expect(await fs.readFile(path.join(userHome, 'notes.txt'), 'utf8')).toBe('kept\n');
  });
});

describe("a project's rules cannot hang the broker or guard nothing", () => {
  it('a rule a backtracking matcher takes minutes over is answered at once: the write of a 45-character name happens', async () => {
    world = await makeWorld('code-paths-backtracking');
    await fs.writeFile(path.join(world.ws, '.brokered-shell.json'), JSON.stringify({ fileSafety: { rules: [{ pattern: '*a*a*a*a*a*a*a*a*a*a*a*a*ab', decision: 'deny' }] } }));
    const name = 'a'.repeat(45);
    const result = await run(world, `echo x > ${name} && echo y > ${'a'.repeat(44)}b; exit 0`, { session: 'backtracking' });
    expect(result.status, describeRun(result)).toBe(0);
    expect(await fs.readFile(path.join(world.ws, name), 'utf8')).toBe('x\n');
    expect(await exists(path.join(world.ws, `${'a'.repeat(44)}b`))).toBe(false);
  }, 30_000);

  it('a rule no path can match stops run before the command runs, naming the file, the rule and why', async () => {
    world = await makeWorld('code-paths-never');
    const project = path.join(world.ws, '.brokered-shell.json');
    await fs.writeFile(project, JSON.stringify({ fileSafety: { rules: [{ pattern: '**/../**', decision: 'deny' }, { pattern: 'secrets/**\n', decision: 'deny' }] } }));
    const result = await run(world, 'echo ran > ran.txt', { session: 'never' });
    expect(result.status, describeRun(result)).toBe(126);
    expect(result.stderr).toContain(`${project}:`);
    expect(result.stderr).toMatch(/fileSafety\.rules\.0\.pattern: "\*\*\/\.\.\/\*\*" can never match/);
    expect(result.stderr).toMatch(/fileSafety\.rules\.1\.pattern: "secrets\/\*\*\\n" can never match: .*newline/);
    expect(await exists(path.join(world.ws, 'ran.txt'))).toBe(false);
  });
});
