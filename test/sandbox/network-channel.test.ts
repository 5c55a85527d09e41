/**
 * The network frames of the supervisor channel (PROTOCOL.md, "Network"), on a real
 * socket: records go to onConnection and are never answered, questions are answered with
 * the handler's errno (EACCES when it fails or there is none) and pass file requests that
 * wait, a table goes out as frames of whole lines ending in `end`, and a malformed record
 * ends the channel (the supervisor then fails closed).
 */
import net from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { serveKernelChannel, type KernelChannelOptions } from '../../src/sandbox/channel.js';
import { decodeNetwork, encodeNetworkFrame, encodeNetworkTable, NET_ID_BIT, type KernelConnectionRecord, type KernelNetworkQuestion } from '../../src/sandbox/network-protocol.js';
import { answerReader, decodeAnswer, encodeRequest } from '../../src/sandbox/protocol.js';
import { removeDir, tempDir } from '../fixtures/sandbox/harness.js';
import { waitFor } from '../helpers/wait-for.js';

let dir = '';
let server: net.Server | undefined;
let client: net.Socket | undefined;
afterEach(async () => {
  client?.destroy();
  if (server) await new Promise<void>((resolve) => server?.close(() => resolve()));
  if (dir) removeDir(dir);
  dir = '';
});

async function connect(options: Partial<KernelChannelOptions>) {
  dir = tempDir('net-chan');
  const socketPath = path.join(dir, 's');
  const accepted = new Promise<net.Socket>((resolve) => (server = net.createServer(resolve)));
  await new Promise<void>((resolve) => server?.listen(socketPath, resolve));
  const supervisor = net.connect(socketPath);
  client = supervisor;
  const channel = serveKernelChannel(await accepted, { onRequest: async () => ({ errno: 13 }), ...options });
  const reader = answerReader();
  const answers: Array<{ id: number; errno: number }> = [];
  const raw: Buffer[] = [];
  supervisor.on('data', (chunk: Buffer) => {
    raw.push(chunk);
    for (const body of reader.push(chunk).frames) {
      const decoded = decodeAnswer(body);
      if (decoded.ok) answers.push({ id: decoded.id, errno: decoded.answer.errno });
    }
  });
  return { channel, supervisor, answers, raw };
}

const record: KernelConnectionRecord = { kind: 'connect', protocol: 'tcp', address: '203.0.113.7', port: 443, host: 'api.example.org', pid: 7, tgid: 5, syscall: 'connect', errno: 0, count: 3, reason: 'network.allow names it' };
const question: KernelNetworkQuestion = { id: (NET_ID_BIT | 1) >>> 0, kind: 'dns', protocol: 'udp', address: '10.0.0.53', port: 53, host: 'x.example', pid: 7, tgid: 5, syscall: 'dns' };

describe('network frames', () => {
  it('round-trip: a record with its count, a question with its id', () => {
    const body = (frame: Buffer) => frame.subarray(4);
    expect(decodeNetwork(body(encodeNetworkFrame(record)))).toEqual({ ok: true, record });
    expect(decodeNetwork(body(encodeNetworkFrame(question)))).toEqual({ ok: true, question });
    const noCount = encodeNetworkFrame({ ...record, count: 0 });
    expect(decodeNetwork(body(noCount))).toMatchObject({ ok: false, reason: 'a record of no call' });
    const plainId = encodeNetworkFrame({ ...question, id: 1 });
    expect(decodeNetwork(body(plainId))).toMatchObject({ ok: false, reason: 'a network frame with a wrong id' });
  });

  it('a table is frames of whole lines, begin to end, however long', () => {
    const lines = Array.from({ length: 400 }, (_, i) => `allow 10.0.${Math.floor(i / 256)}.${i % 256}/32 0-65535`);
    const frames = encodeNetworkTable(lines);
    expect(frames.length).toBeGreaterThan(1);
    const text = frames.map((frame) => {
      expect(frame.readUInt32LE(4)).toBe(0);
      expect(frame.readInt32LE(8)).toBe(1);
      const chunk = frame.subarray(14, 14 + frame.readUInt16LE(12)).toString();
      expect(chunk.endsWith('\n')).toBe(true);
      return chunk;
    });
    expect(text.join('').split('\n')).toEqual(['begin', ...lines, 'end', '']);
  });
});

describe('serveKernelChannel: network frames', () => {
  it('hands records to onConnection without an answer, and answers questions with the handler errno', async () => {
    const seen: KernelConnectionRecord[] = [];
    const { supervisor, answers } = await connect({ onConnection: (r) => void seen.push(r), onNetworkQuestion: async (q) => (q.host === 'x.example' ? 0 : 13) });
    supervisor.write(Buffer.concat([encodeNetworkFrame(record), encodeNetworkFrame(question), encodeNetworkFrame({ ...question, id: (NET_ID_BIT | 2) >>> 0, host: 'y.example' })]));
    await waitFor('two answers', () => answers.length === 2 || undefined);
    expect(seen).toEqual([record]);
    expect(answers.sort((a, b) => a.id - b.id)).toEqual([
      { id: (NET_ID_BIT | 1) >>> 0, errno: 0 },
      { id: (NET_ID_BIT | 2) >>> 0, errno: 13 },
    ]);
  });

  it('answers a question while a file request waits, and EACCES when the handler throws or is absent', async () => {
    let release: () => void = () => undefined;
    const { supervisor, answers } = await connect({
      onRequest: () => new Promise((resolve) => (release = () => resolve({ errno: 13 }))),
      onNetworkQuestion: () => {
        throw new Error('broken');
      },
    });
    supervisor.write(encodeRequest({ id: 1, op: 'open', pid: 1, tgid: 1, flags: 1, mode: 0, follow: true, path: '/x' }));
    supervisor.write(encodeNetworkFrame(question));
    await waitFor('the question answered', () => answers.some((a) => a.id === (NET_ID_BIT | 1) >>> 0) || undefined);
    expect(answers).toEqual([{ id: (NET_ID_BIT | 1) >>> 0, errno: 13 }]);
    release();
    await waitFor('the file request answered', () => answers.length === 2 || undefined);
  });

  it('pushes a table to the supervisor, and a malformed record ends the channel', async () => {
    const { channel, supervisor, raw } = await connect({});
    channel.pushNetworkTable(['mode allowlist']);
    await waitFor('the table', () => Buffer.concat(raw).toString().includes('begin\nmode allowlist\nend\n') || undefined);
    const bad = encodeNetworkFrame(record);
    bad.writeUInt32LE(0, 32); // the count
    supervisor.write(bad);
    await waitFor('the channel closed', () => channel.closed || undefined);
  });
});
