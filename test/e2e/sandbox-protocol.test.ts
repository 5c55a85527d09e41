/**
 * The supervisor ↔ broker codec and channel: exact layout, round trips, answers in
 * completion order, and garbage that never crashes the broker side and never
 * produces an "allow".
 */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { serveKernelChannel, type KernelRequestHandler } from '../../src/sandbox/channel.js';
import { errnoFromName, errnoName } from '../../src/sandbox/errno.js';
import {
  answerReader,
  decodeAnswer,
  decodeRequest,
  encodeAnswer,
  encodePerformed,
  encodeRequest,
  normalizeAnswer,
  requestReader,
  SandboxOp,
  type KernelAnswer,
  type KernelRequest,
} from '../../src/sandbox/protocol.js';
import { removeDir, tempDir } from '../fixtures/sandbox/harness.js';

const sample: KernelRequest = {
  id: 7,
  op: 'rename',
  pid: 1234,
  tgid: 1200,
  flags: 1,
  mode: 0,
  follow: false,
  path: '/ws/a',
  to: '/ws/ü',
};

describe('frame layout', () => {
  it('encodes a request exactly as PROTOCOL.md says', () => {
    const frame = encodeRequest(sample);
    const body = frame.subarray(4);
    expect(frame.readUInt32LE(0)).toBe(body.length);
    expect(body.readUInt32LE(0)).toBe(7);
    expect(body.readUInt16LE(4)).toBe(SandboxOp.rename);
    expect(body.readUInt16LE(6)).toBe(0);
    expect([body.readUInt32LE(8), body.readUInt32LE(12), body.readUInt32LE(16), body.readUInt32LE(20)]).toEqual([
      1234, 1200, 1, 0,
    ]);
    expect(body.readUInt8(24)).toBe(0);
    expect(body.readUInt16LE(28)).toBe(5);
    expect(body.subarray(30, 35).toString()).toBe('/ws/a');
    expect(body.readUInt16LE(35)).toBe(Buffer.byteLength('/ws/ü'));
    expect(body.length).toBe(28 + 2 + 5 + 2 + 6 + 2);
    expect(decodeRequest(body)).toEqual({ ok: true, request: sample });
  });

  it('encodes answers; a denial carries no paths', () => {
    const allowed = encodeAnswer(9, { errno: 0, path: '/ws/a', to: '/ws/b' });
    expect(allowed.readUInt32LE(0)).toBe(allowed.length - 4);
    expect(decodeAnswer(allowed.subarray(4))).toEqual({ ok: true, id: 9, answer: { errno: 0, path: '/ws/a', to: '/ws/b' } });
    const denied = encodeAnswer(10, { errno: 13 });
    expect(denied.length).toBe(4 + 8 + 4);
    expect(decodeAnswer(denied.subarray(4))).toEqual({ ok: true, id: 10, answer: { errno: 13 } });
  });

  it('an allow of an unlink or a rename may carry where its old file goes (a third string); nothing else may', () => {
    const kept = encodeAnswer(11, normalizeAnswer('unlink', { errno: 0, path: '/ws/a', aside: '/home/blobs/ab/cd' }));
    expect(decodeAnswer(kept.subarray(4))).toEqual({ ok: true, id: 11, answer: { errno: 0, path: '/ws/a', aside: '/home/blobs/ab/cd' } });
    expect(kept.length).toBe(4 + 8 + 2 + 5 + 2 + 2 + '/home/blobs/ab/cd'.length);
    expect(normalizeAnswer('rename', { errno: 0, path: '/ws/a', to: '/ws/b', aside: '/s/x' })).toEqual({ errno: 0, path: '/ws/a', to: '/ws/b', aside: '/s/x' });
    expect(normalizeAnswer('open', { errno: 0, path: '/ws/a', aside: '/s/x' })).toEqual({ errno: 13 });
    expect(normalizeAnswer('unlink', { errno: 0, path: '/ws/a', aside: 'relative' })).toEqual({ errno: 13 });
  });

  it('op codes match the C enum', () => {
    const header = fs.readFileSync(path.join(import.meta.dirname, '../../native/sandbox/sandbox.h'), 'utf8');
    for (const [name, code] of Object.entries(SandboxOp)) {
      const cName = `BSH_OP_${name.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;
      expect(header).toContain(`${cName} = ${code},`);
    }
  });

  it('round-trips any well-formed request', () => {
    const text = fc.string({ unit: 'grapheme', maxLength: 40 }).filter((s) => !s.includes('\0'));
    fc.assert(
      fc.property(
        fc.record({
          id: fc.nat({ max: 0xffffffff }),
          op: fc.constantFrom(...(Object.keys(SandboxOp) as (keyof typeof SandboxOp)[])),
          pid: fc.nat({ max: 0x7fffffff }),
          tgid: fc.nat({ max: 0x7fffffff }),
          flags: fc.nat({ max: 0xffffffff }),
          mode: fc.nat({ max: 0o177777 }),
          follow: fc.boolean(),
          path: text.map((s) => `/${s}`),
          to: text.map((s) => `/${s}`),
          linkTarget: text.filter((s) => s !== ''),
        }),
        (input) => {
          const request: KernelRequest = { ...input };
          if (input.op !== 'rename' && input.op !== 'link') delete request.to;
          if (input.op !== 'symlink') delete request.linkTarget;
          expect(decodeRequest(encodeRequest(request).subarray(4))).toEqual({ ok: true, request });
        },
      ),
    );
  });
});

describe('validation', () => {
  const body = (mutate: (b: Buffer) => Buffer) => mutate(Buffer.from(encodeRequest(sample).subarray(4)));

  it.each([
    ['an unknown op', (b: Buffer) => (b.writeUInt16LE(99, 4), b), 'unknown op'],
    ['non-zero reserved bytes', (b: Buffer) => (b.writeUInt8(1, 26), b), 'reserved'],
    ['follow other than 0/1', (b: Buffer) => (b.writeUInt8(2, 24), b), 'reserved'],
    ['invalid UTF-8', (b: Buffer) => (b.writeUInt8(0xff, 31), b), 'string'],
    ['a NUL inside a path', (b: Buffer) => (b.writeUInt8(0, 31), b), 'string'],
    ['a string running past the frame', (b: Buffer) => (b.writeUInt16LE(4000, 28), b), 'string'],
    ['trailing bytes', (b: Buffer) => Buffer.concat([b, Buffer.from([0])]), 'string'],
    ['a relative path', (b: Buffer) => (b.write('x', 30), b), 'absolute'],
    [
      'a rename without a second path',
      (b: Buffer) => Buffer.concat([b.subarray(0, 35), Buffer.from([0, 0, 0, 0])]),
      'second path',
    ],
  ])('refuses %s but keeps the id so it can be denied', (_what, mutate, reason) => {
    const decoded = decodeRequest(body(mutate));
    expect(decoded).toMatchObject({ ok: false, id: 7 });
    if (!decoded.ok) expect(decoded.reason).toContain(reason);
  });

  it('never throws on arbitrary bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        const buffer = Buffer.from(bytes);
        decodeRequest(buffer);
        decodeAnswer(buffer);
        requestReader().push(buffer);
        answerReader().push(buffer);
      }),
    );
  });

  it('rejects frame lengths it cannot trust', () => {
    const huge = Buffer.alloc(8);
    huge.writeUInt32LE(1 << 20);
    expect(requestReader().push(huge).error).toMatch(/frame length/);
    const tiny = Buffer.alloc(8);
    tiny.writeUInt32LE(3);
    expect(requestReader().push(tiny).error).toMatch(/frame length/);
  });

  it('reassembles frames split anywhere', () => {
    const stream = Buffer.concat([encodeRequest(sample), encodeRequest({ ...sample, id: 8 })]);
    for (let cut = 0; cut <= stream.length; cut++) {
      const reader = requestReader();
      const frames = [...reader.push(stream.subarray(0, cut)).frames, ...reader.push(stream.subarray(cut)).frames];
      expect(frames.map((f) => decodeRequest(f)).map((d) => d.ok && d.request?.id)).toEqual([7, 8]);
    }
  });

  it.each<[string, unknown, KernelAnswer]>([
    ['a denial', { errno: 1 }, { errno: 1 }],
    ['an allow with paths', { errno: 0, path: '/a', to: '/b' }, { errno: 0, path: '/a', to: '/b' }],
    ['an allow without the second path', { errno: 0, path: '/a' }, { errno: 13 }],
    ['a relative path', { errno: 0, path: 'a', to: '/b' }, { errno: 13 }],
    ['a path with NUL', { errno: 0, path: '/a\0', to: '/b' }, { errno: 13 }],
    ['a negative errno', { errno: -1 }, { errno: 13 }],
    ['a huge errno', { errno: 70000 }, { errno: 13 }],
    ['a fractional errno', { errno: 0.5 }, { errno: 13 }],
    ['null', null, { errno: 13 }],
    ['a string', 'allow', { errno: 13 }],
  ])('normalizes %s for a rename', (_what, answer, expected) => {
    expect(normalizeAnswer('rename', answer)).toEqual(expected);
  });

  it('refuses a second path where the op has none', () => {
    expect(normalizeAnswer('open', { errno: 0, path: '/a', to: '/b' })).toEqual({ errno: 13 });
    expect(normalizeAnswer('open', { errno: 0, path: '/a' })).toEqual({ errno: 0, path: '/a' });
  });

  it('errno names', () => {
    expect(errnoFromName('EACCES')).toBe(13);
    expect(errnoName(13)).toBe('EACCES');
    expect(() => errnoFromName('ENOTANERRNO')).toThrow(RangeError);
  });
});

describe('serveKernelChannel over a real socket', () => {
  let dir: string;
  let server: net.Server;
  let client: net.Socket;
  let served: net.Socket;

  async function connect(onRequest: KernelRequestHandler) {
    dir = tempDir('chan');
    const socketPath = path.join(dir, 's');
    const accepted = new Promise<net.Socket>((resolve) => {
      server = net.createServer(resolve);
    });
    await new Promise<void>((resolve) => server.listen(socketPath, resolve));
    client = net.connect(socketPath);
    served = await accepted;
    serveKernelChannel(served, { onRequest });
  }

  /** Collects `count` answers from the client side, or resolves early when the channel closes. */
  function answers(count: number) {
    const reader = answerReader();
    const got: { id: number; answer: KernelAnswer }[] = [];
    return new Promise<{ got: typeof got; closed: boolean }>((resolve) => {
      client.on('data', (chunk: Buffer) => {
        for (const frame of reader.push(chunk).frames) {
          const decoded = decodeAnswer(frame);
          if (decoded.ok) got.push({ id: decoded.id, answer: decoded.answer });
        }
        if (got.length === count) resolve({ got, closed: false });
      });
      client.on('close', () => resolve({ got, closed: true }));
    });
  }

  beforeEach(() => {
    dir = '';
  });
  afterEach(async () => {
    client.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    if (dir) removeDir(dir);
  });

  it('answers in completion order, not arrival order', async () => {
    // Request 1 is held until request 2 has been answered.
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    await connect(async (request) => {
      if (request.id === 1) await gate;
      else setImmediate(release);
      return { errno: 0, path: request.path };
    });
    const pending = answers(2);
    client.write(encodeRequest({ ...sample, op: 'open', id: 1, to: undefined }));
    client.write(encodeRequest({ ...sample, op: 'open', id: 2, to: undefined }));
    const { got } = await pending;
    expect(got.map((a) => a.id)).toEqual([2, 1]);
  });

  it('denies a malformed but delimited frame and keeps serving', async () => {
    await connect(async (request) => ({ errno: 0, path: request.path }));
    const pending = answers(2);
    const bad = Buffer.from(encodeRequest({ ...sample, id: 3 }));
    bad.writeUInt16LE(77, 8);
    client.write(bad);
    client.write(encodeRequest({ ...sample, op: 'mkdir', id: 4, to: undefined }));
    const { got } = await pending;
    expect(got).toEqual([
      { id: 3, answer: { errno: 13 } },
      { id: 4, answer: { errno: 0, path: '/ws/a' } },
    ]);
  });

  it("an allowed request is over when the supervisor's performed notice comes; a denied one once it is sent; no notice is answered", async () => {
    const over = new Map<number, string>();
    await connect(async (request, done) => {
      void done.then(() => over.set(request.id, 'over'));
      return request.id === 1 ? { errno: 0, path: request.path } : { errno: 13 };
    });
    const pending = answers(2);
    client.write(encodeRequest({ ...sample, op: 'open', id: 1, to: undefined }));
    client.write(encodeRequest({ ...sample, op: 'open', id: 2, to: undefined }));
    const { got } = await pending;
    expect(got.map((a) => a.id).sort()).toEqual([1, 2]);
    await new Promise((resolve) => setImmediate(resolve));
    expect([...over.keys()]).toEqual([2]);
    const more = answers(1);
    client.write(encodePerformed(1));
    // The next request's answer comes back alone: the notice itself got none.
    client.write(encodeRequest({ ...sample, op: 'mkdir', id: 3, to: undefined }));
    expect((await more).got.map((a) => a.id)).toEqual([3]);
    expect(over.get(1)).toBe('over');
  });

  it.each([
    ['for an id never allowed', () => encodePerformed(99)],
    ['with a non-zero field', () => {
      const frame = Buffer.from(encodePerformed(1));
      frame.writeUInt32LE(5, 4 + 8);
      return frame;
    }],
  ])('a performed notice %s closes the channel (the supervisor then fails closed)', async (_label, notice) => {
    await connect(async (request) => ({ errno: 0, path: request.path }));
    const first = answers(1);
    client.write(encodeRequest({ ...sample, op: 'open', id: 1, to: undefined }));
    await first;
    const after = answers(1);
    client.write(notice());
    expect(await after).toEqual({ got: [], closed: true });
  });

  it('a request still waiting for its notice is over when the channel ends', async () => {
    let done: Promise<void> | undefined;
    await connect(async (request, over) => {
      done = over;
      return { errno: 0, path: request.path };
    });
    const pending = answers(1);
    client.write(encodeRequest({ ...sample, op: 'open', id: 1, to: undefined }));
    await pending;
    client.destroy();
    await expect(done).resolves.toBeUndefined();
  });

  it('closes the channel on an untrustworthy length (the supervisor then fails closed)', async () => {
    let asked = 0;
    await connect(async (request) => {
      asked++;
      return { errno: 0, path: request.path };
    });
    const pending = answers(1);
    const header = Buffer.alloc(4);
    header.writeUInt32LE(0xffffffff);
    client.write(header);
    const { got, closed } = await pending;
    expect(closed).toBe(true);
    expect(got).toEqual([]);
    expect(asked).toBe(0);
  });
});
