import { lstat, mkdir, chmod, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { BrokerError, ErrorCodes } from '../core/index.js';

export const MAX_SOCKET_PATH_BYTES = 107;

/**
 * Prepare the socket's directory: ours, a real directory (not a link), mode 0700, so
 * that no other user can reach the socket whatever the socket file's own mode is.
 */
export async function prepareSocketPath(socketPath: string): Promise<void> {
  if (!socketPath.startsWith('/')) throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `socket path must be absolute: ${socketPath}`);
  // sun_path holds 108 bytes with the NUL; a longer path would be bound cut short, elsewhere.
  if (Buffer.byteLength(socketPath) > MAX_SOCKET_PATH_BYTES) {
    throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `socket path is longer than ${MAX_SOCKET_PATH_BYTES} bytes: ${socketPath}`, { errno: 'ENAMETOOLONG' });
  }
  const dir = dirname(socketPath);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const info = await lstat(dir);
  if (!info.isDirectory()) throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `socket directory is not a directory: ${dir}`);
  const uid = process.getuid?.();
  if (uid !== undefined && info.uid !== uid) {
    throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `socket directory belongs to uid ${info.uid}, not to us: ${dir}`);
  }
  if ((info.mode & 0o777) !== 0o700) await chmod(dir, 0o700);
  try {
    const existing = await lstat(socketPath);
    // Only ever remove a stale socket; anything else at that path is someone's file.
    if (!existing.isSocket()) throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `something other than a socket is at ${socketPath}`);
    await unlink(socketPath);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}
