import { execFileSync, spawn } from 'node:child_process';
import { closeSync, fstatSync, mkdirSync, readFileSync, readSync, rmSync, statSync, symlinkSync, writeFileSync, writeSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Broker, type Verdict } from '../../src/core/index.js';
import { BrokerServer } from '../../src/ipc/server.js';
import { native } from '../../src/native/index.js';
import { FD_GRANT_FLAGS, FD_GRANT_MODE, FdGrantPlugin } from '../../src/plugins/fd-grant.js';
import { SandboxTokenPlugin } from '../../src/plugins/sandbox-token.js';
import { standardPlugins } from '../../src/plugins/standard.js';
import { fixedPolicy, identityResolver, writeRequest } from '../helpers/bare-broker.js';
import { tempDir } from '../helpers/serve-process.js';

let base: string;
beforeEach(() => {
  base = tempDir('bsh-fd-grant-');
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

/**
 * A broker whose policy answers `verdict` for every path, with sandbox-token registered
 * before fd-grant: the stages, not the order of registration, decide who answers first.
 */
function broker(verdict: Verdict): Broker {
  return new Broker({ sessionId: 's1' }).use(identityResolver(), fixedPolicy(() => ({ verdict, source: 'test' })), new SandboxTokenPlugin(), new FdGrantPlugin());
}

/** The addon's race-free open, which the plugin uses by default; tests wrap it to see the fds. */
const realOpen = (p: string, flags: number, mode: number) => native().openNoSymlinks(p, flags, mode);

/** A plugin whose opener records every fd it returns. */
function recordingPlugin(opened: number[]): FdGrantPlugin {
  return new FdGrantPlugin({
    open: (p, flags, mode) => {
      const fd = realOpen(p, flags, mode);
      opened.push(fd);
      return fd;
    },
  });
}

/** Whether `fd` no longer refers to `file` (closed, or its number reused for something else). */
function released(fd: number, file: string): boolean {
  try {
    const held = fstatSync(fd);
    const named = statSync(file);
    return held.ino !== named.ino || held.dev !== named.dev;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EBADF';
  }
}

function grantedFd(outcome: Awaited<ReturnType<Broker['handle']>>): number {
  if (outcome.grant?.kind !== 'fd') throw new Error(`expected an fd grant, got ${JSON.stringify(outcome.grant)} (${outcome.error?.message ?? ''})`);
  return outcome.grant.fd;
}

describe('FdGrantPlugin', () => {
  it('a grant-token write: the broker opens the file itself (read-write) and hands over the fd; sandbox-token never sees it', async () => {
    const file = path.join(base, 'f');
    writeFileSync(file, 'old');
    const outcome = await broker('grant-token').handle(writeRequest(file));
    expect(outcome).toMatchObject({ ok: true, wireDecision: 'grant-token' });
    const fd = grantedFd(outcome);
    try {
      expect(fstatSync(fd).ino).toBe(statSync(file).ino);
      const buffer = Buffer.alloc(3);
      expect(readSync(fd, buffer, 0, 3, 0)).toBe(3);
      expect(buffer.toString()).toBe('old');
      writeSync(fd, 'new', 0);
      // Not truncated: the client applies O_TRUNC itself once it has the fd.
      expect(readFileSync(file, 'utf8')).toBe('new');
    } finally {
      closeSync(fd);
    }
  });

  it('opens with O_RDWR | O_CREAT, mode 0666 (a missing file is created)', async () => {
    const calls: Array<[string, number, number]> = [];
    const file = path.join(base, 'new');
    const plugin = new FdGrantPlugin({
      open: (p, flags, mode) => {
        calls.push([p, flags, mode]);
        return realOpen(p, flags, mode);
      },
    });
    const b = new Broker({ sessionId: 's1' }).use(identityResolver('absent'), fixedPolicy(() => ({ verdict: 'grant-token' })), plugin);
    const fd = grantedFd(await b.handle(writeRequest(file)));
    closeSync(fd);
    expect(calls).toEqual([[file, FD_GRANT_FLAGS, FD_GRANT_MODE]]);
    expect(FD_GRANT_MODE).toBe(0o666);
    expect(statSync(file).isFile()).toBe(true);
  });

  it.each<[string, Verdict, 'read' | 'write', string]>([
    ['a sandbox verdict', 'sandbox', 'write', 'sandbox'],
    ['a read under grant-token', 'grant-token', 'read', 'sandbox'],
  ])('%s is left to sandbox-token', async (_label, verdict, access, kind) => {
    const file = path.join(base, 'f');
    writeFileSync(file, 'x');
    const outcome = await broker(verdict).handle(writeRequest(file, { targets: [{ role: 'path', path: file, access }] }));
    expect(outcome).toMatchObject({ ok: true, grant: { kind } });
  });

  it('host operations never get an fd (issue-token does not run for them)', async () => {
    const file = path.join(base, 'f');
    writeFileSync(file, 'x');
    const outcome = await broker('grant-token').handle({
      origin: 'host-op',
      action: 'host-op',
      operation: 'chmod',
      targets: [{ role: 'path', path: file, access: 'write' }],
      sessionId: 's1',
      options: { mode: 0o600 },
    });
    expect(outcome.grant).toBeUndefined();
  });

  it('a symlink anywhere in the resolved path fails the open: deny, nothing opened', async () => {
    const real = path.join(base, 'real');
    mkdirSync(real);
    writeFileSync(path.join(real, 'f'), 'x');
    symlinkSync(real, path.join(base, 'link'));
    const outcome = await broker('grant-token').handle(writeRequest(path.join(base, 'link', 'f')));
    expect(outcome).toMatchObject({ ok: false, wireDecision: 'deny' });
    expect(outcome.error?.message).toMatch(/ELOOP/);
  });

  it('a directory cannot be opened for writing: deny, nothing opened', async () => {
    const target = path.join(base, 'dir');
    mkdirSync(target);
    const opened: number[] = [];
    const b = new Broker({ sessionId: 's1' }).use(identityResolver('directory'), fixedPolicy(() => ({ verdict: 'grant-token' })), recordingPlugin(opened));
    const outcome = await b.handle(writeRequest(target));
    expect(outcome).toMatchObject({ ok: false, wireDecision: 'deny' });
    expect(outcome.error?.message).toMatch(/EISDIR/);
    expect(opened).toEqual([]);
  });

  it('only regular files are granted: a FIFO is opened, found wanting, closed, and denied', async () => {
    const target = path.join(base, 'fifo');
    execFileSync('mkfifo', [target]);
    const opened: number[] = [];
    const b = new Broker({ sessionId: 's1' }).use(identityResolver('other'), fixedPolicy(() => ({ verdict: 'grant-token' })), recordingPlugin(opened));
    const outcome = await b.handle(writeRequest(target));
    expect(outcome).toMatchObject({ ok: false, wireDecision: 'deny' });
    expect(outcome.error?.message).toMatch(/not a regular file/);
    expect(opened).toHaveLength(1);
    for (const fd of opened) expect(released(fd, target)).toBe(true);
  });
});

/**
 * Over the socket: the `FD` answer carries the descriptor, in order with the answers
 * around it. The client is Python (socket.recv_fds), as a preloaded program would read it.
 */
describe('FD answers on the broker socket', () => {
  const READER = `
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
lines = sys.argv[2:]
s.sendall(''.join(line + '\\n' for line in lines).encode())
answers, buffer, fds = [], b'', []
while len(answers) < len(lines):
    data, got, _flags, _addr = socket.recv_fds(s, 4096, 4)
    if not data:
        break
    for fd in got:
        fds.append({'at': len(answers), 'fd': fd})
    buffer += data
    while b'\\n' in buffer:
        line, buffer = buffer.split(b'\\n', 1)
        answers.append(line.decode())
written = []
for entry in fds:
    os.ftruncate(entry['fd'], 0)
    os.write(entry['fd'], b'through the passed fd')
    written.append({'at': entry['at'], 'ino': os.fstat(entry['fd']).st_ino})
print(json.dumps({'answers': answers, 'fds': written}))
`;

  it('answers SANDBOX, FD (with the fd attached) and DENY in order; the broker keeps no copy', async () => {
    const ws = path.join(base, 'ws');
    const outside = path.join(base, 'outside');
    mkdirSync(ws);
    mkdirSync(outside);
    const granted = path.join(outside, 'granted');
    writeFileSync(granted, 'before');
    writeFileSync(path.join(ws, 'inside'), 'inside');
    const opened: number[] = [];
    const b = new Broker({ sessionId: 's1' });
    b.use(
      ...standardPlugins({
        home: path.join(base, 'home'),
        writableRoots: [ws],
        rules: [{ pattern: `${outside}/**`, decision: 'grant-token', access: ['write'] }],
      }).filter((plugin) => plugin.name !== FdGrantPlugin.PLUGIN_NAME),
      recordingPlugin(opened),
    );
    const socketPath = path.join(base, 'sock', 'broker.sock');
    const server = new BrokerServer({ broker: b, socketPath });
    await server.listen();
    try {
      const line = (p: string) => `brokered-shell.read-write\t${p}\ts1\tcall-1`;
      const out = await python(READER, [socketPath, line(path.join(ws, 'inside')), line(granted), line(path.join(base, 'elsewhere'))]);
      const result = JSON.parse(out) as { answers: string[]; fds: Array<{ at: number; ino: number }> };
      expect(result.answers).toEqual(['SANDBOX', 'FD', 'DENY']);
      expect(result.fds).toEqual([{ at: 1, ino: statSync(granted).ino }]);
      expect(readFileSync(granted, 'utf8')).toBe('through the passed fd');
      // The broker closed its copy once the answer was out.
      expect(opened).toHaveLength(1);
      for (const fd of opened) expect(released(fd, granted)).toBe(true);
    } finally {
      await server.close();
      await b.close();
    }
  });

  it('a client that reads with read(2) sees the word FD (an unknown token to it) and never gets the fd', async () => {
    const outside = path.join(base, 'outside');
    mkdirSync(outside);
    const b = new Broker({ sessionId: 's1' }).use(identityResolver(), fixedPolicy(() => ({ verdict: 'grant-token' })), new FdGrantPlugin());
    const socketPath = path.join(base, 'sock', 'broker.sock');
    const server = new BrokerServer({ broker: b, socketPath });
    await server.listen();
    try {
      const out = await python(
        `
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b'\\n')
before = set(os.listdir('/proc/self/fd'))
print(s.recv(64).decode().strip(), len(set(os.listdir('/proc/self/fd')) - before))
`,
        [socketPath, `brokered-shell.read-write\t${path.join(outside, 'f')}\ts1\tc`],
      );
      expect(out.trim()).toBe('FD 0');
    } finally {
      await server.close();
    }
  });

  it('an error while passing the fd closes the connection and the fd', async () => {
    const outside = path.join(base, 'outside');
    mkdirSync(outside);
    const opened: number[] = [];
    const b = new Broker({ sessionId: 's1' }).use(identityResolver(), fixedPolicy(() => ({ verdict: 'grant-token' })), recordingPlugin(opened));
    const socketPath = path.join(base, 'sock', 'broker.sock');
    const server = new BrokerServer({
      broker: b,
      socketPath,
      sendWithFd: () => {
        throw Object.assign(new Error('EPIPE: broken pipe'), { code: 'EPIPE' });
      },
    });
    await server.listen();
    try {
      const out = await python(
        `
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b'\\n')
print(repr(s.recv(64)))
`,
        [socketPath, `brokered-shell.read-write\t${path.join(outside, 'f')}\ts1\tc`],
      );
      expect(out.trim()).toBe("b''");
      expect(opened).toHaveLength(1);
      for (const fd of opened) expect(released(fd, path.join(outside, 'f'))).toBe(true);
    } finally {
      await server.close();
    }
  });
});

function python(code: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('python3', ['-c', code, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`python exited ${String(code)}: ${err}`))));
  });
}

