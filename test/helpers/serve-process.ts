import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';
import { createInterface } from 'node:readline';

export const REPO_ROOT = realpathSync(new URL('../..', import.meta.url).pathname);
export const CLI = path.join(REPO_ROOT, 'bin', 'brokered-shell.js');

export interface ServeHandle {
  child: ChildProcessWithoutNullStreams;
  socket: string;
  home: string;
  trashHome: string;
  workspace: string;
  env: NodeJS.ProcessEnv;
  /** Send one control line on stdin and wait for its JSON answer. */
  control(message: Record<string, unknown>): Promise<Record<string, unknown>>;
  /** Exit status once the process ends. */
  exited: Promise<number | null>;
  stderr(): string;
  cleanup(): void;
}

const made: string[] = [];
// Registered while the importing test file is collected: runs after its last test.
afterAll(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A fresh temp dir (symlinks resolved), removed after the test file's last test. */
export function tempDir(prefix: string): string {
  const dir = realpathSync(mkdtempSync(path.join(os.tmpdir(), prefix)));
  made.push(dir);
  return dir;
}

/** Start a real `brokered-shell serve` and wait for its ready line. */
export async function startServe(options: { session?: string; workspace?: string; extraArgs?: string[] } = {}): Promise<ServeHandle> {
  const base = tempDir('bsh-serve-');
  const home = path.join(base, 'home');
  const trashHome = path.join(base, 'xdg');
  const workspace = options.workspace ?? path.join(base, 'ws');
  if (!options.workspace) rmSync(workspace, { recursive: true, force: true });
  await import('node:fs/promises').then((fs) => fs.mkdir(workspace, { recursive: true }));
  const socket = path.join(base, 'sock', 'broker.sock');
  const env = { ...process.env, BROKERED_SHELL_HOME: home, XDG_DATA_HOME: trashHome, BROKERED_SHELL_LOG_LEVEL: 'warn' };
  const child = spawn(
    process.execPath,
    [CLI, 'serve', '--socket', socket, '--session', options.session ?? 's1', '--workspace', workspace, ...(options.extraArgs ?? [])],
    { env, stdio: ['pipe', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += String(chunk)));
  const lines = createInterface({ input: child.stdout });
  const waiting: Array<(value: Record<string, unknown>) => void> = [];
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const ready = new Promise<void>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`serve exited with ${code} before ready: ${stderr}`)));
    lines.on('line', (line) => {
      const value = JSON.parse(line) as Record<string, unknown>;
      if (value.ready === true) resolve();
      else waiting.shift()?.(value);
    });
  });
  await ready;
  return {
    child,
    socket,
    home,
    trashHome,
    workspace,
    env,
    exited,
    stderr: () => stderr,
    control(message) {
      return new Promise((resolve) => {
        waiting.push(resolve);
        child.stdin.write(`${JSON.stringify(message)}\n`);
      });
    },
    cleanup() {
      if (child.exitCode === null) child.kill('SIGKILL');
      rmSync(base, { recursive: true, force: true });
    },
  };
}

/** Send raw bytes on one connection and collect `count` answer lines (or until close). */
export function exchange(socket: string, payload: string | Buffer, count: number, timeoutMs = 10_000): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const answers: string[] = [];
    let buffer = '';
    const client = net.createConnection(socket);
    const timer = setTimeout(() => {
      client.destroy();
      reject(new Error(`timed out with ${answers.length}/${count} answers`));
    }, timeoutMs);
    const finish = () => {
      clearTimeout(timer);
      client.destroy();
      resolve(answers);
    };
    client.on('data', (chunk) => {
      buffer += String(chunk);
      const parts = buffer.split('\n');
      buffer = parts.pop() ?? '';
      answers.push(...parts);
      if (answers.length >= count) finish();
    });
    client.on('close', finish);
    client.on('error', reject);
    client.on('connect', () => client.write(payload));
  });
}

/**
 * Write `payload` and half-close at once (as `socat` or `nc -N` do), then collect every
 * answer line until the server closes the connection.
 */
export function sendAndEnd(socket: string, payload: string, timeoutMs = 10_000): Promise<string[]> {
  return new Promise((resolve, reject) => {
    let received = '';
    const client = net.createConnection({ path: socket, allowHalfOpen: true });
    const timer = setTimeout(() => {
      client.destroy();
      reject(new Error(`timed out; received so far: ${JSON.stringify(received)}`));
    }, timeoutMs);
    client.on('data', (chunk) => (received += String(chunk)));
    client.on('end', () => {
      clearTimeout(timer);
      client.end();
      resolve(received.split('\n').filter((line) => line !== ''));
    });
    client.on('error', reject);
    client.on('connect', () => client.end(payload));
  });
}

export async function ask(socket: string, line: string): Promise<string> {
  const [answer] = await exchange(socket, `${line}\n`, 1);
  if (answer === undefined) throw new Error('no answer');
  return answer;
}

export async function askJson(socket: string, message: Record<string, unknown>): Promise<Record<string, unknown>> {
  return JSON.parse(await ask(socket, JSON.stringify({ command: 'HostFileOperation', sessionId: 's1', ...message }))) as Record<string, unknown>;
}
