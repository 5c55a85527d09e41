/**
 * `brokered-shell backups ui` as a person runs it: the compiled CLI prints the address
 * (127.0.0.1, a port, the secret) on stdout, serves the page and the API from it, and
 * stops with status 0 on SIGINT or SIGTERM.
 */
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { cli, tempDir } from '../cli/helpers.js';
import { request, startCli } from './helpers.js';

/** A port that was free a moment ago (the kernel's pick, released). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

describe('backups ui', () => {
  it.each<NodeJS.Signals>(['SIGTERM', 'SIGINT'])('prints http://127.0.0.1:PORT/#t=SECRET, serves with it, and stops on %s', async (signal) => {
    const home = await tempDir('bsh-ui-cli-');
    const running = await startCli(home);
    const { url } = running;
    expect(url.protocol).toBe('http:');
    expect(url.hostname).toBe('127.0.0.1');
    expect(Number(url.port)).toBeGreaterThan(0);
    expect(url.pathname).toBe('/');
    expect(url.search).toBe('');
    const secret = /^#t=([A-Za-z0-9_-]{43})$/.exec(url.hash)?.[1] ?? '';
    expect(secret).not.toBe('');
    const port = Number(url.port);
    expect((await request(port, '/api/sessions')).status).toBe(403);
    const sessions = await request(port, '/api/sessions', { headers: { authorization: `Bearer ${secret}` } });
    expect(sessions.status).toBe(200);
    expect(JSON.parse(sessions.body)).toEqual({ home, sessions: [] });
    const page = await request(port, '/');
    expect(page.status).toBe(200);
    expect(page.body).toContain('<div id="app">');
    const app = await request(port, '/assets/app.js');
    expect(app.status).toBe(200);
    const stopped = await running.stop(signal);
    expect(stopped.status).toBe(0);
    expect(stopped.stderr).toContain(`backup viewer stopped (${signal})`);
    await expect(request(port, '/')).rejects.toThrow(/ECONNREFUSED/);
  });

  it('--port N listens on that port', async () => {
    const port = await freePort();
    const running = await startCli(await tempDir('bsh-ui-cli-'), ['--port', String(port)]);
    expect(running.url.port).toBe(String(port));
    expect((await running.stop('SIGTERM')).status).toBe(0);
  });

  it.each(['abc', '-1', '70000', '1.5'])('--port %s is a usage error', async (port) => {
    const result = cli(['backups', 'ui', '--no-open', '--port', port], { home: await tempDir('bsh-ui-cli-') });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('--port must be a number from 0 to 65535');
    expect(result.stdout).toBe('');
  });

  it('a port already taken is a clear failure', async () => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const address = blocker.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    try {
      const result = cli(['backups', 'ui', '--no-open', '--port', String(port)], { home: await tempDir('bsh-ui-cli-') });
      expect(result.status).toBe(1);
      expect(result.stderr).toContain('EADDRINUSE');
    } finally {
      blocker.close();
    }
  });

  it('is listed under backups', async () => {
    const help = cli(['backups', '--help'], { home: await tempDir('bsh-ui-cli-') });
    expect(help.stdout).toMatch(/^\s+ui \[options\]\s+see and undo turns in a local web page/m);
  });
});
