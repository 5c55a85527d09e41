/**
 * `serve` with readers that do not read: a socket client that floods requests and never
 * reads is stopped and then dropped (one audit record), so the broker neither buffers nor
 * audits its flood without bound; an owner that sends control lines and never reads
 * stdout is no longer read from (its pipe measured through the streams serve is given).
 * Socket clients are answered all the while.
 */
import { once } from 'node:events';
import { mkdirSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Io } from '../../src/cli/output.js';
import { serveCommand } from '../../src/cli/serve.js';
import { silentLogger } from '../../src/core/index.js';
import { ask, startServe, tempDir, type ServeHandle } from '../helpers/serve-process.js';
import { waitFor } from '../helpers/wait-for.js';

let serve: ServeHandle;

beforeAll(async () => {
  process.env.BROKERED_SHELL_UNREAD_GRACE_MS = '2000';
  serve = await startServe();
  delete process.env.BROKERED_SHELL_UNREAD_GRACE_MS;
});
afterAll(() => serve.cleanup());

/** The `phase: 'audit'` records serve logged on stderr so far. */
function auditRecords(): Array<{ operation: string; paths: Array<{ path: string }> }> {
  return serve
    .stderr()
    .split('\n')
    .filter((line) => line.includes('"phase":"audit"'))
    .map((line) => (JSON.parse(line) as { audit: { operation: string; paths: Array<{ path: string }> } }).audit);
}

describe('serve: a socket client that never reads', () => {
  it('is stopped, dropped with one audit record, and what it sent is mostly never done; others are answered meanwhile', async () => {
    const sent = 5000;
    // Denied deletes outside the workspace, each audited at warn; each answer (about 8 KB)
    // repeats the long path. Lines of 4 KB keep the broker's read bound ahead of its line count.
    const line = (i: number) => JSON.stringify({ command: 'HostFileOperation', operation: 'delete', path: `/flood-${i}-${'f'.repeat(3900)}`, sessionId: 's1' });
    const lines = Array.from({ length: sent }, (_, i) => `${line(i)}\n`).join('');
    const flooder = net.createConnection({ path: serve.socket });
    flooder.pause();
    flooder.on('error', () => undefined);
    flooder.write(lines);
    const dropped = new Promise<void>((resolve) => flooder.once('close', () => resolve()));
    // Served meanwhile, on other connections.
    let answered = 0;
    // What the flooder could not hand over: it waits on the flooder's side, not in the broker.
    // Sampled while it is connected (the most seen), whatever pace the other client keeps.
    let unsentByFlooder = 0;
    const sample = setInterval(() => (unsentByFlooder = Math.max(unsentByFlooder, flooder.writableLength)), 20);
    let over = false;
    void dropped.then(() => {
      over = true;
      clearInterval(sample);
    });
    while (!over) {
      expect(await ask(serve.socket, `x.read-write\t${path.join(serve.workspace, `meanwhile-${answered}.txt`)}\ts1\tgood`)).toBe('SANDBOX');
      answered += 1;
    }
    expect(answered).toBeGreaterThan(0);
    expect(unsentByFlooder).toBeGreaterThan(lines.length / 2);
    const drops = await waitFor('the drop record', () => {
      const found = auditRecords().filter((r) => r.operation === 'unread-answers');
      return found.length > 0 ? found : undefined;
    });
    expect(drops).toHaveLength(1);
    const flooded = auditRecords().filter((r) => r.paths[0]?.path.startsWith('/flood-')).length;
    expect(flooded).toBeLessThan(sent / 10);
    expect(serve.child.exitCode).toBeNull();
  }, 60_000);
});

describe('serve: an owner that never reads stdout', () => {
  it('is no longer read from once its unread answers pass the bound; socket clients are answered; every answer comes once it reads', async () => {
    const base = tempDir('bsh-serve-owner-');
    const workspace = path.join(base, 'ws');
    mkdirSync(workspace);
    // The owner's end of stdout: it takes nothing until `reading` is set.
    let reading = false;
    const held: Array<() => void> = [];
    let received = '';
    const output = new Writable({
      write(chunk: Buffer, _encoding, done) {
        received += String(chunk);
        if (reading) done();
        else held.push(done);
      },
    });
    const input = new PassThrough();
    const io: Io = { out: (text) => void output.write(typeof text === 'string' ? `${text}\n` : text), err: () => undefined };
    const socket = path.join(base, 'sock', 'broker.sock');
    const status = serveCommand(io, { socket, session: 's9', workspace }, silentLogger(), { ...process.env, BROKERED_SHELL_HOME: path.join(base, 'home') }, { input, output });
    await waitFor('the ready line', () => (received.includes('"ready":true') ? true : undefined));
    const count = 20_000;
    // In pieces, as fast as serve takes them, as through a pipe (readline hands over every
    // line of a piece it read).
    const line = '{"command":"NoSuchControl"}\n';
    let handedOver = 0;
    void (async () => {
      for (; handedOver < count; handedOver += 500) {
        if (!input.write(line.repeat(500))) await once(input, 'drain');
      }
    })();
    await waitFor('serve to stop reading its input', () => (input.isPaused() ? true : undefined));
    // Bounded: at most one answer past the bound waits in serve; the owner's lines wait unread.
    expect(output.writableLength).toBeLessThanOrEqual(64 * 1024 + 200);
    expect(handedOver).toBeLessThan(count / 2);
    expect(await ask(socket, `x.read-write\t${path.join(workspace, 'while-owner-stalls.txt')}\ts9\tgood`)).toBe('SANDBOX');
    reading = true;
    for (const done of held.splice(0)) done();
    await waitFor('every answer', () => (received.split('unknown control command').length - 1 === count ? true : undefined));
    input.end();
    expect(await status).toBe(0);
  }, 60_000);
});
