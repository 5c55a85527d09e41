/**
 * What a connection holds in the broker stays bounded whatever its client does: a client
 * that writes requests and never reads makes its connection stop reading and answering
 * once its unsent answers pass the bound, and is dropped (one audit record) when it still
 * does not read; a client that reads late gets every answer; lines that wait for a slow
 * policy stop the reading too. Meanwhile other connections are answered. Real sockets; the
 * broker's buffers are read through `BrokerServer.buffered`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Broker, type Decision } from '../../src/core/index.js';
import { BrokerServer } from '../../src/ipc/server.js';
import { AuditPlugin, getAuditHooks, type AuditRecord } from '../../src/plugins/audit.js';
import { SandboxTokenPlugin } from '../../src/plugins/sandbox-token.js';
import { allowAll, identityResolver } from '../helpers/bare-broker.js';
import { ask } from '../helpers/serve-process.js';
import { waitFor } from '../helpers/wait-for.js';

const PEER = { pid: 4343, uid: 0, gid: 0 };
const MAX_UNSENT = 16 * 1024;
const MAX_QUEUED = 256 * 1024;
const LONG = `/w/${'d'.repeat(1000)}`;
/** A host operation no plugin performs: its answer (about 2 KB) repeats the long path twice. */
const request = (id: number) => `${JSON.stringify({ id, command: 'HostFileOperation', operation: 'mkdir', path: `${LONG}/${id}`, sessionId: 's1' })}\n`;
const ANSWER_BYTES = 2 * LONG.length + 300;

let dir: string;
let broker: Broker;
let server: BrokerServer;
const records: AuditRecord[] = [];
/** While set, the policy holds every request to a path under /slow until it settles. */
let slowPolicy: Promise<void> | undefined;
const clients: net.Socket[] = [];

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'bsh-unread-'));
  broker = new Broker({ sessionId: 's1' }).use(
    identityResolver(),
    allowAll(),
    {
      name: 'test-slow-policy',
      apply(b) {
        b.hooks.evaluatePolicy.tapPromise({ name: 'test-slow-policy', stage: -1 }, async (target): Promise<Decision | undefined> => {
          if (target.resolved.startsWith('/slow')) await slowPolicy;
          return undefined;
        });
      },
    },
    new SandboxTokenPlugin(),
    new AuditPlugin({ log: false }),
  );
  getAuditHooks(broker).record.tap('sink', (record) => void records.push(record));
  server = new BrokerServer({
    broker,
    socketPath: path.join(dir, 'sock', 'broker.sock'),
    maxUnsentBytes: MAX_UNSENT,
    maxQueuedBytes: MAX_QUEUED,
    // The flood rule counts lines, not bytes: out of the way of what these tests measure.
    maxQueuedLines: 100_000,
    unreadGraceMs: 3000,
    peerCredentials: () => PEER,
  });
  await server.listen();
});

afterEach(() => {
  for (const client of clients.splice(0)) client.destroy();
});

afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A client that writes `payload` and reads nothing (until the test says so). */
function silentClient(payload: string): net.Socket {
  const client = net.createConnection({ path: server.socketPath });
  client.pause();
  client.on('error', () => undefined);
  client.write(payload);
  clients.push(client);
  return client;
}

