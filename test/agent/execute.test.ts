/**
 * execute as a process: stdout and stderr captured exactly (and bounded), stdin closed
 * unless given, the environment and cwd a call asks for, the broker's variables, and a
 * timeout that kills the whole tree, in the sandbox and without it.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { makeWorld, openSession } from './helpers.js';

/** Whether a process still runs the given command line (a pid reused by another process does not count). */
async function running(pid: number, cmdline: string): Promise<boolean> {
  const text = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  if (text !== cmdline) return false;
  const status = await fs.readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  return !/^State:\s+Z/m.test(status);
}

describe('output', () => {
  it('stdout and stderr are captured exactly, byte for byte and apart', async () => {
    const world = await makeWorld('output');
    const { session } = await openSession(world);
    const result = await session.execute(`printf 'line one\\n'; printf 'to stderr\\n' >&2; printf '\\000\\377 end'; exit 3`);
    expect(result).toMatchObject({ exitCode: 3, signal: null, timedOut: false, truncated: { stdout: false, stderr: false } });
    expect(result.raw.stdout.equals(Buffer.concat([Buffer.from('line one\n'), Buffer.from([0, 0xff]), Buffer.from(' end')]))).toBe(true);
    expect(result.stderr).toBe('to stderr\n');
    expect(result.raw.stderr.toString('utf8')).toBe(result.stderr);
  });

  it('is bounded: the first bytes are kept, the rest is read and dropped, and it says so', async () => {
    const world = await makeWorld('bounded');
    const { session } = await openSession(world, { maxOutputBytes: 1000 });
    const result = await session.execute('head -c 300000 /dev/zero | tr "\\0" a; echo err >&2');
    expect(result.exitCode).toBe(0);
    expect(result.truncated).toEqual({ stdout: true, stderr: false });
    expect(result.stdout).toBe('a'.repeat(1000));
    expect(result.stderr).toBe('err\n');
    const small = await session.execute('echo 12345', { maxOutputBytes: 3 });
    expect(small.stdout).toBe('123');
    expect(small.truncated.stdout).toBe(true);
  });

  it('the same without the sandbox', async () => {
    const world = await makeWorld('output-local');
    const { session } = await openSession(world, { config: { sandbox: { enabled: false } }, maxOutputBytes: 4 });
    const result = await session.execute(`printf 'abcdef'; printf 'e' >&2; exit 4`);
    expect(result).toMatchObject({ exitCode: 4, stdout: 'abcd', stderr: 'e', truncated: { stdout: true, stderr: false }, sandboxed: false });
  });
});

describe('input, environment and cwd', () => {
  it('stdin is closed by default; given bytes are the input', async () => {
    const world = await makeWorld('stdin');
    const { session } = await openSession(world);
    expect((await session.execute('cat; echo "[eof]"')).stdout).toBe('[eof]\n');
    expect((await session.execute('tr a-z A-Z', { stdin: 'piped in\n' })).stdout).toBe('PIPED IN\n');
  });

  it('env is added to the session environment; cwd is relative to the workspace; the broker variables name the call', async () => {
    const world = await makeWorld('env');
    await fs.mkdir(path.join(world.ws, 'sub'));
    const { session } = await openSession(world);
    const result = await session.execute('pwd; echo "$EXTRA|${LANG}|$BROKERED_SHELL_SESSION_ID|$BROKERED_SHELL_TOOL_CALL_ID"; test -S "$BROKERED_SHELL_SOCKET" && echo socket', {
      cwd: 'sub',
      env: { EXTRA: 'extra', LANG: undefined },
      toolCallId: 'call-env',
    });
    expect(result.stdout).toBe(`${path.join(world.ws, 'sub')}\nextra||${session.sessionId}|call-env\nsocket\n`);
    await expect(session.execute('true', { cwd: 'missing' })).rejects.toThrow(/not a directory/);
  });

  it('a session id that cannot name a store directory is refused when the session is made', async () => {
    const world = await makeWorld('bad-session');
    await expect(openSession(world, { sessionId: 'a/../b' })).rejects.toMatchObject({ code: 'BSH_INVALID_OPTIONS', message: expect.stringContaining('invalid session id') });
  });

  it('a workspace that is missing or a file is refused when the session is made, said plainly', async () => {
    const world = await makeWorld('bad-workspace');
    const file = path.join(world.base, 'file.txt');
    await fs.writeFile(file, 'not a directory\n');
    const cases = [
      [path.join(world.base, 'missing'), 'does not exist'],
      [path.join(file, 'below'), 'does not exist'],
      [file, 'is not a directory'],
    ] as const;
    for (const [workspace, problem] of cases) {
      await expect(openSession(world, { workspace })).rejects.toMatchObject({ code: 'BSH_INVALID_OPTIONS', message: `the workspace ${workspace} ${problem}` });
    }
  });
});

describe('timeout', () => {
  it('kills the whole sandboxed tree, background processes included', async () => {
    const world = await makeWorld('timeout');
    const { session } = await openSession(world);
    const result = await session.execute('sleep 600 & echo "bg $!"; trap "" TERM; sleep 601; echo not-reached', { timeoutMs: 500 });
    expect(result).toMatchObject({ timedOut: true, signal: 'SIGKILL', sandboxed: true });
    expect(result.exitCode).toBe(128 + 9);
    expect(result.stdout).toMatch(/^bg \d+\n$/);
    const pid = Number(/^bg (\d+)$/m.exec(result.stdout)?.[1]);
    expect(await running(pid, 'sleep\u0000600\u0000')).toBe(false);
  });

  it('kills the tree without the sandbox too', async () => {
    const world = await makeWorld('timeout-local');
    const { session } = await openSession(world, { config: { sandbox: { enabled: false } } });
    const result = await session.execute('sleep 602 & echo "bg $!"; sleep 603', { timeoutMs: 500 });
    expect(result).toMatchObject({ timedOut: true, signal: 'SIGKILL', sandboxed: false, exitCode: 128 + 9 });
    const pid = Number(/^bg (\d+)$/m.exec(result.stdout)?.[1]);
    expect(pid).toBeGreaterThan(0);
    expect(await running(pid, 'sleep\u0000602\u0000')).toBe(false);
  });

  it('a command that ends in time is not touched', async () => {
    const world = await makeWorld('in-time');
    const { session } = await openSession(world);
    const result = await session.execute('echo quick', { timeoutMs: 60_000 });
    expect(result).toMatchObject({ timedOut: false, exitCode: 0, stdout: 'quick\n', signal: null });
  });
});

describe('what a command leaves running', () => {
  it('is stopped when it ends, in the sandbox and without it', async () => {
    const world = await makeWorld('leftovers');
    for (const enabled of [true, false]) {
      const { session } = await openSession(world, { config: { sandbox: { enabled } } });
      const result = await session.execute('sleep 604 & echo "bg $!"');
      expect(result.exitCode).toBe(0);
      const pid = Number(/^bg (\d+)$/m.exec(result.stdout)?.[1]);
      expect(pid).toBeGreaterThan(0);
      expect(await running(pid, 'sleep\u0000604\u0000'), `sandbox ${String(enabled)}`).toBe(false);
    }
  });
});
