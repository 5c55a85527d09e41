/**
 * An embedding app that never calls `close()`: the session's socket alone does not keep
 * its process alive, and when the process exits the session's socket dir and temp dirs
 * go with it. (Whatever the app still runs keeps it alive, as it would anyway.)
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../helpers/serve-process.js';
import { makeWorld } from './helpers.js';

const script = `
import { createSandboxSession } from ${JSON.stringify(path.join(REPO_ROOT, 'dist', 'index.js'))};
const session = await createSandboxSession({ workspace: process.argv[1], home: process.argv[2] });
await session.beginTurn({ userMessage: 'never closed' });
const result = await session.execute('echo ran > made.txt');
console.log(JSON.stringify({ socketPath: session.socketPath, exitCode: result.exitCode }));
`;

/** Runs the script; resolves with its output once it exits on its own (killed after 30 s as a safety net). */
function runToExit(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; signal: string | null; out: string; err: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    const guard = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(guard);
      resolve({ code, signal, out, err });
    });
  });
}

describe('a session never closed', () => {
  it('lets its process exit, and leaves no socket or temp dir behind', async () => {
    const world = await makeWorld('forgotten-close');
    const tmp = path.join(world.base, 'tmp');
    await fs.mkdir(tmp);
    const env: NodeJS.ProcessEnv = { ...process.env, TMPDIR: tmp };
    delete env.BROKERED_SHELL_SOCKET;
    const ended = await runToExit([world.ws, world.home], env);
    expect(ended.signal, ended.err).toBeNull();
    expect(ended.code, ended.err).toBe(0);
    const { socketPath, exitCode } = JSON.parse(ended.out) as { socketPath: string; exitCode: number };
    expect(exitCode).toBe(0);
    expect(await fs.readFile(path.join(world.ws, 'made.txt'), 'utf8')).toBe('ran\n');
    await expect(fs.access(path.dirname(socketPath))).rejects.toThrow();
    expect(await fs.readdir(tmp)).toEqual([]);
  });
});
