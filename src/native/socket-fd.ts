import type net from 'node:net';
import { native } from './loader.js';
import type { PeerCredentials } from './types.js';

interface HandleWithFd {
  fd: number;
}

function hasFd(handle: unknown): handle is HandleWithFd {
  return (
    typeof handle === 'object' &&
    handle !== null &&
    'fd' in handle &&
    typeof handle.fd === 'number' &&
    Number.isInteger(handle.fd) &&
    handle.fd >= 0
  );
}

/**
 * The file descriptor of a connected Unix socket, for peerCredentials. Node keeps it on
 * the socket's internal libuv handle (`_handle.fd`), which its typings do not expose; it
 * is -1 or absent when the socket is closed or not backed by a file descriptor.
 */
export function socketFd(socket: net.Socket): number {
  const handle: unknown = '_handle' in socket ? socket._handle : undefined;
  if (!hasFd(handle)) {
    throw new TypeError('socketFd: the socket has no file descriptor (closed, not connected, or not a Unix socket)');
  }
  return handle.fd;
}

/** Who is at the other end of a connected Unix socket (SO_PEERCRED): a BrokerServer's `peerCredentials`. */
export function socketPeerCredentials(socket: net.Socket): PeerCredentials {
  return native().peerCredentials(socketFd(socket));
}
