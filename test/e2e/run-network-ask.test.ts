/**
 * A connection the network policy does not name, asked on a real terminal while the call
 * waits (`run` under `script`): `y` lets this one through, `s` the host for the session,
 * `a` saves it to the home config, `n` refuses; a DNS name is asked about before the
 * query leaves, once for the lookup and the connection that follows.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DNS_PY, fakeResolver, tcpServer, type FakeResolver, type TcpServer } from './network-helpers.js';
import { CLI, makeWorld, removeWorld, worldEnv, type World } from './run-helpers.js';

const QUESTION = 'brokered-shell: the command waits for approval to ';
const PROMPT = 'Allow? [y/N';

let world: World;
let resolver: FakeResolver;
const closers: Array<() => Promise<void>> = [];

beforeAll(async () => {
  world = await makeWorld('network-ask');
  await fs.writeFile(path.join(world.tools, 'dns.py'), DNS_PY);
  await fs.writeFile(path.join(world.tools, 'connect.py'), `
import errno, socket, sys
s = socket.socket()
try:
    s.connect(('127.0.0.1', int(sys.argv[1]))); s.sendall(b'asked'); print('connected', flush=True)
except OSError as e:
    print(errno.errorcode[e.errno], flush=True)
`);
  resolver = await fakeResolver({ 'asked.test': '127.0.0.1' });
  await fs.writeFile(path.join(world.base, 'resolv.conf'), `nameserver 127.0.0.1:${resolver.port}\n`);
});
afterAll(async () => {
  await resolver.close();
  await removeWorld(world);
});
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
  resolver.queries.splice(0);
});

async function server(): Promise<TcpServer> {
  const s = await tcpServer();
  closers.push(() => s.close());
  return s;
}

/** `run` under `script` (a terminal); `answers` are typed, one per question, in order. */
function onTerminal(command: string, answers: string[]): Promise<{ status: number | null; out: string; questions: string[] }> {
  const line = ['exec', process.execPath, CLI, 'run', '--workspace', world.ws, '--', command].map((word) => (word === 'exec' ? word : `'${word.replace(/'/g, `'\\''`)}'`)).join(' ');
  return new Promise((resolve, reject) => {
    const env = worldEnv(world, { BROKERED_SHELL_RESOLV_CONF: path.join(world.base, 'resolv.conf') });
    const child = spawn('script', ['-qec', line, '/dev/null'], { cwd: world.ws, env, stdio: ['pipe', 'pipe', 'pipe'] });
    let text = '';
    const questions: string[] = [];
    const onOutput = (chunk: Buffer) => {
      text += chunk.toString('utf8');
      while (questions.length < text.split(PROMPT).length - 1) {
        let start = -1;
        for (let n = 0; n <= questions.length; n += 1) start = text.indexOf(QUESTION, start + 1);
        questions.push(text.slice(start, text.indexOf(']', text.indexOf(PROMPT, start)) + 1));
        child.stdin.write(`${answers[questions.length - 1] ?? 'n'}\n`);
      }
    };
    child.stdout.on('data', onOutput);
    child.stderr.on('data', onOutput);
    child.once('error', reject);
    child.once('close', (status) => resolve({ status, out: text, questions }));
  });
}

describe('a connection not in network.allow, on a terminal', () => {
  it('is asked while the call waits: y lets it through for this command, n refuses, and a next command is asked again', async () => {
    const outside = await server();
    const result = await onTerminal(`python3 "$TOOLS/connect.py" ${outside.port}; python3 "$TOOLS/connect.py" ${outside.port}`, ['y']);
    expect(result.questions).toHaveLength(1);
    expect(result.questions[0]).toContain(`to connect to 127.0.0.1:${outside.port} (tcp): it is not in network.allow`);
    expect(result.questions[0]).toContain(`python3 "$TOOLS/connect.py" ${outside.port}`);
    expect(result.questions[0]).toMatch(/y {2}yes, for this command[\s\S]*s {2}yes, and "?127\.0\.0\.1:\d+"? for the rest of the session[\s\S]*a {2}yes, and add/);
    expect(result.out).toMatch(/connected[\s\S]*connected/);
    const refused = await onTerminal(`python3 "$TOOLS/connect.py" ${outside.port}`, ['n']);
    expect(refused.questions).toHaveLength(1);
    expect(refused.out).toContain('EACCES');
    expect(outside.connections()).toBe(2);
  });

  it('s covers the rest of the session; a saves the entry to network.allow of the home config', async () => {
    const outside = await server();
    const twice = `python3 "$TOOLS/connect.py" ${outside.port}; python3 "$TOOLS/connect.py" ${outside.port}`;
    const session = await onTerminal(twice, ['s']);
    expect(session.questions).toHaveLength(1);
    expect(outside.connections()).toBe(2);
    const saved = await onTerminal(`python3 "$TOOLS/connect.py" ${outside.port}`, ['a']);
    expect(saved.questions).toHaveLength(1);
    const config = JSON.parse(await fs.readFile(path.join(world.home, 'config.json'), 'utf8')) as { network: { allow: string[] } };
    expect(config.network.allow).toEqual([`127.0.0.1:${outside.port}`]);
    // From the home config now: no question.
    const after = await onTerminal(`python3 "$TOOLS/connect.py" ${outside.port}`, []);
    expect(after.questions).toEqual([]);
    expect(after.out).toContain('connected');
    await fs.rm(path.join(world.home, 'config.json'));
  });

  it('a DNS name is asked before any query leaves; a no answers it at once and the resolver sees nothing', async () => {
    const refused = await onTerminal(`python3 "$TOOLS/dns.py" ${resolver.port} tcp asked.test`, ['n']);
    expect(refused.questions).toEqual([expect.stringContaining('to look up the name asked.test (DNS, to 127.0.0.1)')]);
    expect(refused.out).toContain('asked.test rcode 5');
    expect(resolver.queries).toEqual([]);
    const allowed = await onTerminal(`python3 "$TOOLS/dns.py" ${resolver.port} tcp asked.test`, ['y']);
    expect(allowed.out).toContain('asked.test address 127.0.0.1');
    expect(resolver.queries.map((q) => q.name)).toEqual(['asked.test']);
  });
});
