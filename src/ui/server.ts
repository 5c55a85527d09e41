import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { BackupHome, SetTimesNs } from '../backup/index.js';
import { Api } from './api.js';
import { loadAssets, type Assets } from './assets.js';
import { LOOPBACK, authenticated, createAuth, hostAllowed, pageAddress, sameOriginWrite, type UiAuth } from './auth.js';
import { send } from './http.js';

export interface UiServerOptions {
  home: BackupHome;
  /** Puts a symlink's times back after the page reads its target (the native addon's). */
  setTimesNs?: SetTimesNs;
  /** 0 (the default): a port the kernel picks. */
  port?: number;
  assets?: Assets;
}

export interface UiServer {
  /** `http://127.0.0.1:PORT/#t=SECRET`: the address to open, secret included. */
  readonly url: string;
  readonly port: number;
  readonly auth: UiAuth;
  close(): Promise<void>;
}

/** The backup viewer's HTTP server, on 127.0.0.1 only. */
export async function startUiServer(options: UiServerOptions): Promise<UiServer> {
  const assets = options.assets ?? loadAssets();
  const api = new Api({ home: options.home, setTimesNs: options.setTimesNs });
  let auth: UiAuth | undefined;
  const server = createServer((req, res) => {
    if (auth === undefined) return send(res, 503, 'starting\n', 'text/plain; charset=utf-8');
    handle(req, res, auth, assets, api).catch((error: unknown) => {
      if (!res.headersSent) send(res, 500, `${error instanceof Error ? error.message : String(error)}\n`, 'text/plain; charset=utf-8');
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, LOOPBACK, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const ready = createAuth(port);
  auth = ready;
  return {
    url: pageAddress(ready),
    port,
    auth: ready,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}

const forbidden = (res: ServerResponse) => send(res, 403, 'forbidden\n', 'text/plain; charset=utf-8');

async function handle(req: IncomingMessage, res: ServerResponse, auth: UiAuth, assets: Assets, api: Api): Promise<void> {
  // Host first: a page that rebound its own name to 127.0.0.1 arrives with that name.
  if (!hostAllowed(req, auth)) return forbidden(res);
  let url: URL;
  try {
    url = new URL(req.url ?? '/', auth.origin);
  } catch {
    return send(res, 400, 'bad request\n', 'text/plain; charset=utf-8');
  }
  if (url.pathname.startsWith('/api/')) {
    if (!authenticated(req, auth)) return forbidden(res);
    if (req.method === 'POST') {
      if (!sameOriginWrite(req, auth)) return forbidden(res);
    } else if (req.method !== 'GET') {
      return send(res, 405, 'method not allowed\n', 'text/plain; charset=utf-8', { allow: 'GET, POST' });
    }
    return api.handle(req, res, url);
  }
  // The page and its modules are the package's own files: no data, so no secret needed.
  if (req.method !== 'GET') return send(res, 405, 'method not allowed\n', 'text/plain; charset=utf-8', { allow: 'GET' });
  const asset = assets.files.get(url.pathname);
  if (!asset) return send(res, 404, 'not found\n', 'text/plain; charset=utf-8');
  send(res, 200, asset.body, asset.type, { 'content-security-policy': assets.csp });
}
