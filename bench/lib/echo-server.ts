import { rmSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CORE_SESSION, serveCore } from './core-server.js';
import { startServerProcess, type ServerProcess } from './server-process.js';
import { benchTempDir } from './serve.js';

/**
 * The baseline: a trivial Unix-socket line server answering `SANDBOX` to every line,
 * in its own process like `serve`, so that broker minus echo is the broker's own cost.
 */
const ANSWER = Buffer.from('SANDBOX\n');

/** The one line a baseline server prints on stdout once its socket accepts. */
function announceReady(socketPath: string): void {
  process.stdout.write(`${JSON.stringify({ ready: true, socket: socketPath, pid: process.pid })}\n`);
}

/** Serve in this process (what the child runs). Prints one ready line on stdout. */
export function serveEcho(socketPath: string): net.Server {
  const server = net.createServer((socket) => {
    socket.on('error', () => socket.destroy());
    socket.on('data', (chunk: Buffer) => {
      let lines = 0;
      for (let at = chunk.indexOf(0x0a); at !== -1; at = chunk.indexOf(0x0a, at + 1)) lines += 1;
      if (lines === 1) socket.write(ANSWER);
      else if (lines > 1) socket.write(Buffer.concat(Array.from({ length: lines }, () => ANSWER)));
    });
  });
  server.listen(socketPath, () => announceReady(socketPath));
  process.once('SIGTERM', () => server.close(() => process.exit(0)));
  return server;
}

export interface BaselineProcess extends ServerProcess {
  readonly socket: string;
}

/**
 * Start a baseline server as a child process: the echo server, or with `core` the
 * product's socket server and core with a broker that allows everything at once
 * (core-server.ts).
 */
export async function startBaselineServer(nodeArgs: string[] = [], kind: 'echo' | 'core' = 'echo'): Promise<BaselineProcess> {
  const base = benchTempDir(`bsh-${kind}-`);
  const socket = path.join(base, `${kind}.sock`);
  const server = await startServerProcess(fileURLToPath(import.meta.url), [socket, kind], `${kind} server`, nodeArgs).catch((error: unknown) => {
    rmSync(base, { recursive: true, force: true });
    throw error;
  });
  return {
    socket,
    pid: server.pid,
    async stop() {
      await server.stop();
      rmSync(base, { recursive: true, force: true });
    },
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [socketPath, kind = 'echo'] = process.argv.slice(2);
  if (!socketPath || (kind !== 'echo' && kind !== 'core')) {
    process.stderr.write('usage: echo-server.ts <socket-path> [echo|core]\n');
    process.exit(2);
  }
  if (kind === 'echo') serveEcho(socketPath);
  else {
    const server = await serveCore(socketPath, CORE_SESSION);
    announceReady(socketPath);
    process.once('SIGTERM', () => void server.close().then(() => process.exit(0)));
  }
}
