/**
 * The network messages of the supervisor channel (native/sandbox/PROTOCOL.md, "Network"):
 * the supervisor's record of each connection it decided (op 18, never answered), its
 * question about one the table cannot decide (op 19, answered with an errno), and the
 * broker's network table (a frame of the answer layout with id 0 and type 1, text
 * lines, a table replacing the last one at its `end` line).
 */

export const NET_RECORD_OP = 18;
export const NET_ASK_OP = 19;
/** The type of the broker's table message (the errno field of a frame with id 0). */
export const NET_TABLE_MESSAGE = 1;
/** Questions carry ids with this bit; file requests never do. */
export const NET_ID_BIT = 0x80000000;

export const NET_PROTOCOLS = ['tcp', 'udp', 'icmp', 'other'] as const;
export type NetProtocol = (typeof NET_PROTOCOLS)[number];
/** `connect`: a connection; `datagram`: a send to an address; `dns`: a query to a resolver. */
export const NET_KINDS = ['connect', 'datagram', 'dns'] as const;
export type NetKind = (typeof NET_KINDS)[number];

/** A connection (or datagram, or DNS query) as the supervisor saw it. */
export interface KernelConnection {
  kind: NetKind;
  protocol: NetProtocol;
  /** The address the call named (a resolver's, for a DNS query). */
  address: string;
  port: number;
  /** The allowed host the address belongs to, or the name a DNS query asked for. */
  host?: string;
  /** Thread and process of the call. */
  pid: number;
  tgid: number;
  /** The syscall (`connect`, `sendto`, `dns` for the proxy's queries). */
  syscall: string;
}

export interface KernelConnectionRecord extends KernelConnection {
  /** 0: allowed; else the errno the call got. */
  errno: number;
  /** How many such calls (the same process, syscall, target and outcome within a second) this record stands for. */
  count: number;
  /** Why, in words of the table (`network.allow names it`). */
  reason: string;
}

export interface KernelNetworkQuestion extends KernelConnection {
  /** Answer it with this id. */
  id: number;
}

export type DecodedNetwork =
  | { ok: true; record: KernelConnectionRecord; question?: undefined }
  | { ok: true; question: KernelNetworkQuestion; record?: undefined }
  | { ok: false; id?: number; reason: string };

const REQUEST_FIXED = 28;
const MAX_STRING = 4095;

function strings(body: Buffer, count: number): string[] | undefined {
  const out: string[] = [];
  let at = REQUEST_FIXED;
  for (let i = 0; i < count; i++) {
    if (at + 2 > body.length) return undefined;
    const length = body.readUInt16LE(at);
    at += 2;
    if (length > MAX_STRING || at + length > body.length) return undefined;
    const bytes = body.subarray(at, at + length);
    const value = bytes.toString('utf8');
    if (!Buffer.from(value, 'utf8').equals(bytes) || value.includes('\0')) return undefined;
    out.push(value);
    at += length;
  }
  return at === body.length ? out : undefined;
}

/** A record (op 18) or question (op 19) body, the bytes after the length field. */
export function decodeNetwork(body: Buffer): DecodedNetwork {
  const id = body.readUInt32LE(0);
  const op = body.readUInt16LE(4);
  const question = op === NET_ASK_OP;
  const fail = (reason: string): DecodedNetwork => (question && (id & NET_ID_BIT) !== 0 ? { ok: false, id, reason } : { ok: false, reason });
  const count = body.readUInt32LE(24);
  if (body.readUInt16LE(6) !== 0 || (question ? count !== 0 : count === 0)) return fail(question ? 'reserved bytes are not zero' : 'a record of no call');
  if (question ? (id & NET_ID_BIT) === 0 : id !== 0) return fail('a network frame with a wrong id');
  const fields = strings(body, 3);
  if (!fields) return fail('bad string field');
  const [address = '', host = '', text = ''] = fields;
  const mode = body.readUInt32LE(20);
  const protocol = NET_PROTOCOLS[((mode >>> 16) & 0xff) - 1];
  const kind = NET_KINDS[((mode >>> 24) & 0xff) - 1];
  if (!protocol || !kind || address === '') return fail('a network frame without a protocol, kind or address');
  const space = text.indexOf(' ');
  const connection: KernelConnection = {
    kind,
    protocol,
    address,
    port: mode & 0xffff,
    pid: body.readUInt32LE(8),
    tgid: body.readUInt32LE(12),
    syscall: space < 0 ? text : text.slice(0, space),
  };
  if (host !== '') connection.host = host;
  if (question) return { ok: true, question: { ...connection, id } };
  const errno = body.readUInt32LE(16);
  if (errno > 4095) return fail('a record with an errno outside 0..4095');
  return { ok: true, record: { ...connection, errno, count, reason: space < 0 ? '' : text.slice(space + 1) } };
}

