/**
 * The broker's side of the supervisor channel keeps what it holds bounded when the other
 * end sends requests and does not read the answers (the real supervisor has one request
 * out at a time; this is the broker not trusting that): no further request is decided
 * while its answers wait, the socket is not read past a bound, and every request is
 * answered once the other end reads. A real socket; a performed notice still releases
 * its request while answers wait.
 */
import net from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { serveKernelChannel, type KernelChannel, type KernelRequestHandler } from '../../src/sandbox/channel.js';
import { answerReader, decodeAnswer, encodePerformed, encodeRequest, type KernelRequest } from '../../src/sandbox/protocol.js';
import { removeDir, tempDir } from '../fixtures/sandbox/harness.js';
import { waitFor } from '../helpers/wait-for.js';

const LONG = `/ws/${'a'.repeat(1000)}`;
const request = (id: number): KernelRequest => ({ id, op: 'open', pid: 10, tgid: 10, flags: 0o1, mode: 0, follow: true, path: `/ws/f${id}` });
/** The channel's own bounds (channel.ts), and one answer of the long path. */
const MAX_UNSENT = 64 * 1024;
const MAX_IN_FLIGHT = 16;
const ANSWER_BYTES = LONG.length + 20;

let dir = '';
let server: net.Server | undefined;
let client: net.Socket | undefined;

afterEach(async () => {
  client?.destroy();
  if (server) await new Promise<void>((resolve) => server?.close(() => resolve()));
  if (dir) removeDir(dir);
  dir = '';
});

async function connect(onRequest: KernelRequestHandler): Promise<{ channel: KernelChannel; supervisor: net.Socket }> {
  dir = tempDir('chan-flow');
  const socketPath = path.join(dir, 's');
  const accepted = new Promise<net.Socket>((resolve) => (server = net.createServer(resolve)));
  await new Promise<void>((resolve) => server?.listen(socketPath, resolve));
  const supervisor = net.connect(socketPath);
  supervisor.pause();
  client = supervisor;
  const channel = serveKernelChannel(await accepted, { onRequest });
  return { channel, supervisor };
}

describe('serveKernelChannel: a supervisor that does not read its answers', () => {
  it('holds a bounded amount, decides no more meanwhile, and answers everything once read', async () => {
    const count = 60_000;
    let decided = 0;
    const { channel, supervisor } = await connect(async (req) => {
      decided += 1;
      return { errno: 0, path: `${LONG}/${req.id}` };
    });
    // About 60 MB of answers (3 MB of requests) if all were decided at once.
    supervisor.write(Buffer.concat(Array.from({ length: count }, (_, i) => encodeRequest(request(i + 1)))));
    let largest = 0;
    await waitFor('the channel to stop deciding', async () => {
      largest = Math.max(largest, channel.buffered.unsentBytes);
      const before = decided;
      await new Promise((resolve) => setTimeout(resolve, 50));
      largest = Math.max(largest, channel.buffered.unsentBytes);
      return decided === before && decided > 0 ? true : undefined;
    });
    expect(decided).toBeLessThan(count / 10);
    expect(largest).toBeLessThanOrEqual(MAX_UNSENT + (MAX_IN_FLIGHT + 1) * ANSWER_BYTES);
    // What it could not send waits on its side.
    expect(supervisor.writableLength).toBeGreaterThan(0);

    const reader = answerReader();
    const ids = new Set<number>();
    const all = new Promise<void>((resolve) => {
      supervisor.on('data', (chunk: Buffer) => {
        for (const frame of reader.push(chunk).frames) {
          const decoded = decodeAnswer(frame);
          if (decoded.ok) ids.add(decoded.id);
          largest = Math.max(largest, channel.buffered.unsentBytes);
        }
        if (ids.size === count) resolve();
      });
    });
    supervisor.resume();
    await all;
    expect(decided).toBe(count);
    expect(largest).toBeLessThanOrEqual(MAX_UNSENT + (MAX_IN_FLIGHT + 1) * ANSWER_BYTES);
    expect(channel.closed).toBe(false);
  }, 60_000);

  it('a performed notice releases its request while answers wait unread', async () => {
    const over: number[] = [];
    let decided = 0;
    const { channel, supervisor } = await connect(async (req, done) => {
      decided += 1;
      if (req.id === 1) void done.then(() => over.push(1));
      return { errno: 0, path: `${LONG}/${req.id}` };
    });
    supervisor.write(Buffer.concat(Array.from({ length: 2000 }, (_, i) => encodeRequest(request(i + 1)))));
    await waitFor('answers to wait unread', () => (channel.buffered.unsentBytes > MAX_UNSENT ? true : undefined));
    expect(decided).toBeLessThan(2000);
    supervisor.write(encodePerformed(1));
    await waitFor('request 1 to be over', () => (over.length === 1 ? true : undefined));
    expect(over).toEqual([1]);
  });
});
