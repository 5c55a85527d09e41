/**
 * connect(2) from the sandbox. A listening pathname socket is a door out that Landlock
 * does not scope (a container engine's, systemd's, another session's broker): a command
 * reaches its own temp dir's sockets and the ones it was given, nothing else, and a
 * thread flipping the address during the call never gets it through.
 */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildFixture, createFakeBroker, removeDir, runBash, runSandboxed, tempDir, type FakeBroker } from '../fixtures/sandbox/harness.js';

let bin: string;
let ws: string;
let scratch: string;
let outside: string;
let broker: FakeBroker;
let servers: net.Server[];

beforeAll(() => {
  bin = tempDir('bin');
  buildFixture('connect-racer', bin);
});
afterAll(() => removeDir(bin));

beforeEach(() => {
  ws = tempDir('ws');
  scratch = tempDir('scratch');
  outside = tempDir('outside');
  broker = createFakeBroker(ws);
  servers = [];
});
afterEach(async () => {
  for (const server of servers) await new Promise((resolve) => server.close(resolve));
  for (const dir of [ws, scratch, outside]) removeDir(dir);
});

/** A server outside the sandbox that records what each connection sent. */
async function listen(where: string | number): Promise<{ received: string[]; connections: () => number; port: number }> {
  const received: string[] = [];
  let connections = 0;
  const server = net.createServer((socket) => {
    connections += 1;
    socket.on('data', (chunk) => received.push(chunk.toString()));
    socket.on('error', () => undefined);
  });
  servers.push(server);
  await new Promise<void>((resolve) => (typeof where === 'number' ? server.listen(where, '127.0.0.1', resolve) : server.listen(where, resolve)));
  const address = server.address();
  return { received, connections: () => connections, port: typeof address === 'object' && address ? address.port : 0 };
}

/** python connecting to ADDRESS and sending "hello": prints "ok" or the errno's name. */
const connectPy = (family: 'unix' | 'inet', address: string) =>
  `python3 -c '
import errno, socket, sys, time
s = socket.socket(socket.AF_UNIX if sys.argv[1] == "unix" else socket.AF_INET)
a = sys.argv[2] if sys.argv[1] == "unix" else ("127.0.0.1", int(sys.argv[2]))
try:
    s.connect(a.replace("@", "\\0", 1) if isinstance(a, str) else a); s.sendall(b"hello"); time.sleep(0.2); print("ok")
except OSError as e:
    print(errno.errorcode[e.errno])
' ${family} '${address}'`;

const run = (script: string, unixSockets?: string[]) =>
  runBash(script, { cwd: ws, broker, scratch: [scratch], ...(unixSockets ? { unixSockets } : {}), env: { SCRATCH: scratch } });

describe('connect from the sandbox', () => {
  it('refuses a socket outside every root, which never sees a connection', async () => {
    const door = await listen(path.join(outside, 'engine.sock'));
    const result = await run(connectPy('unix', path.join(outside, 'engine.sock')));
    expect(result.stdout, result.stderr).toBe('EACCES\n');
    expect(door.connections()).toBe(0);
  });

  it('refuses it through a symlink in the temp dir too', async () => {
    const door = await listen(path.join(outside, 'engine.sock'));
    fs.symlinkSync(path.join(outside, 'engine.sock'), path.join(scratch, 'link.sock'));
    const result = await run(connectPy('unix', path.join(scratch, 'link.sock')));
    expect(result.stdout, result.stderr).toBe('EACCES\n');
    expect(door.connections()).toBe(0);
  });

  it('reaches a socket it was given, with the bytes it sent', async () => {
    const given = await listen(path.join(outside, 'agent.sock'));
    const result = await run(connectPy('unix', path.join(outside, 'agent.sock')), [path.join(outside, 'agent.sock')]);
    expect(result.stdout, result.stderr).toBe('ok\n');
    expect(given.received.join('')).toBe('hello');
  });

  it('reaches its own temp dir sockets, made and served inside the sandbox', async () => {
    const result = await run(`python3 -c '
import os, socket
p = os.environ["SCRATCH"] + "/own.sock"
srv = socket.socket(socket.AF_UNIX); srv.bind(p); srv.listen(1)
c = socket.socket(socket.AF_UNIX); c.connect(p); c.sendall(b"inside")
conn, _ = srv.accept(); print(conn.recv(16).decode())
os.chdir(os.environ["SCRATCH"])
c2 = socket.socket(socket.AF_UNIX); c2.connect("/proc/self/cwd/own.sock"); c2.sendall(b"via its own /proc/self")
conn, _ = srv.accept(); print(conn.recv(32).decode())
'`);
    expect(result.stdout, result.stderr).toBe('inside\nvia its own /proc/self\n');
  });

  it('refuses abstract sockets (EPERM)', async () => {
    const result = await run(connectPy('unix', '@brokered-shell-test-abstract'));
    expect(result.stdout, result.stderr).toBe('EPERM\n');
  });

  it('leaves TCP alone', async () => {
    const tcp = await listen(0);
    const result = await run(connectPy('inet', String(tcp.port)));
    expect(result.stdout, result.stderr).toBe('ok\n');
    expect(tcp.received.join('')).toBe('hello');
  });

  it('never connects to the refused socket while a thread flips the address', async () => {
    // Same length, so the flipper can swap the path bytes in place.
    const denied = path.join(outside, 'd.sock');
    const allowedName = 'a'.repeat(denied.length - scratch.length - 1);
    if (allowedName.length < 1) throw new Error('temp dir names too long for the racer');
    const allowed = path.join(scratch, allowedName);
    const door = await listen(denied);
    const own = await listen(allowed);
    const result = await runSandboxed([path.join(bin, 'connect-racer'), allowed, denied, '3000'], { cwd: ws, broker, scratch: [scratch] });
    expect(result.code, result.stderr).toBe(0);
    const [, connected = 0, refused = 0] = /connected (\d+) refused (\d+)/.exec(result.stdout)?.map(Number) ?? [];
    expect(connected).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
    // Every accepted connection is counted before the door is looked at.
    for (let i = 0; i < 200 && own.connections() < connected; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(own.connections()).toBe(connected);
    expect(door.connections()).toBe(0);
  });
});
