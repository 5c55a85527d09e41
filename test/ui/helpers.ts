import { spawn } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import { createInterface } from 'node:readline';
import { BackupHome } from '../../src/backup/index.js';
import { startUiServer, type UiServer } from '../../src/ui/server.js';
import { CLI, REPO_ROOT } from '../helpers/serve-process.js';

export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface RequestOptions {
  method?: string;
  /** The Host header; null sends none. Default: the server's own `127.0.0.1:PORT`. */
  host?: string | null;
  headers?: Record<string, string>;
  body?: string;
}

/** One HTTP request with full control of its headers (fetch would not let us set Host). */
export function request(port: number, path: string, options: RequestOptions = {}): Promise<Reply> {
  const host = options.host === undefined ? `127.0.0.1:${port}` : options.host;
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: options.method ?? 'GET',
        setHost: false,
        headers: { ...(host === null ? {} : { host }), ...options.headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/** A viewer over `home`, and requests that carry its secret the way the page does (a bearer token). */
export interface Viewer {
  server: UiServer;
  port: number;
  /** The Authorization header's value. */
  bearer: string;
  get(path: string, options?: RequestOptions): Promise<Reply>;
  /** A JSON POST from the page's own origin. */
  post(path: string, body: unknown, options?: RequestOptions): Promise<Reply>;
  json<T>(reply: Reply): T;
}

export async function startViewer(home: string): Promise<Viewer> {
  const server = await startUiServer({ home: new BackupHome({ home }) });
  const { port, auth } = server;
  const bearer = `Bearer ${auth.secret}`;
  return {
    server,
    port,
    bearer,
    get: (path, options = {}) => request(port, path, { ...options, headers: { authorization: bearer, ...options.headers } }),
    post: (path, body, options = {}) =>
      request(port, path, {
        method: 'POST',
        body: JSON.stringify(body),
        ...options,
        headers: { authorization: bearer, origin: auth.origin, 'content-type': 'application/json', ...options.headers },
      }),
    json: <T>(reply: Reply): T => {
      if (reply.status !== 200) throw new Error(`HTTP ${reply.status}: ${reply.body}`);
      return JSON.parse(reply.body) as T;
    },
  };
}

/** Bytes on a plain socket, for requests an HTTP client would not send; the whole answer as text. */
export function rawRequest(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.end(text));
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    socket.on('error', reject);
  });
}

/** A running `brokered-shell backups ui --no-open` (the compiled CLI, as a person runs it). */
export interface CliViewer {
  /** The address it printed. */
  url: URL;
  stop(signal: NodeJS.Signals): Promise<{ status: number | null; stderr: string }>;
}

export async function startCli(home: string, args: string[] = []): Promise<CliViewer> {
  const env: NodeJS.ProcessEnv = { ...process.env, BROKERED_SHELL_HOME: home, BROKERED_SHELL_LOG_LEVEL: 'warn' };
  const child = spawn(process.execPath, [CLI, 'backups', 'ui', '--no-open', ...args], { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const first = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`backups ui exited with ${String(code)} before printing its address: ${stderr}`)));
  });
  return {
    url: new URL(first),
    stop: async (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return { status: await exited, stderr };
    },
  };
}
