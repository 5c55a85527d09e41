import fc from 'fast-check';
import {
  MAX_FRAME_BODY,
  MAX_STRING_BYTES,
  REFUSED_OP,
  SandboxOp,
  answerReader,
  decodeAnswer,
  decodeRequest,
  encodeAnswer,
  encodePerformed,
  encodeRefusal,
  encodeRequest,
  normalizeAnswer,
  requestReader,
  type KernelOp,
  type KernelRequest,
} from '../../../src/sandbox/protocol.js';

/**
 * The broker's side of the kernel channel (native/sandbox/PROTOCOL.md): whatever the
 * supervisor (or something impersonating it) writes, the broker gets values, never an
 * exception, and a frame it accepts means exactly what its bytes say.
 */
const ops = Object.keys(SandboxOp) as KernelOp[];
const u32 = fc.nat({ max: 0xffffffff });
/** Text without NUL, biased to paths; at most MAX_STRING_BYTES bytes of UTF-8. */
const text = (maxLength = 64) =>
  fc
    .oneof(fc.string({ unit: 'grapheme', maxLength }), fc.string({ unit: fc.constantFrom('/', 'a', '.', 'é', '\u{1F600}'), maxLength }))
    .filter((s) => !s.includes('\0') && Buffer.byteLength(s) <= MAX_STRING_BYTES);
const absolute = text().map((s) => `/${s}`);

const request: fc.Arbitrary<KernelRequest> = fc
  .record({
    id: u32,
    op: fc.constantFrom(...ops),
    pid: u32,
    tgid: u32,
    flags: u32,
    mode: u32,
    follow: fc.boolean(),
    path: absolute,
    to: absolute,
    linkTarget: text(),
  })
  .map(({ to, linkTarget, ...r }) => ({
    ...r,
    ...(r.op === 'rename' || r.op === 'link' ? { to } : {}),
    ...(linkTarget !== '' ? { linkTarget } : {}),
  }));

/** A body with a valid fixed part and then anything: the decoder's interesting half. */
const nearlyValidBody = fc
  .tuple(request, fc.nat({ max: 40 }), fc.uint8Array({ maxLength: 8 }), fc.uint8Array({ maxLength: 24 }), fc.boolean())
  .map(([r, at, bytes, tail, op16]) => {
    const body = Buffer.from(encodeRequest(r).subarray(4));
    const out = Buffer.concat([body, Buffer.from(tail)]);
    out.set(bytes.subarray(0, Math.max(0, out.length - at)), Math.min(at, out.length));
    if (op16) out.writeUInt16LE(REFUSED_OP, 4);
    return out;
  });
const anyBody = fc.oneof(fc.uint8Array({ maxLength: 96 }).map((b) => Buffer.from(b)), nearlyValidBody);

/** Splits `bytes` at the given cut points, as a socket might deliver them. */
function chunked(bytes: Buffer, cuts: number[]): Buffer[] {
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let at = 0;
  for (const p of points) {
    chunks.push(bytes.subarray(at, p));
    at = p;
  }
  chunks.push(bytes.subarray(at));
  return chunks;
}

