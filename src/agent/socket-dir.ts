import { mkdtemp, realpath } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/** `sun_path` holds 108 bytes including the terminating NUL. */
const SOCKET_PATH_MAX = 107;
export const SOCKET_NAME = 'broker.sock';

/**
 * A private directory (0700, mkdtemp) for the broker's socket. The socket's path must
 * fit `sun_path` (a longer one is silently cut short by the kernel interface), so a
 * TMPDIR too deep for it falls back to /tmp.
 */
export async function makeSocketDir(): Promise<string> {
  const tried: string[] = [];
  for (const candidate of [os.tmpdir(), '/tmp']) {
    const base = await realpath(candidate).catch(() => undefined);
    if (base === undefined) continue;
    const longest = path.join(base, 'brokered-shell-broker-XXXXXX', SOCKET_NAME);
    if (Buffer.byteLength(longest) > SOCKET_PATH_MAX) {
      tried.push(base);
      continue;
    }
    return realpath(await mkdtemp(path.join(base, 'brokered-shell-broker-')));
  }
  throw new Error(`no temp directory gives a socket path of at most ${SOCKET_PATH_MAX} bytes (tried ${tried.join(', ') || 'none'}); set TMPDIR to a shorter one`);
}
