import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { Socket } from 'node:net';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { native, socketFd } from '../../src/native/index.js';
import { catchErrno, makeTempDir, removeDir } from './helpers.js';

/**
 * The other end of a real socketpair (libuv makes a 'pipe' stdio entry one): Python
 * reads one message from fd 3 with socket.recv_fds and reports the bytes, how many fds
 * came, and what it read through the first one.
 */
const READER = `
import json, os, socket
s = socket.socket(fileno=3)
data, fds, _flags, _addr = socket.recv_fds(s, 1024, 4)
first = os.read(fds[0], 100).decode() if fds else None
if fds:
    os.write(fds[0], b' and more')
print(json.dumps({'data': data.decode(), 'fds': len(fds), 'read': first}))
`;

interface Reader {
  child: ChildProcess;
  socket: Socket;
  report: Promise<{ data: string; fds: number; read: string | null }>;
}

function startReader(): Reader {
  const child = spawn('python3', ['-c', READER], { stdio: ['ignore', 'pipe', 'inherit', 'pipe'] });
  const socket = child.stdio[3];
  if (!(socket instanceof Socket)) throw new Error('fd 3 is not a socket');
  let out = '';
  child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const report = new Promise<{ data: string; fds: number; read: string | null }>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`reader exited ${String(code)}`))));
  });
  return { child, socket, report };
}

let dir: string;
beforeEach(() => {
  dir = makeTempDir('send-fd');
});
afterEach(() => removeDir(dir));

describe('sendWithFd', () => {
  it('sends the bytes with the fd attached; the receiver reads and writes the file through it', async () => {
    const file = path.join(dir, 'f');
    fs.writeFileSync(file, 'granted bytes');
    const fd = fs.openSync(file, 'r+');
    const reader = startReader();
    try {
      const sent = native().sendWithFd(socketFd(reader.socket), Buffer.from('FD\n'), fd);
      expect(sent).toBe(3);
      expect(await reader.report).toEqual({ data: 'FD\n', fds: 1, read: 'granted bytes' });
      expect(fs.readFileSync(file, 'utf8')).toBe('granted bytes and more');
    } finally {
      fs.closeSync(fd);
      reader.socket.destroy();
    }
  });

  it('the sender keeps its fd: it still works after the send', async () => {
    const file = path.join(dir, 'f');
    fs.writeFileSync(file, 'x');
    const fd = fs.openSync(file, 'r+');
    const reader = startReader();
    try {
      native().sendWithFd(socketFd(reader.socket), Buffer.from('FD\n'), fd);
      await reader.report;
      expect(fs.fstatSync(fd).ino).toBe(fs.statSync(file).ino);
      const buffer = Buffer.alloc(16);
      expect(buffer.subarray(0, fs.readSync(fd, buffer, 0, 16, 0)).toString()).toBe('x and more');
    } finally {
      fs.closeSync(fd);
      reader.socket.destroy();
    }
  });

  it('refuses empty data (a stream socket carries an fd only with a byte)', () => {
    const error = (() => {
      try {
        native().sendWithFd(0, Buffer.alloc(0), 0);
      } catch (caught) {
        return caught as NodeJS.ErrnoException;
      }
      return undefined;
    })();
    expect(error?.code).toBe('ERR_INVALID_ARG_VALUE');
  });

  it('fails like a syscall on something that is not a socket: ENOTSOCK', () => {
    const file = path.join(dir, 'f');
    fs.writeFileSync(file, 'x');
    const fd = fs.openSync(file, 'r');
    try {
      const error = catchErrno(() => native().sendWithFd(fd, Buffer.from('FD\n'), fd));
      expect(error).toMatchObject({ code: 'ENOTSOCK', syscall: 'sendmsg' });
    } finally {
      fs.closeSync(fd);
    }
  });

  it('a full socket is EAGAIN, never a blocked event loop', () => {
    const file = path.join(dir, 'f');
    fs.writeFileSync(file, 'x');
    const fd = fs.openSync(file, 'r');
    // A reader that never reads: fill its socket until the kernel says EAGAIN.
    const child = spawn('sleep', ['30'], { stdio: ['ignore', 'ignore', 'ignore', 'pipe'] });
    const socket = child.stdio[3];
    try {
      if (!(socket instanceof Socket)) throw new Error('fd 3 is not a socket');
      const chunk = Buffer.alloc(64 * 1024, 'x');
      const error = catchErrno(() => {
        for (let i = 0; i < 10_000; i++) native().sendWithFd(socketFd(socket), chunk, fd);
      });
      expect(error).toMatchObject({ code: 'EAGAIN', syscall: 'sendmsg' });
    } finally {
      fs.closeSync(fd);
      if (socket instanceof Socket) socket.destroy();
      child.kill('SIGKILL');
    }
  });
});