/** Samples the server's buffers every few ms until `until` settles; returns the largest seen. */
async function largestWhile(until: Promise<unknown>): Promise<{ unsentBytes: number; queuedBytes: number }> {
  const largest = { unsentBytes: 0, queuedBytes: 0 };
  let done = false;
  void until.finally(() => (done = true));
  while (!done) {
    const now = server.buffered;
    largest.unsentBytes = Math.max(largest.unsentBytes, now.unsentBytes);
    largest.queuedBytes = Math.max(largest.queuedBytes, now.queuedBytes);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return largest;
}

const closeOf = (client: net.Socket) => new Promise<void>((resolve) => (client.closed ? resolve() : client.once('close', () => resolve())));

describe('BrokerServer: a client that does not read its answers', () => {
  it('stops being read and answered past the bound, is dropped after the grace with one record, and others are answered meanwhile', async () => {
    const before = records.length;
    // About 8 MB of answers: far more than the kernel's socket buffers take.
    const flooder = silentClient(Array.from({ length: 4000 }, (_, i) => request(i)).join(''));
    const dropped = closeOf(flooder);
    const largest = largestWhile(dropped);
    await waitFor('the connection to stall', () => (server.buffered.stalled === 1 ? true : undefined));
    // Another client, on its own connection, is answered while the flooder is stalled.
    const answeredWhileStalled: boolean[] = [];
    for (let i = 0; i < 5; i++) {
      expect(await ask(server.socketPath, `x.read-write\t/w/other-${i}\ts1\tt`)).toBe('SANDBOX');
      answeredWhileStalled.push(server.buffered.stalled === 1);
    }
    expect(answeredWhileStalled[0]).toBe(true);
    await dropped;
    const seen = await largest;
    expect(seen.unsentBytes).toBeGreaterThan(0);
    expect(seen.unsentBytes).toBeLessThanOrEqual(MAX_UNSENT + ANSWER_BYTES);
    const drops = records.slice(before).filter((r) => r.operation === 'unread-answers');
    expect(drops).toHaveLength(1);
    expect(drops[0]).toMatchObject({ origin: 'socket', verdict: 'deny', decidedBy: 'ipc', peer: PEER, error: { code: 'BSH_BAD_REQUEST' } });
    // Nothing was done for the lines it never got answers to: far fewer requests than it sent.
    const answered = records.slice(before).filter((r) => r.operation === 'mkdir').length;
    expect(answered).toBeLessThan(4000);
    await waitFor('the connection to go', () => (server.buffered.connections === 0 ? true : undefined));
    expect(server.buffered).toEqual({ connections: 0, unsentBytes: 0, queuedBytes: 0, stalled: 0 });
  }, 30_000);

  it('a client that starts reading late gets every answer, in order, and is not dropped', async () => {
    const before = records.length;
    const count = 1500;
    const client = silentClient(Array.from({ length: count }, (_, i) => request(i)).join(''));
    await waitFor('the connection to stall', () => (server.buffered.stalled === 1 ? true : undefined));
    const ids: number[] = [];
    let rest = '';
    const all = new Promise<void>((resolve) => {
      client.on('data', (chunk: Buffer) => {
        const parts = (rest + String(chunk)).split('\n');
        rest = parts.pop() ?? '';
        for (const part of parts) ids.push((JSON.parse(part) as { id: number }).id);
        if (ids.length === count) resolve();
      });
    });
    client.resume();
    await all;
    expect(ids).toEqual(Array.from({ length: count }, (_, i) => i));
    expect(client.destroyed).toBe(false);
    expect(records.slice(before).filter((r) => r.operation === 'unread-answers')).toEqual([]);
  }, 30_000);
});

describe('BrokerServer: lines waiting for their answers', () => {
  it('are not read past the bound while the policy holds them, and are all answered once it lets go', async () => {
    let letGo: () => void = () => undefined;
    slowPolicy = new Promise<void>((resolve) => (letGo = resolve));
    const line = (i: number) => `x.read-write\t/slow/${i}-${'s'.repeat(4000)}\ts1\tt\n`;
    const count = 400;
    const client = net.createConnection({ path: server.socketPath });
    clients.push(client);
    client.on('error', () => undefined);
    let answers = 0;
    const all = new Promise<void>((resolve) => {
      client.on('data', (chunk: Buffer) => {
        answers += String(chunk).split('\n').length - 1;
        if (answers === count) resolve();
      });
    });
    // About 1.6 MB of lines; the broker reads what fits its bound and waits.
    client.write(Array.from({ length: count }, (_, i) => line(i)).join(''));
    const sampled = largestWhile(all);
    await waitFor('the reading to stop', () => (server.buffered.queuedBytes > MAX_QUEUED ? true : undefined));
    // The client is still writing: what it sent waits in the kernel, not in the broker.
    expect(client.writableLength).toBeGreaterThan(0);
    letGo();
    slowPolicy = undefined;
    await all;
    const seen = await sampled;
    // At most one read chunk past the bound.
    expect(seen.queuedBytes).toBeLessThanOrEqual(MAX_QUEUED + 64 * 1024);
    expect(answers).toBe(count);
  }, 30_000);
});
