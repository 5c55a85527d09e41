import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { native, socketFd, type PeerCredentials } from '../../src/native/index.js';
import { catchErrno, makeTempDir, removeDir } from './helpers.js';

describe('peerCredentials', () => {
  let dir: string;
  let server: net.Server | undefined;
  const clients: net.Socket[] = [];

  beforeEach(() => {
    dir = makeTempDir('peer');
  });

  afterEach(async () => {
    for (const client of clients.splice(0)) client.destroy();
    if (server) await new Promise<void>((resolve) => server?.close(() => resolve()));
    server = undefined;
    removeDir(dir);
  });

  it('reports the connecting process for an accepted Unix socket', async () => {
    const socketPath = path.join(dir, 'broker.sock');
    const seen = new Promise<PeerCredentials>((resolve, reject) => {
      server = net.createServer((socket) => {
        try {
          resolve(native().peerCredentials(socketFd(socket)));
        } catch (error) {
          reject(error);
        } finally {
          socket.destroy();
        }
      });
    });
    await new Promise<void>((resolve) => server?.listen(socketPath, resolve));
    clients.push(net.connect(socketPath));

    const credentials = await seen;
    expect(credentials).toEqual({ pid: process.pid, uid: process.getuid?.(), gid: process.getgid?.() });
  });

  it('fails with ENOTSOCK on a descriptor that is not a socket', () => {
    const file = path.join(dir, 'plain');
    fs.writeFileSync(file, 'x');
    const fd = fs.openSync(file, 'r');
    try {
      const error = catchErrno(() => native().peerCredentials(fd));
      expect(error.code).toBe('ENOTSOCK');
      expect(error.syscall).toBe('getsockopt');
    } finally {
      fs.closeSync(fd);
    }
  });

  it('socketFd refuses a socket with no descriptor', () => {
    const socket = new net.Socket();
    expect(() => socketFd(socket)).toThrow(/no file descriptor/);
  });
});
