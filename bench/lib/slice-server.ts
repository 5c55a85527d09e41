import path from 'node:path';
import { pathToFileURL, fileURLToPath } from 'node:url';
import { loadProduct } from './sandbox-runner.js';
import { REPO_ROOT } from './serve.js';
import { startServerProcess, type ServerProcess } from './server-process.js';
import { sliceById } from './slices.js';

/** The session a slice server serves; its requests must name it. */
export const SLICE_SESSION = 'bench-slice';

/**
 * A socket server like `serve` (the product's server and broker from `dist/`, the peer's
 * credentials read per connection) whose broker has one slice of the standard plugins
 * (slices.ts) and, in every slice, the token issuer a text-token request needs.
 */
export async function serveSlice(socketPath: string, sliceId: string, home: string, workspace: string): Promise<{ close(): Promise<void> }> {
  const slice = sliceById(sliceId);
  const { index } = await loadProduct(REPO_ROOT);
  const nativeUrl = pathToFileURL(path.join(REPO_ROOT, 'dist', 'native', 'index.js')).href;
  const { native, socketFd } = (await import(nativeUrl)) as typeof import('../../src/native/index.js');
  const standard = index.standardPlugins({ home, writableRoots: [workspace], protectedPaths: [path.dirname(socketPath)], backup: {} });
  const broker = new index.Broker({ sessionId: SLICE_SESSION });
  broker.use(...slice.plugins(standard, ['sandbox-token']));
  const server = new index.BrokerServer({ broker, socketPath, peerCredentials: (socket) => native().peerCredentials(socketFd(socket)) });
  await server.listen();
  return {
    async close() {
      await server.close();
      await broker.close();
    },
  };
}

/** Start a slice server in a process of its own, as `serve` runs apart from its clients. */
export function startSliceServer(socketPath: string, sliceId: string, home: string, workspace: string): Promise<ServerProcess> {
  return startServerProcess(fileURLToPath(import.meta.url), [socketPath, sliceId, home, workspace], `slice server ${sliceId}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [socketPath, sliceId, home, workspace] = process.argv.slice(2);
  if (!socketPath || !sliceId || !home || !workspace) {
    process.stderr.write('usage: slice-server.ts <socket-path> <slice> <home> <workspace>\n');
    process.exit(2);
  }
  const server = await serveSlice(socketPath, sliceId, home, workspace);
  process.stdout.write(`${JSON.stringify({ ready: true, socket: socketPath, pid: process.pid })}\n`);
  process.once('SIGTERM', () => void server.close().then(() => process.exit(0)));
}
