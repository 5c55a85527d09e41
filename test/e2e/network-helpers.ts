/**
 * Helpers for the network policy's end-to-end tests: servers outside the sandbox on
 * loopback that count what reaches them, a fake DNS resolver that records every query it
 * sees (UDP and TCP) and answers from a table, and a DNS client for inside the sandbox.
 * Every address is this machine's own.
 */
import dgram from 'node:dgram';
import net from 'node:net';

export interface TcpServer {
  port: number;
  connections(): number;
  received(): string;
  close(): Promise<void>;
}

export async function tcpServer(host = '127.0.0.1', port = 0): Promise<TcpServer> {
  let connections = 0;
  let received = '';
  const server = net.createServer((socket) => {
    connections += 1;
    socket.on('data', (chunk) => (received += chunk.toString()));
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : 0,
    connections: () => connections,
    received: () => received,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

export interface UdpServer {
  port: number;
  datagrams(): number;
  close(): Promise<void>;
}

export async function udpServer(port = 0, host = '127.0.0.1'): Promise<UdpServer> {
  let count = 0;
  const socket = dgram.createSocket('udp4');
  socket.on('message', () => (count += 1));
  await new Promise<void>((resolve) => socket.bind(port, host, resolve));
  return { port: socket.address().port, datagrams: () => count, close: () => new Promise((resolve) => socket.close(() => resolve())) };
}

export interface SeenQuery {
  name: string;
  type: number;
  transport: 'udp' | 'tcp';
  /** The whole query as it arrived. */
  bytes: Buffer;
}

export interface FakeResolver {
  port: number;
  queries: SeenQuery[];
  close(): Promise<void>;
}

function questionOf(msg: Buffer): { name: string; type: number; end: number } | undefined {
  if (msg.length < 12) return undefined;
  const labels: string[] = [];
  let at = 12;
  while (at < msg.length && msg[at] !== 0) {
    const n = msg[at] ?? 0;
    labels.push(msg.subarray(at + 1, at + 1 + n).toString('latin1'));
    at += 1 + n;
  }
  if (at + 5 > msg.length) return undefined;
  return { name: labels.join('.').toLowerCase(), type: msg.readUInt16BE(at + 1), end: at + 5 };
}

/** An answer: A records for the names in `answers` (NXDOMAIN for the rest), TTL 300. */
function answer(query: Buffer, answers: Record<string, string>): Buffer {
  const question = questionOf(query);
  if (!question) return Buffer.alloc(0);
  const header = Buffer.alloc(12);
  query.copy(header, 0, 0, 2);
  const address = answers[question.name];
  const found = address !== undefined && question.type === 1;
  header.writeUInt16BE(0x8180 | (address === undefined ? 3 : 0), 2);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(found ? 1 : 0, 6);
  const body = query.subarray(12, question.end);
  if (!found) return Buffer.concat([header, body]);
  const record = Buffer.alloc(16);
  record.writeUInt16BE(0xc00c, 0);
  record.writeUInt16BE(1, 2);
  record.writeUInt16BE(1, 4);
  record.writeUInt32BE(300, 6);
  record.writeUInt16BE(4, 10);
  address.split('.').forEach((part, i) => record.writeUInt8(Number(part), 12 + i));
  return Buffer.concat([header, body, record]);
}

/** A resolver on 127.0.0.1 (UDP and TCP on one port) that records each query it sees. */
export async function fakeResolver(answers: Record<string, string> = {}): Promise<FakeResolver> {
  const queries: SeenQuery[] = [];
  const udp = dgram.createSocket('udp4');
  udp.on('message', (msg, from) => {
    queries.push({ name: questionOf(msg)?.name ?? '', type: questionOf(msg)?.type ?? 0, transport: 'udp', bytes: msg });
    udp.send(answer(msg, answers), from.port, from.address);
  });
  await new Promise<void>((resolve) => udp.bind(0, '127.0.0.1', resolve));
  const port = udp.address().port;
  const tcp = net.createServer((socket) => {
    let buffered = Buffer.alloc(0);
    socket.on('error', () => undefined);
    socket.on('data', (chunk) => {
      buffered = Buffer.concat([buffered, chunk]);
      while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
        const msg = buffered.subarray(2, 2 + buffered.readUInt16BE(0));
        buffered = buffered.subarray(2 + msg.length);
        queries.push({ name: questionOf(msg)?.name ?? '', type: questionOf(msg)?.type ?? 0, transport: 'tcp', bytes: Buffer.from(msg) });
        const reply = answer(msg, answers);
        const head = Buffer.alloc(2);
        head.writeUInt16BE(reply.length);
        socket.write(Buffer.concat([head, reply]));
      }
    });
  });
  await new Promise<void>((resolve) => tcp.listen(port, '127.0.0.1', resolve));
  return {
    port,
    queries,
    close: async () => {
      await new Promise<void>((resolve) => udp.close(() => resolve()));
      await new Promise<void>((resolve) => tcp.close(() => resolve()));
    },
  };
}

/**
 * `python3 dns.py PORT MODE NAME...` inside the sandbox: a query for each NAME to
 * 127.0.0.1:PORT, by MODE `sendto` (an unconnected UDP socket), `udp` (connected) or
 * `tcp`; prints `NAME address A.B.C.D`, `NAME rcode N` or `NAME error ERRNO`.
 */
export const DNS_PY = `
import errno, os, socket, struct, sys
port, mode = int(sys.argv[1]), sys.argv[2]
def query(name, qid):
    q = struct.pack('>HHHHHH', qid, 0x0100, 1, 0, 0, 0)
    for label in name.split('.'):
        q += bytes([len(label)]) + label.encode()
    return q + b'\\0' + struct.pack('>HH', 1, 1)
for i, name in enumerate(sys.argv[3:]):
    q = query(name, 0x1200 + i)
    try:
        if mode == 'tcp':
            s = socket.socket(); s.settimeout(20); s.connect(('127.0.0.1', port)); s.sendall(struct.pack('>H', len(q)) + q)
            n = struct.unpack('>H', s.recv(2))[0]; a = b''
            while len(a) < n: a += s.recv(n - len(a))
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(20)
            if mode == 'udp':
                s.connect(('127.0.0.1', port)); s.send(q)
            else:
                s.sendto(q, ('127.0.0.1', port))
            a = s.recv(4096)
        rcode = a[3] & 15
        if rcode == 0 and struct.unpack('>H', a[6:8])[0] > 0:
            print(name, 'address', '.'.join(str(b) for b in a[-4:]))
        else:
            print(name, 'rcode', rcode)
    except OSError as e:
        print(name, 'error', errno.errorcode.get(e.errno, str(e)))
    sys.stdout.flush()
`;