export const properties = {
  'decodeRequest answers any body with a value, and an accepted request re-encodes to the same bytes': () =>
    fc.property(anyBody, (body) => {
      const decoded = decodeRequest(body);
      if (!decoded.ok) {
        if (typeof decoded.reason !== 'string' || decoded.reason === '') throw new Error('a refusal without a reason');
        return;
      }
      if (decoded.request) {
        const again = encodeRequest(decoded.request).subarray(4);
        if (!again.equals(body)) throw new Error(`not canonical: ${body.toString('hex')} → ${again.toString('hex')}`);
        if (!decoded.request.path.startsWith('/')) throw new Error('accepted a relative path');
      } else if (decoded.performed !== undefined) {
        if (!encodePerformed(decoded.performed).subarray(4).equals(body)) throw new Error(`performed notice not canonical: ${body.toString('hex')}`);
      } else {
        const r = decoded.refusal;
        const twice = decodeRequest(encodeRefusal(r).subarray(4));
        if (!twice.ok || JSON.stringify(twice.refusal) !== JSON.stringify(r)) throw new Error('a refusal does not survive re-encoding');
        if (r.errno < 1 || r.errno > 4095) throw new Error(`refusal errno ${r.errno}`);
      }
    }),

  'encodeRequest then decodeRequest gives the request back': () =>
    fc.property(request, (r) => {
      const frame = encodeRequest(r);
      if (frame.readUInt32LE(0) !== frame.length - 4) throw new Error('length field');
      const decoded = decodeRequest(frame.subarray(4));
      if (!decoded.ok || JSON.stringify(decoded.request) !== JSON.stringify(r)) throw new Error(`round trip: ${JSON.stringify(decoded)}`);
    }),

  'requestReader yields the same frames however the stream is chunked, and stops at a bad length': () =>
    fc.property(
      fc.array(fc.oneof(request.map(encodeRequest), fc.uint8Array({ maxLength: 12 }).map((b) => Buffer.from(b))), { maxLength: 6 }),
      fc.array(fc.nat(), { maxLength: 12 }),
      (pieces, cuts) => {
        const stream = Buffer.concat(pieces);
        const whole = requestReader().push(stream);
        const reader = requestReader();
        const frames: Buffer[] = [];
        let error: string | undefined;
        for (const chunk of chunked(stream, cuts)) {
          const got = reader.push(Buffer.from(chunk));
          frames.push(...got.frames);
          if (got.error) {
            error = got.error;
            break;
          }
        }
        if (Boolean(error) !== Boolean(whole.error)) throw new Error(`error differs: ${error} vs ${whole.error}`);
        if (frames.length !== whole.frames.length || frames.some((f, i) => !f.equals(whole.frames[i] as Buffer))) throw new Error('frames differ by chunking');
        for (const f of frames) if (f.length > MAX_FRAME_BODY) throw new Error('an oversized frame was accepted');
        // Every frame the reader yields is then answered: decodeRequest never throws on it.
        for (const f of frames) decodeRequest(f);
      },
    ),

  'normalizeAnswer turns anything into an answer that allows only with absolute paths, and it round-trips': () =>
    fc.property(
      fc.constantFrom(...ops),
      fc.oneof(
        fc.anything(),
        fc.record({ errno: fc.oneof(fc.integer({ min: -5, max: 5000 }), fc.double(), fc.string()), path: fc.oneof(absolute, fc.string(), fc.constant(undefined)), to: fc.oneof(absolute, fc.string(), fc.constant(undefined)) }, { requiredKeys: [] }),
      ),
      u32,
      (op, raw, id) => {
        const answer = normalizeAnswer(op, raw);
        if (answer.errno === 0) {
          if (!('path' in answer) || !answer.path.startsWith('/')) throw new Error('allowed without an absolute path');
          if ((op === 'rename' || op === 'link') !== ('to' in answer && answer.to !== undefined)) throw new Error('to where none belongs');
        } else if (!Number.isInteger(answer.errno) || answer.errno < 1 || answer.errno > 4095) {
          throw new Error(`errno ${answer.errno}`);
        }
        const frame = encodeAnswer(id, answer);
        const parsed = answerReader().push(frame);
        if (parsed.error || parsed.frames.length !== 1) throw new Error('an answer frame the reader refuses');
        const decoded = decodeAnswer(parsed.frames[0] as Buffer);
        if (!decoded.ok || decoded.id !== id || JSON.stringify(decoded.answer) !== JSON.stringify(answer)) throw new Error('answer round trip');
      },
    ),

  'decodeAnswer answers any body with a value': () =>
    fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
      const decoded = decodeAnswer(Buffer.from(bytes));
      if (decoded.ok && decoded.answer.errno === 0 && !('path' in decoded.answer)) throw new Error('allowed without a path');
    }),
} satisfies Record<string, () => fc.IRawProperty<unknown[]>>;
