/**
 * The viewer's doors: every API call needs the secret as a bearer token (never from a
 * cookie or a URL), the Host header must be the server's own 127.0.0.1:PORT (DNS
 * rebinding), and writes must be JSON POSTs from the page's origin. What a refused
 * write would have changed stays as it was.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeTurn, tempDir, writeOld } from '../cli/helpers.js';
import { rawRequest, request, startViewer, type Viewer } from './helpers.js';

const TURN = '20260501-100000-a1b2c3';
let viewer: Viewer;
let file: string;

beforeEach(async () => {
  const home = await tempDir('bsh-ui-home-');
  const work = await tempDir('bsh-ui-work-');
  file = await writeOld(path.join(work, 'notes.txt'), 'before the turn\n');
  await makeTurn({
    home,
    sessionId: 'sess-auth',
    turnId: TURN,
    message: 'edit notes',
    at: '2026-05-01T10:00:00.000Z',
    backups: [{ path: file, operation: 'open' }],
    change: () => fs.writeFile(file, 'after the turn\n'),
  });
  viewer = await startViewer(home);
});

afterEach(async () => {
  await viewer.server.close();
});

const API = ['/api/sessions', `/api/turn?session=sess-auth&turn=${TURN}`];
const PAGE = ['/', '/assets/app.js', '/assets/api.js', '/assets/style.css', '/vendor/preact.mjs'];

describe('the secret', () => {
  it.each(API)('GET %s without it is 403 and names nothing of the store', async (where) => {
    const reply = await request(viewer.port, where);
    expect(reply.status).toBe(403);
    expect(reply.body).toBe('forbidden\n');
  });

  it.each(API)('GET %s with a wrong one, or a malformed header, is 403', async (where) => {
    const { secret } = viewer.server.auth;
    const wrong = `${secret.slice(0, -1)}${secret.endsWith('A') ? 'B' : 'A'}`;
    for (const authorization of [`Bearer ${wrong}`, `Bearer ${secret}x`, secret, `Basic ${secret}`, `Bearer  ${secret}`, `Bearer ${secret} x`, 'Bearer ']) {
      expect((await request(viewer.port, where, { headers: { authorization } })).status, authorization).toBe(403);
    }
  });

  it.each(API)('GET %s with the right secret anywhere but the Authorization header is 403', async (where) => {
    const { secret } = viewer.server.auth;
    const separator = where.includes('?') ? '&' : '?';
    // A URL ends up in logs and history; a cookie reaches every port of 127.0.0.1.
    expect((await request(viewer.port, `${where}${separator}t=${secret}`)).status).toBe(403);
    for (const name of [`bsh-ui-${viewer.port}`, 't', 'secret']) {
      expect((await request(viewer.port, where, { headers: { cookie: `${name}=${secret}` } })).status, name).toBe(403);
    }
  });

  it.each(API)('GET %s with it answers', async (where) => {
    const reply = await viewer.get(where);
    expect(reply.status).toBe(200);
    expect(reply.body).toContain('sess-auth');
  });

  it.each(PAGE)('GET %s (the page, its modules) answers without it and sets no cookie', async (where) => {
    const reply = await request(viewer.port, where);
    expect(reply.status).toBe(200);
    expect(reply.headers['set-cookie']).toBeUndefined();
    expect(reply.body).not.toContain(viewer.server.auth.secret);
    expect(reply.body).not.toContain('sess-auth');
  });

  it('an unknown path is 404, with or without the secret', async () => {
    expect((await request(viewer.port, '/nowhere')).status).toBe(404);
    expect((await viewer.get('/nowhere')).status).toBe(404);
  });

  it('the printed address is 127.0.0.1, the port and a 256-bit secret in the fragment, which no request carries', () => {
    const url = new URL(viewer.server.url);
    expect(url.origin).toBe(`http://127.0.0.1:${viewer.port}`);
    expect(url.pathname).toBe('/');
    expect(url.search).toBe('');
    const secret = /^#t=(.*)$/.exec(url.hash)?.[1] ?? '';
    expect(secret).toBe(viewer.server.auth.secret);
    expect(Buffer.from(secret, 'base64url')).toHaveLength(32);
  });

  it('each viewer has its own secret', async () => {
    const other = await startViewer(await tempDir('bsh-ui-home2-'));
    try {
      expect(other.server.auth.secret).not.toBe(viewer.server.auth.secret);
      expect((await request(other.port, '/api/sessions', { headers: { authorization: viewer.bearer } })).status).toBe(403);
    } finally {
      await other.server.close();
    }
  });
});

describe('the Host header', () => {
  it.each([
    ['a rebound name', (port: number) => `attacker.example:${port}`],
    ['localhost', (port: number) => `localhost:${port}`],
    ['another port', (port: number) => `127.0.0.1:${port + 1}`],
    ['no port', () => '127.0.0.1'],
    ['IPv6 loopback', (port: number) => `[::1]:${port}`],
  ])('%s is 403 even with the secret', async (_name, host) => {
    for (const where of ['/', '/api/sessions', '/assets/app.js']) {
      const reply = await viewer.get(where, { host: host(viewer.port) });
      expect(reply.status, where).toBe(403);
    }
    const write = await viewer.post('/api/restore', { session: 'sess-auth', turn: TURN }, { host: host(viewer.port) });
    expect(write.status).toBe(403);
    expect(await fs.readFile(file, 'utf8')).toBe('after the turn\n');
  });

  it('a request without Host is refused: HTTP/1.1 by Node (400), HTTP/1.0 by the viewer (403)', async () => {
    const eleven = await viewer.get('/api/sessions', { host: null });
    expect(eleven.status).toBe(400);
    expect(eleven.body).not.toContain('sess-auth');
    const ten = await rawRequest(viewer.port, `GET /api/sessions HTTP/1.0\r\nauthorization: ${viewer.bearer}\r\n\r\n`);
    expect(ten.split('\r\n')[0]).toBe('HTTP/1.1 403 Forbidden');
    expect(ten).not.toContain('sess-auth');
  });
});

describe('writes', () => {
  const body = { session: 'sess-auth', turn: TURN };

  /** The headers the page sends with a write, changed one way per case. */
  const write = (change: (headers: Record<string, string>) => void) => {
    const headers: Record<string, string> = { authorization: viewer.bearer, origin: viewer.server.auth.origin, 'content-type': 'application/json' };
    change(headers);
    return request(viewer.port, '/api/restore', { method: 'POST', body: JSON.stringify(body), headers });
  };

  it.each<[string, (headers: Record<string, string>) => void]>([
    ['no Origin', (h) => delete h.origin],
    ['another origin', (h) => (h.origin = 'http://attacker.example')],
    ['localhost as origin', (h) => (h.origin = `http://localhost:${viewer.port}`)],
    ['the null origin', (h) => (h.origin = 'null')],
    ['a cross-site fetch', (h) => (h['sec-fetch-site'] = 'cross-site')],
    ['a same-site fetch from another port', (h) => (h['sec-fetch-site'] = 'same-site')],
    ['a form post', (h) => (h['content-type'] = 'application/x-www-form-urlencoded')],
    ['a text/plain post', (h) => (h['content-type'] = 'text/plain')],
    ['no content type', (h) => delete h['content-type']],
  ])('%s is 403 and changes nothing', async (_name, change) => {
    expect((await write(change)).status).toBe(403);
    expect(await fs.readFile(file, 'utf8')).toBe('after the turn\n');
  });

  it('a write without the secret is 403 even from the right origin', async () => {
    const reply = await request(viewer.port, '/api/restore', {
      method: 'POST',
      body: JSON.stringify(body),
      headers: { origin: viewer.server.auth.origin, 'content-type': 'application/json' },
    });
    expect(reply.status).toBe(403);
    expect(await fs.readFile(file, 'utf8')).toBe('after the turn\n');
  });

  it('a same-origin JSON POST with the secret restores', async () => {
    const reply = await viewer.post('/api/restore', body, { headers: { 'sec-fetch-site': 'same-origin' } });
    expect(reply.status).toBe(200);
    expect(await fs.readFile(file, 'utf8')).toBe('before the turn\n');
  });

  it.each(['PUT', 'DELETE', 'PATCH', 'HEAD'])('%s is refused', async (method) => {
    const reply = await viewer.get('/api/restore', { method });
    expect(reply.status).toBe(405);
  });

  it('a read route does not take POSTs, a write route does not take GETs', async () => {
    expect((await viewer.post('/api/sessions', {})).status).toBe(405);
    expect((await viewer.get('/api/restore')).status).toBe(405);
    expect((await viewer.post('/', {})).status).toBe(405);
  });
});

describe('headers', () => {
  it('the page allows only its own scripts and the import map by hash', async () => {
    const page = await viewer.get('/');
    const csp = page.headers['content-security-policy'] ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("frame-ancestors 'none'");
    const map = /<script type="importmap">(.*?)<\/script>/s.exec(page.body)?.[1] ?? '';
    const hash = createHash('sha256').update(map).digest('base64');
    expect(csp).toContain(`script-src 'self' 'sha256-${hash}'`);
    expect(JSON.parse(map)).toEqual({
      imports: { preact: '/vendor/preact.mjs', 'preact/hooks': '/vendor/preact-hooks.mjs', htm: '/vendor/htm.mjs' },
    });
  });

  it.each(['/', '/api/sessions', '/assets/app.js', '/nowhere'])('%s is never cached, framed or sniffed', async (where) => {
    const reply = await viewer.get(where);
    expect(reply.headers['cache-control']).toBe('no-store');
    expect(reply.headers['x-frame-options']).toBe('DENY');
    expect(reply.headers['x-content-type-options']).toBe('nosniff');
    expect(reply.headers['referrer-policy']).toBe('no-referrer');
    expect(reply.headers['access-control-allow-origin']).toBeUndefined();
  });
});
