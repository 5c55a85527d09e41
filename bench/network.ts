/**
 * Network bench: what the network policy costs. 1,000 connects to a local server
 * (outside the command, allowed by `network.allow`) and a 1 GiB transfer to it, each in
 * the sandbox (`createSandboxSession`, the seccomp runtime, the default allowlist mode
 * with the server's address allowed) against the same client run natively. The client
 * times its own loop, so the ratio is the policy's and the supervisor's, not a
 * launcher's start; the wall time of each whole run is reported beside it.
 *
 *   node --import tsx bench/network.ts [--runs 7] [--connects 1000] [--bytes 1073741824]
 *
 * Goals (issue 37): connects ≤ 1.5× native, the transfer ≤ 1.02×. Not a test.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createSandboxSession } from '../src/agent/index.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({ options: { runs: { type: 'string', default: '7' }, connects: { type: 'string', default: '1000' }, bytes: { type: 'string', default: String(1 << 30) } } });
const runs = Number(values.runs);
const connects = Number(values.connects);
const bytes = Number(values.bytes);

const dir = mkdtempSync(path.join(os.tmpdir(), 'bsh-bench-net-'));
const client = path.join(dir, 'net-client');
execFileSync('gcc', ['-O2', '-Wall', '-Wextra', '-Werror', '-o', client, path.join(here, 'layers', 'net-client.c')]);

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  return typeof address === 'object' && address ? address.port : 0;
}

const port = await freePort();
const server = spawn(client, ['serve', String(port)], { stdio: ['ignore', 'pipe', 'inherit'] });
await new Promise<void>((resolve) => server.stdout.once('data', () => resolve()));

const ws = path.join(dir, 'ws');
execFileSync('mkdir', ['-p', ws]);
const session = await createSandboxSession({ workspace: ws, home: path.join(dir, 'home'), config: { network: { allow: [`127.0.0.1:${port}`] } } });

interface Sample {
  loop: number;
  wall: number;
}

function nativeRun(args: string[]): Sample {
  const started = performance.now();
  const result = spawnSync(client, args, { encoding: 'utf8' });
  const wall = (performance.now() - started) / 1000;
  if (result.status !== 0) throw new Error(`native ${args.join(' ')} exited ${String(result.status)}: ${result.stderr}`);
  return { loop: Number(result.stdout.trim()), wall };
}

async function sandboxRun(args: string[]): Promise<Sample> {
  await session.beginTurn({ userMessage: 'bench' });
  const started = performance.now();
  const result = await session.execute([client, ...args]);
  const wall = (performance.now() - started) / 1000;
  await session.endTurn();
  if (result.exitCode !== 0) throw new Error(`sandboxed ${args.join(' ')} exited ${result.exitCode}: ${result.stderr}`);
  return { loop: Number(result.stdout.trim()), wall };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

async function measure(name: string, args: string[], goal: number): Promise<void> {
  // One warm-up of each, then alternating runs so both meet the same machine load.
  nativeRun(args);
  await sandboxRun(args);
  const native: Sample[] = [];
  const sandboxed: Sample[] = [];
  for (let i = 0; i < runs; i++) {
    native.push(nativeRun(args));
    sandboxed.push(await sandboxRun(args));
  }
  const n = median(native.map((s) => s.loop));
  const b = median(sandboxed.map((s) => s.loop));
  const nw = median(native.map((s) => s.wall));
  const bw = median(sandboxed.map((s) => s.wall));
  console.log(
    `${name}: native ${(n * 1000).toFixed(1)} ms, sandboxed ${(b * 1000).toFixed(1)} ms, ratio ${(b / n).toFixed(3)}× (goal ≤ ${goal}×); ` +
      `whole runs ${(nw * 1000).toFixed(1)} ms and ${(bw * 1000).toFixed(1)} ms (median of ${runs})`,
  );
}

try {
  await measure(`${connects} connects`, ['connect', String(port), String(connects)], 1.5);
  await measure(`${(bytes / 2 ** 30).toFixed(2)} GiB transfer`, ['send', String(port), String(bytes)], 1.02);
} finally {
  await session.close();
  server.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
}