/** Whether a request body is one of these frames (by its op). */
export function isNetworkFrame(body: Buffer): boolean {
  if (body.length < 6) return false;
  const op = body.readUInt16LE(4);
  return op === NET_RECORD_OP || op === NET_ASK_OP;
}

function frame(fixed: Buffer, texts: string[]): Buffer {
  const parts = texts.map((text) => {
    const bytes = Buffer.from(text, 'utf8');
    if (bytes.length > MAX_STRING) throw new RangeError('string field too long');
    const head = Buffer.alloc(2);
    head.writeUInt16LE(bytes.length);
    return Buffer.concat([head, bytes]);
  });
  const body = Buffer.concat([fixed, ...parts]);
  const head = Buffer.alloc(4);
  head.writeUInt32LE(body.length);
  return Buffer.concat([head, body]);
}

/** The answer to a question: 0 allows, an errno refuses. */
export function encodeNetworkAnswer(id: number, errno: number): Buffer {
  const fixed = Buffer.alloc(8);
  fixed.writeUInt32LE(id >>> 0, 0);
  fixed.writeInt32LE(errno, 4);
  return frame(fixed, ['', '']);
}

/** A table as frames: `begin`, its lines, `end`, each frame holding whole lines. */
export function encodeNetworkTable(lines: readonly string[]): Buffer[] {
  const all = ['begin', ...lines, 'end'];
  const frames: Buffer[] = [];
  let chunk = '';
  const flush = () => {
    if (chunk === '') return;
    const fixed = Buffer.alloc(8);
    fixed.writeInt32LE(NET_TABLE_MESSAGE, 4);
    frames.push(frame(fixed, [chunk, '']));
    chunk = '';
  };
  for (const line of all) {
    if (line.includes('\n') || Buffer.byteLength(line) > 500) throw new RangeError(`a table line too long or broken: ${line.slice(0, 60)}`);
    if (Buffer.byteLength(chunk) + Buffer.byteLength(line) + 1 > MAX_STRING) flush();
    chunk += `${line}\n`;
  }
  flush();
  return frames;
}

/** A record or question frame as the supervisor writes it (for tests and tools). */
export function encodeNetworkFrame(frameOf: KernelConnectionRecord | KernelNetworkQuestion): Buffer {
  const fixed = Buffer.alloc(REQUEST_FIXED);
  const question = 'id' in frameOf;
  fixed.writeUInt32LE(question ? frameOf.id >>> 0 : 0, 0);
  fixed.writeUInt16LE(question ? NET_ASK_OP : NET_RECORD_OP, 4);
  fixed.writeUInt32LE(frameOf.pid, 8);
  fixed.writeUInt32LE(frameOf.tgid, 12);
  fixed.writeUInt32LE(question ? 0 : frameOf.errno, 16);
  const mode = frameOf.port | ((NET_PROTOCOLS.indexOf(frameOf.protocol) + 1) << 16) | ((NET_KINDS.indexOf(frameOf.kind) + 1) << 24);
  fixed.writeUInt32LE(mode >>> 0, 20);
  if (!question) fixed.writeUInt32LE(frameOf.count, 24);
  const text = question ? frameOf.syscall : `${frameOf.syscall} ${frameOf.reason}`;
  return frame(fixed, [frameOf.address, frameOf.host ?? '', text]);
}
