import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI } from '../test/helpers/serve-process.js';

const HOOK = new URL('./claude-code/pre-tool-use.mjs', import.meta.url).pathname;
const REWIND = new URL('./claude-code/rewind.mjs', import.meta.url).pathname;
/** The CLI as the rewritten command names it: this checkout's, by this Node. */
const BIN = `'${process.execPath}' '${CLI}'`;

const made: string[] = [];
afterEach(async () => {
  for (const dir of made.splice(0)) await fs.rm(dir, { recursive: true, force: true });
});

async function world() {
  const base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'bsh-claude-code-')));
  made.push(base);
  const ws = path.join(base, 'project');
  await fs.mkdir(ws);
  const env = { ...process.env, BROKERED_SHELL_HOME: path.join(base, 'home'), BROKERED_SHELL_BIN: BIN, XDG_DATA_HOME: path.join(base, 'xdg') };
  return { ws, env };
}

/** A PreToolUse payload as Claude Code sends it for its Bash tool. */
const payload = (ws: string, command: string, extra: Record<string, unknown> = {}) => ({
  session_id: 'abc123',
  transcript_path: path.join(ws, '.claude', 'transcript.jsonl'),
  cwd: ws,
  permission_mode: 'default',
  hook_event_name: 'PreToolUse',
  tool_name: 'Bash',
  tool_input: { command, description: `do: ${command}`, timeout: 120000 },
  tool_use_id: 'toolu_01ABC123',
  ...extra,
});

function hook(input: unknown, env: NodeJS.ProcessEnv): string {
  return execFileSync(process.execPath, [HOOK], { input: JSON.stringify(input), env, encoding: 'utf8' });
}

/** Feed the hook, then run what it answered as Claude Code would: the rewritten command, by bash, in the project. */
function runThroughHook(ws: string, command: string, env: NodeJS.ProcessEnv) {
  const reply = JSON.parse(hook(payload(ws, command), env)) as { hookSpecificOutput: { permissionDecision: string; updatedInput: { command: string; description: string; timeout: number } } };
  const run = spawnSync('bash', ['-c', reply.hookSpecificOutput.updatedInput.command], { cwd: ws, env, encoding: 'utf8' });
  return { reply, run };
}

describe('the Claude Code recipe', () => {
  it('the PreToolUse hook rewrites a Bash command into brokered-shell run; the command then runs sandboxed and backed up', async () => {
    const { ws, env } = await world();
    await fs.writeFile(path.join(ws, 'notes.txt'), 'first\n');
    const { reply, run } = runThroughHook(ws, `echo second > notes.txt && echo "it's done"`, env);
    expect(reply.hookSpecificOutput).toMatchObject({ permissionDecision: 'allow', updatedInput: { description: `do: echo second > notes.txt && echo "it's done"`, timeout: 120000 } });
    expect(reply.hookSpecificOutput.updatedInput.command).toContain(' run --workspace ');
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toBe("it's done\n");
    expect(run.stderr).toMatch(/turn \S+ backed up 1 file/);
    expect(await fs.readFile(path.join(ws, 'notes.txt'), 'utf8')).toBe('second\n');

    const outside = spawnSync('bash', ['-c', JSON.parse(hook(payload(ws, 'echo x > /etc/bsh-claude-hook-test'), env)).hookSpecificOutput.updatedInput.command], { cwd: ws, env, encoding: 'utf8' });
    expect(outside.status).not.toBe(0);
    expect(outside.stderr).toContain('brokered-shell: denied write /etc/bsh-claude-hook-test');
    expect(existsSync('/etc/bsh-claude-hook-test')).toBe(false);
  });

  it('answers nothing for other tools', async () => {
    const { ws, env } = await world();
    expect(hook(payload(ws, 'ls', { tool_name: 'Write', tool_input: { file_path: path.join(ws, 'a'), content: 'x' } }), env)).toBe('');
  });

  it("a command that is itself a brokered-shell run is wrapped too: the model cannot pick run's flags", async () => {
    const { ws, env } = await world();
    const policy = path.join(ws, 'wide.json');
    await fs.writeFile(policy, JSON.stringify({ writableRoots: ['/etc'] }));
    const own = `${BIN} run --policy ${policy} --yes -- 'echo x > /etc/bsh-claude-hook-widened'`;
    const { reply, run } = runThroughHook(ws, own, env);
    expect(reply.hookSpecificOutput.updatedInput.command).not.toBe(own);
    expect(run.status).not.toBe(0);
    expect(existsSync('/etc/bsh-claude-hook-widened')).toBe(false);
  });

  it('keeps Claude Code\'s own question with BROKERED_SHELL_HOOK_DECISION=ask', async () => {
    const { ws, env } = await world();
    const reply = JSON.parse(hook(payload(ws, 'ls'), { ...env, BROKERED_SHELL_HOOK_DECISION: 'ask' })) as { hookSpecificOutput: { permissionDecision: string } };
    expect(reply.hookSpecificOutput.permissionDecision).toBe('ask');
  });

  it('/bsh-rewind undoes the commands one by one, byte for byte, and --undo takes the last undo back', async () => {
    const { ws, env } = await world();
    const file = path.join(ws, 'data.bin');
    const original = Buffer.from([0, 255, 1, 254, 10]);
    await fs.writeFile(file, original);
    expect(runThroughHook(ws, 'printf one > data.bin', env).run.status).toBe(0);
    expect(runThroughHook(ws, 'printf two > data.bin; rm -f gone; echo made > made.txt', env).run.status).toBe(0);
    const rewind = (...args: string[]) => spawnSync(process.execPath, [REWIND, ...args], { cwd: ws, env, encoding: 'utf8' });

    const first = rewind();
    expect(first.status, first.stdout + first.stderr).toBe(0);
    expect(first.stdout).toContain(`removed ${path.join(ws, 'made.txt')}`);
    expect(await fs.readFile(file, 'utf8')).toBe('one');
    expect(existsSync(path.join(ws, 'made.txt'))).toBe(false);

    const second = rewind();
    expect(second.status, second.stdout).toBe(0);
    expect(await fs.readFile(file)).toEqual(original);

    const undo = rewind('--undo');
    expect(undo.status, undo.stdout).toBe(0);
    expect(await fs.readFile(file, 'utf8')).toBe('one');
    // The first command counts as done again: the next rewind undoes it once more.
    expect(rewind().status).toBe(0);
    expect(await fs.readFile(file)).toEqual(original);
  });
});
