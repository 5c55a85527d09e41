/**
 * What each part of the standard plugin set costs a text-token read over the socket: the
 * socket row's `token .read` request against servers that grow a slice at a time (the
 * slices of plugin-slices.ts, each with the token issuer), each in a process of its own as
 * `serve` is. Reported per slice: the sequential p50 and the server's CPU per request, one
 * connection at a time and with several in flight (each wakeup then serves several
 * requests, so CPU that is only a cold start per request shrinks there). The rounds run the
 * slices in turn, so a drift of the machine falls on all of them alike.
 *
 *   node --import tsx bench/socket-slices.ts [--n 20000] [--warmup 10000] [--rounds 3] [--connections 16]
 *
 * Needs the compiled dist/ (`npm run build`). Not a test: no vitest.
 */
import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { positiveInt } from './lib/cli-options.js';
import { makeFiles, tokenLine } from './socket-roundtrip.js';
import { measure, type CaseSpec } from './lib/measure.js';
import { benchTempDir } from './lib/serve.js';
import { SLICE_SESSION, startSliceServer } from './lib/slice-server.js';
import { SLICES } from './lib/slices.js';
import { median } from './lib/stats.js';
import { formatMicros, markdownTable } from './lib/table.js';

interface Sample {
  p50Us: number;
  cpuUs: number;
  cpuManyUs: number;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { n: { type: 'string' }, warmup: { type: 'string' }, rounds: { type: 'string' }, connections: { type: 'string' } },
    strict: true,
  });
  const n = positiveInt('--n', values.n, 20_000);
  const warmup = positiveInt('--warmup', values.warmup, 10_000, 0);
  const rounds = positiveInt('--rounds', values.rounds, 3);
  const connections = positiveInt('--connections', values.connections, 16, 2);
  const base = benchTempDir('bsh-bench-socket-slices-');
  try {
    const workspace = path.join(base, 'workspace');
    // The socket row's read pool.
    const lines = makeFiles(path.join(workspace, 'read'), 'r', 256).map((file, i) => tokenLine('sandbox.read', file, SLICE_SESSION, `tc${i}`));
    const spec: CaseSpec = { id: 'token-read', label: 'token .read, existing file', server: 'broker', expect: 'SANDBOX\n', requests: () => lines };
    // Apart from the workspace: each server protects its socket's directory, as `serve` does.
    const sockets = path.join(base, 'sockets');
    mkdirSync(sockets);
    const samples = SLICES.map(() => [] as Sample[]);
    for (let round = 0; round < rounds; round += 1) {
      for (const [i, slice] of SLICES.entries()) {
        const socketPath = path.join(sockets, `${slice.id}-${round}.sock`);
        const server = await startSliceServer(socketPath, slice.id, path.join(base, 'home'), workspace);
        try {
          const [one, many] = await measure(socketPath, server.pid, spec, { n, nConcurrent: n, warmup, concurrency: [1, connections], log: () => {} });
          if (!one?.serverCpuUs || !many?.serverCpuUs) throw new Error('the server CPU could not be read from /proc');
          samples[i]!.push({ p50Us: one.latency.p50Us, cpuUs: one.serverCpuUs, cpuManyUs: many.serverCpuUs });
        } finally {
          await server.stop();
        }
      }
      process.stderr.write(`round ${round + 1}/${rounds}: ${SLICES.map((slice, i) => `${slice.id} ${formatMicros(samples[i]!.at(-1)!.p50Us)} µs`).join(', ')}\n`);
    }
    const rows = SLICES.map((slice, i) => {
      const of = (pick: (s: Sample) => number) => median(samples[i]!.map(pick));
      return { label: slice.label, p50: of((s) => s.p50Us), cpu: of((s) => s.cpuUs), cpuMany: of((s) => s.cpuManyUs) };
    });
    const plus = (i: number, pick: (r: (typeof rows)[number]) => number) => (i === 0 ? '–' : formatMicros(pick(rows[i]!) - pick(rows[i - 1]!)));
    process.stdout.write(`## What each slice of the standard plugins costs a text-token read (${n.toLocaleString('en-US')} requests per run after ${warmup.toLocaleString('en-US')}, ${rounds} rounds, medians)\n\n`);
    process.stdout.write(
      `${markdownTable<number>(
        [
          { header: 'server', value: (i) => rows[i]!.label },
          { header: 'p50 µs, 1 connection', align: 'right', value: (i) => formatMicros(rows[i]!.p50) },
          { header: '+ µs', align: 'right', value: (i) => plus(i, (r) => r.p50) },
          { header: 'server CPU µs / request', align: 'right', value: (i) => formatMicros(rows[i]!.cpu) },
          { header: '+ CPU µs', align: 'right', value: (i) => plus(i, (r) => r.cpu) },
          { header: `CPU µs / request, ${connections} connections`, align: 'right', value: (i) => formatMicros(rows[i]!.cpuMany) },
          { header: '+ CPU µs', align: 'right', value: (i) => plus(i, (r) => r.cpuMany) },
        ],
        [...rows.keys()],
      )}\n`,
    );
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

await main();
