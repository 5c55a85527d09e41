import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/**
 * Who may talk to the viewer: whoever holds the secret that `backups ui` printed. The
 * printed address carries it in its fragment (`/#t=SECRET`), which the browser never
 * sends anywhere; the page moves it into its tab's `sessionStorage` and sends it on
 * every API call as `Authorization: Bearer SECRET`. Never in a cookie: browsers send a
 * host's cookies to every port of it, so a page another user serves on another port
 * of 127.0.0.1 would get it. The page's own files hold no data and need no secret.
 * The Host header must name the server's own address (a DNS-rebinding page arrives
 * under its own host name), and every write must come from the page's own origin.
 */
export interface UiAuth {
  readonly secret: string;
  /** `127.0.0.1:PORT`: the only Host the server answers. */
  readonly host: string;
  /** `http://127.0.0.1:PORT`: the only Origin a write may come from. */
  readonly origin: string;
}

export const LOOPBACK = '127.0.0.1';
/** The fragment's parameter in the printed address; `public/api.js` reads the same name. */
export const SECRET_PARAM = 't';

/** 256 random bits, base64url: nothing in it needs escaping in a URL or a header. */
export function createAuth(port: number): UiAuth {
  const host = `${LOOPBACK}:${port}`;
  return { secret: randomBytes(32).toString('base64url'), host, origin: `http://${host}` };
}

/** The address to open: the secret in the fragment, which no request carries. */
export function pageAddress(auth: UiAuth): string {
  return `${auth.origin}/#${SECRET_PARAM}=${auth.secret}`;
}

/** Compare without leaking, through timing, how much of a guess was right. */
export function sameSecret(candidate: string | undefined, secret: string): boolean {
  if (candidate === undefined) return false;
  const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();
  return timingSafeEqual(digest(candidate), digest(secret));
}

export function hostAllowed(req: IncomingMessage, auth: UiAuth): boolean {
  return req.headers.host === auth.host;
}

const BEARER = /^Bearer (\S+)$/;

/** Whether the request carries the secret as `Authorization: Bearer SECRET` (the only place it is taken from). */
export function authenticated(req: IncomingMessage, auth: UiAuth): boolean {
  const match = BEARER.exec(req.headers.authorization ?? '');
  return sameSecret(match?.[1], auth.secret);
}

/**
 * A write must come from the page itself: its Origin is ours (browsers send Origin on
 * every POST), the browser did not mark it cross-site, and its body is declared JSON
 * (which a cross-origin form cannot send without a CORS preflight we never grant).
 */
export function sameOriginWrite(req: IncomingMessage, auth: UiAuth): boolean {
  if (req.headers.origin !== auth.origin) return false;
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin') return false;
  const type = req.headers['content-type'] ?? '';
  return type.split(';')[0]?.trim().toLowerCase() === 'application/json';
}
