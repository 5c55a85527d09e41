/**
 * git over ssh under the network policy: a real sshd (Debian's openssh-server) started
 * here on a loopback port serves a bare repository. Where peers' proxies break ssh, the
 * supervisor decides the connection itself: refused while nothing names the host, a
 * clone once `network.allow` names it (by address, or by name, which the broker then
 * resolves), and `git fetch` and `git push` in that clone with no configuration at all,
 * since the workspace repository's remotes are allowed by default.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GIT_IDENTITY, brokeredShell, describeRun, makeWorld, removeWorld, type World } from './run-helpers.js';

const SSHD = '/usr/sbin/sshd';

let world: World;
let sshd: ChildProcess;
let port: number;
let repo: string;
let sshCommand: string;

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  return typeof address === 'object' && address ? address.port : 0;
}

async function accepts(at: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port: at }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

beforeAll(async () => {
  world = await makeWorld('network-ssh');
  const dir = path.join(world.base, 'sshd');
  await fs.mkdir(dir);
  // sshd's privilege separation directory, as Debian's service makes it.
  await fs.mkdir('/run/sshd', { recursive: true, mode: 0o755 });
  const keygen = (file: string) => spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', file]);
  keygen(path.join(dir, 'host_key'));
  keygen(path.join(world.tools, 'id'));
  await fs.copyFile(path.join(world.tools, 'id.pub'), path.join(dir, 'authorized_keys'));
  port = await freePort();
  await fs.writeFile(
    path.join(dir, 'sshd_config'),
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${path.join(dir, 'host_key')}`,
      `PidFile ${path.join(dir, 'sshd.pid')}`,
      `AuthorizedKeysFile ${path.join(dir, 'authorized_keys')}`,
      'StrictModes no',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'UsePAM no',
      'PermitRootLogin prohibit-password',
      '',
    ].join('\n'),
  );
  sshd = spawn(SSHD, ['-D', '-e', '-f', path.join(dir, 'sshd_config')], { stdio: 'ignore' });
  for (let i = 0; i < 100 && !(await accepts(port)); i++) await new Promise((resolve) => setTimeout(resolve, 50));
  repo = path.join(world.outside, 'served.git');
  const source = path.join(world.outside, 'source');
  await fs.mkdir(source);
  const git = (args: string[], cwd: string) => spawnSync('git', args, { cwd, env: { ...process.env, ...GIT_IDENTITY } });
  git(['init', '-q'], source);
  await fs.writeFile(path.join(source, 'readme'), 'over ssh\n');
  git(['add', '-A'], source);
  git(['commit', '-qm', 'first'], source);
  git(['clone', '-q', '--bare', source, repo], world.outside);
  sshCommand = `ssh -i ${path.join(world.tools, 'id')} -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR`;
}, 60_000);

afterAll(async () => {
  sshd?.kill('SIGTERM');
  await removeWorld(world);
});

async function policy(network: unknown): Promise<string> {
  const file = path.join(world.base, `policy-${Math.random().toString(36).slice(2)}.json`);
  await fs.writeFile(file, JSON.stringify({ network }));
  return file;
}

/** `run` in `ws`, asking nothing: --yes approves what git's new repository needs, --no refuses. */
function runIn(ws: string, command: string, answer: '--yes' | '--no', policyFile?: string) {
  const args = ['run', answer, '--workspace', ws, ...(policyFile ? ['--policy', policyFile] : []), '--', command];
  return brokeredShell(world, args, { cwd: ws, env: { ...GIT_IDENTITY, GIT_SSH_COMMAND: sshCommand } });
}

const user = os.userInfo().username;

/** A workspace holding an empty repository made outside the sandbox: a fetch there needs no approval. */
async function emptyRepository(name: string): Promise<string> {
  const ws = path.join(world.base, name);
  await fs.mkdir(ws);
  spawnSync('git', ['init', '-q'], { cwd: ws });
  return ws;
}

/** Fetches the served repository's HEAD from `url` and prints its readme, without a checkout. */
const fetchReadme = (url: string) => `git fetch -q ${url} HEAD && git cat-file -p FETCH_HEAD:readme`;

describe('git clone over ssh from a local sshd', () => {
  it('is refused while nothing names the host, and run says which entry would allow it', async () => {
    const ws = await emptyRepository('refused');
    const result = await runIn(ws, fetchReadme(`ssh://${user}@127.0.0.1:${port}${repo}`), '--no');
    expect(result.status, describeRun(result)).not.toBe(0);
    expect(result.out).toBe('');
    expect(result.stderr).toContain(`refused a connection to 127.0.0.1:${port} (tcp)`);
    expect(result.stderr).toContain(`"127.0.0.1:${port}" in network.allow`);
  });

  it('works once network.allow names the address', async () => {
    const ws = path.join(world.base, 'by-address');
    await fs.mkdir(ws);
    const result = await runIn(ws, `git clone -q ssh://${user}@127.0.0.1:${port}${repo} clone && cat clone/readme`, '--yes', await policy({ allow: [`127.0.0.1:${port}`] }));
    expect(result.status, describeRun(result)).toBe(0);
    expect(result.out).toBe('over ssh\n');
    expect(result.stderr).not.toContain('refused a connection');
  });

  it('works once network.allow names the host: the broker resolves the name when the address is new to the table', async () => {
    const ws = await emptyRepository('by-name');
    const result = await runIn(ws, fetchReadme(`ssh://${user}@localhost:${port}${repo}`), '--no', await policy({ allow: [`localhost:${port}`] }));
    // --no refuses every question: nothing was asked, the name's address was enough.
    expect(result.out, describeRun(result)).toBe('over ssh\n');
  });

  it('then git fetch and git push in the clone need no configuration: its remote is a default', async () => {
    const ws = path.join(world.base, 'by-address', 'clone');
    const result = await runIn(ws, 'git fetch -q origin && echo fetched && echo more >> readme && git commit -qam more && git push -q origin HEAD && echo pushed', '--no');
    expect(result.out, describeRun(result)).toBe('fetched\npushed\n');
    const log = spawnSync('git', ['--git-dir', repo, 'log', '--format=%s'], { encoding: 'utf8' });
    expect(log.stdout).toBe('more\nfirst\n');
  });
});
