import { spawn, spawnSync } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT, startServe, tempDir, type ServeHandle } from '../helpers/serve-process.js';

const CLIENT = path.join(REPO_ROOT, 'build', 'Release', 'brokered-request');

interface Result {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the client without blocking this process's event loop (test servers live in it). */
function request(args: string[], env: Record<string, string | undefined>, input?: string): Promise<Result> {
  return new Promise((resolve, reject) => {
    const clean: NodeJS.ProcessEnv = { ...process.env, BROKERED_SHELL_SOCKET: undefined, ...env };
    const child = spawn(CLIENT, args, { env: clean, stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk) => (stdout += String(chunk)));
    child.stderr?.on('data', (chunk) => (stderr += String(chunk)));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
    if (input !== undefined) {
      child.stdin?.on('error', () => undefined);
      child.stdin?.end(input);
    }
  });
}

/** A Unix socket server in this process whose behaviour per connection the test chooses. */
async function fakeBroker(dir: string, onConnection: (socket: net.Socket) => void): Promise<{ socket: string; close: () => Promise<void> }> {
  const socketPath = path.join(dir, `fake-${Math.random().toString(36).slice(2)}.sock`);
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    onConnection(socket);
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return {
    socket: socketPath,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

let dir: string;
beforeAll(() => {
  if (!existsSync(CLIENT)) throw new Error(`${CLIENT} is missing: build it with npx node-gyp rebuild`);
  dir = tempDir('bsh-request-');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('brokered-request against a real serve', () => {
  let serve: ServeHandle;
  beforeAll(async () => {
    serve = await startServe();
  });
  afterAll(() => serve.cleanup());

  it('exit 0: prints the one answer line to a JSON line given as the argument', async () => {
    const line = JSON.stringify({ command: 'HostFileOperation', operation: 'mkdir', path: path.join(serve.workspace, 'made'), sessionId: 's1', id: 7 });
    const result = await request([line], { BROKERED_SHELL_SOCKET: serve.socket });
    expect(result.status).toBe(0);
    expect(result.stdout.endsWith('\n')).toBe(true);
    expect(result.stdout.split('\n')).toHaveLength(2);
    expect(JSON.parse(result.stdout)).toMatchObject({ id: 7, ok: true, operation: 'mkdir' });
    expect(existsSync(path.join(serve.workspace, 'made'))).toBe(true);
  });

  it('exit 0: reads the line from stdin when no argument is given (only the first line)', async () => {
    const file = path.join(serve.workspace, 'token.txt');
    const result = await request(['--timeout-ms', '20000'], { BROKERED_SHELL_SOCKET: serve.socket }, `x.read-write\t${file}\ts1\tt1\nsecond line\n`);
    expect(result).toMatchObject({ status: 0, stdout: 'SANDBOX\n' });
  });

  it('exit 0 also for a refusal: the answer is the caller’s to read', async () => {
    const result = await request([`x.read-write\t/etc/passwd\ts1\tt1`], { BROKERED_SHELL_SOCKET: serve.socket });
    expect(result).toMatchObject({ status: 0, stdout: 'DENY\n' });
  });

  it('exit 0: a CommandPrebackup announcement is answered by the plugin', async () => {
    const line = JSON.stringify({ command: 'CommandPrebackup', argv: ['dd', 'if=a'], cwd: serve.workspace, sessionId: 's1' });
    const result = await request([`--timeout-ms=20000`, line], { BROKERED_SHELL_SOCKET: serve.socket });
    expect(result.status).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({ ok: true, command: 'dd', targets: [] });
  });
});

describe('brokered-request with no broker: exit 2', () => {
  it.each<[string, (d: string) => string | undefined]>([
    ['the variable is unset', () => undefined],
    ['the variable is empty', () => ''],
    ['the socket does not exist', (d) => path.join(d, 'nowhere.sock')],
    ['a directory on the way does not exist', (d) => path.join(d, 'no-dir', 'broker.sock')],
    ['a component is a file, not a directory', (d) => {
      writeFileSync(path.join(d, 'plain'), '');
      return path.join(d, 'plain', 'broker.sock');
    }],
    ['the path is a regular file', (d) => {
      writeFileSync(path.join(d, 'regular.sock'), '');
      return path.join(d, 'regular.sock');
    }],
  ])('%s', async (_label, socketFor) => {
    const result = await request(['{"command":"X"}'], { BROKERED_SHELL_SOCKET: socketFor(dir) });
    expect(result.status).toBe(2);
    expect(result.stdout).toBe('');
  });

  it('a socket left behind by a broker that is gone (connection refused)', async () => {
    const stale = path.join(dir, 'stale.sock');
    // A listener killed outright leaves its socket file behind, with nobody listening.
    const killed = `require('node:net').createServer().listen(${JSON.stringify(stale)}, () => process.kill(process.pid, 'SIGKILL'))`;
    spawnSync(process.execPath, ['-e', killed]);
    expect(existsSync(stale)).toBe(true);
    const result = await request(['{"command":"X"}'], { BROKERED_SHELL_SOCKET: stale });
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(/no broker/);
  });
});

describe('brokered-request fails closed: exit 1', () => {
  const servers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const close of servers.splice(0)) await close();
  });
  const serveWith = async (onConnection: (socket: net.Socket) => void) => {
    const fake = await fakeBroker(dir, onConnection);
    servers.push(fake.close);
    return fake.socket;
  };

  it('a broker that accepts and never answers: timed out after connecting', async () => {
    let received = '';
    const socket = await serveWith((s) => s.on('data', (chunk) => (received += String(chunk))));
    const result = await request(['--timeout-ms', '300', '{"command":"X"}'], { BROKERED_SHELL_SOCKET: socket });
    expect(result.status).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/timed out/);
    expect(received).toBe('{"command":"X"}\n');
  });

  it.each<[string, (s: net.Socket) => void]>([
    ['closes without answering', (s) => s.on('data', () => s.end())],
    ['closes in the middle of an answer', (s) => s.on('data', () => s.end('{"ok":tr'))],
    ['answers with a NUL byte in the line', (s) => s.on('data', () => s.end('{"ok":true}\0\n'))],
  ])('a broker that %s: a broken answer', async (_label, behaviour) => {
    const socket = await serveWith(behaviour);
    const result = await request(['--timeout-ms', '20000', '{"command":"X"}'], { BROKERED_SHELL_SOCKET: socket });
    expect(result.status).toBe(1);
    expect(result.stdout).toBe('');
  });

  it('prints only the first answer line when a server sends more', async () => {
    const socket = await serveWith((s) => s.on('data', () => s.end('first\nsecond\n')));
    const result = await request(['x'], { BROKERED_SHELL_SOCKET: socket });
    expect(result).toMatchObject({ status: 0, stdout: 'first\n' });
  });

  it.each<[string, string[]]>([
    ['a timeout that is not a number', ['--timeout-ms', 'soon', 'x']],
    ['a zero timeout', ['--timeout-ms', '0', 'x']],
    ['a missing timeout value', ['--timeout-ms']],
    ['two lines', ['x', 'y']],
    ['an unknown option', ['--socket', 'x']],
    ['a line with a newline inside', ['a\nb']],
  ])('a usage error (%s)', async (_label, args) => {
    const socket = await serveWith((s) => s.on('data', () => s.end('never\n')));
    const result = await request(args, { BROKERED_SHELL_SOCKET: socket });
    expect(result.status).toBe(1);
    expect(result.stdout).toBe('');
  });
});
