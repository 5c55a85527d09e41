import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/**
 * Who may talk to the viewer: whoever holds the secret that `backups ui` printed. The
 * page gets it from its first URL (`/?t=SECRET`) and keeps it in a cookie; every other
 * request must carry one of the two. The Host header must name the server's own
 * address (a DNS-rebinding page arrives under its own host name), and every write must
 * come from the page's own origin.
 */
export interface UiAuth {
  readonly secret: string;
  /** `127.0.0.1:PORT`: the only Host the server answers. */
  readonly host: string;
  /** `http://127.0.0.1:PORT`: the only Origin a write may come from. */
  readonly origin: string;
  /** Cookies are shared by every port of a host: the name carries the port. */
  readonly cookieName: string;
}

export const LOOPBACK = '127.0.0.1';
export const TOKEN_PARAM = 't';

export function createAuth(port: number, secret: string = randomBytes(32).toString('base64url')): UiAuth {
  const host = `${LOOPBACK}:${port}`;
  return { secret, host, origin: `http://${host}`, cookieName: `bsh-ui-${port}` };
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

/** The secret from the URL's `t` parameter, or undefined when there is none. */
export function queryToken(url: URL): string | undefined {
  return url.searchParams.get(TOKEN_PARAM) ?? undefined;
}

/** The value of one cookie of the request, or undefined. */
export function cookieValue(req: IncomingMessage, name: string): string | undefined {
  const header = req.headers.cookie;
  if (header === undefined) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** Whether the request carries the secret, in its URL or in its cookie. */
export function authenticated(req: IncomingMessage, url: URL, auth: UiAuth): boolean {
  const fromQuery = queryToken(url);
  if (fromQuery !== undefined) return sameSecret(fromQuery, auth.secret);
  return sameSecret(cookieValue(req, auth.cookieName), auth.secret);
}

/** The cookie that lets the page's later requests (scripts, styles, API) carry the secret. */
export function sessionCookie(auth: UiAuth): string {
  return `${auth.cookieName}=${auth.secret}; Path=/; HttpOnly; SameSite=Strict`;
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
