import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli, tempDir } from './helpers.js';

describe('usage errors exit 2 with commander’s message on stderr', () => {
  const cases: Array<[string, string[], string]> = [
    ['an unknown command', ['frobnicate'], "error: unknown command 'frobnicate'"],
    ['an unknown backups subcommand', ['backups', 'undo'], "error: unknown command 'undo'"],
    ['backups show without TURN', ['backups', 'show'], "error: missing required argument 'turn'"],
    ['backups diff without TURN', ['backups', 'diff'], "error: missing required argument 'turn'"],
    ['backups restore without TURN', ['backups', 'restore'], "error: missing required argument 'turn'"],
    ['an unknown option', ['backups', 'list', '--everything'], "error: unknown option '--everything'"],
    ['an option missing its value', ['backups', 'list', '--session'], "error: option '--session <id>' argument missing"],
    ['too many arguments', ['backups', 'show', 'a', 'b'], "error: too many arguments for 'show'. Expected 1 argument but got 2."],
    ['serve without its required options', ['serve'], "error: required option '--socket <path>' not specified"],
    ['run with its command in several words', ['run', '--', 'echo', "it's"], "error: run takes the command as one argument; quote it: brokered-shell run -- 'echo it'\\''s'"],
    ['run with an empty command', ['run', '--', ' '], 'error: run needs a command; it was empty'],
  ];
  for (const [what, args, message] of cases) {
    it(what, async () => {
      const result = cli(args, { home: await tempDir('bsh-cli-home-') });
      expect(result.status).toBe(2);
      expect(result.stdout).toBe('');
      expect(result.stderr.split('\n')[0]).toBe(message);
    });
  }

  it('a workspace that is missing or a file: exit 1, said plainly, nothing run', async () => {
    const home = await tempDir('bsh-cli-home-');
    const dir = await tempDir('bsh-cli-ws-');
    const file = path.join(dir, 'file.txt');
    await fs.writeFile(file, 'not a directory\n');
    for (const [workspace, problem] of [[path.join(dir, 'missing'), 'does not exist'], [path.join(file, 'below'), 'does not exist'], [file, 'is not a directory']] as const) {
      for (const args of [['run', '--workspace', workspace, '--', 'touch ran'], ['serve', '--socket', path.join(dir, 's.sock'), '--session', 's1', '--workspace', workspace]]) {
        const result = cli(args, { home });
        expect(result.status).toBe(1);
        expect(result.stderr).toBe(`brokered-shell: the workspace ${workspace} ${problem} [BSH_INVALID_OPTIONS]\n`);
      }
    }
    expect(await fs.readdir(dir)).toEqual(['file.txt']);
  });

  it('a session id that cannot name a store directory: exit 1, said plainly, nothing run', async () => {
    const home = await tempDir('bsh-cli-home-');
    const dir = await tempDir('bsh-cli-ws-');
    for (const args of [['run', '--workspace', dir, '--session', '../x', '--', 'touch ran'], ['serve', '--socket', path.join(dir, 's.sock'), '--session', '../x', '--workspace', dir]]) {
      const result = cli(args, { home });
      expect(result.status).toBe(1);
      expect(result.stderr).toBe(`brokered-shell: invalid session id "../x": session id contains a path separator; session id contains '..' [BSH_INVALID_OPTIONS]\n`);
    }
    expect(await fs.readdir(dir)).toEqual([]);
  });

  it('an error naming a path shows its escape sequences escaped, never raw', async () => {
    const dir = await tempDir('bsh-cli-ws-');
    const workspace = path.join(dir, 'evil\u001b[2J\tname');
    const result = cli(['run', '--workspace', workspace, '--', 'true'], { home: await tempDir('bsh-cli-home-') });
    expect(result.status).toBe(1);
    expect(result.stderr).toBe(`brokered-shell: the workspace ${dir}/evil\\x1b[2J\\tname does not exist [BSH_INVALID_OPTIONS]\n`);
  });

  it('--help is not an error: exit 0, usage on stdout', async () => {
    const result = cli(['backups', '--help'], { home: await tempDir('bsh-cli-home-') });
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/^Usage: brokered-shell backups/);
    for (const sub of ['list', 'show', 'diff', 'restore']) expect(result.stdout).toContain(sub);
  });

  it('--help names every command, the environment variables brokered-shell reads and those a command finds inside', async () => {
    const result = cli(['--help'], { home: await tempDir('bsh-cli-home-') });
    expect(result.status).toBe(0);
    for (const command of ['run', 'serve', 'mcp', 'backups', 'config', 'doctor']) expect(result.stdout).toMatch(new RegExp(`^  ${command} `, 'm'));
    expect(result.stdout).toContain('Environment:');
    for (const name of ['BROKERED_SHELL_HOME', 'BROKERED_SHELL_LOG_LEVEL', 'BROKERED_SHELL_NO_BUNDLE', 'BROKERED_SHELL_SOCKET', 'BROKERED_SHELL_SESSION_ID', 'BROKERED_SHELL_TOOL_CALL_ID', 'BROKERED_SHELL_TRACE_ID']) {
      expect(result.stdout).toContain(name);
    }
  });

  it('mcp --help: its options, --answer with its choices', async () => {
    const result = cli(['mcp', '--help'], { home: await tempDir('bsh-cli-home-') });
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/^Usage: brokered-shell mcp/);
    expect(result.stdout).toContain('--workspace <dir>');
    // Commander wraps its help to the width: compare with the whitespace run together.
    expect(result.stdout.replace(/\s+/g, ' ')).toContain('--answer <answer> what a question for approval gets when the client cannot be asked (no MCP elicitation) (choices: "yes", "no", default: "no")');
  });

  it('mcp in a workspace that does not exist stops before it answers', async () => {
    const result = cli(['mcp', '--workspace', '/nonexistent/bsh-mcp'], { home: await tempDir('bsh-cli-home-') });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('the workspace /nonexistent/bsh-mcp does not exist [BSH_INVALID_OPTIONS]');
    expect(result.stdout).toBe('');
  });
});
