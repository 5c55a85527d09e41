/**
 * What each part of the standard plugin set costs a create in a real run: the C loop of
 * exclusive creates (bench/layers/create-loop.c) on tmpfs, under the kernel sandbox, with
 * brokers that grow a slice at a time — the core alone (a stand-in plugin that resolves
 * each path to itself and allows it), then path resolution, file safety, the rest of the
 * policy and audit plugins, and the backup plugins. The rounds run the brokers in turn,
 * so a drift of the machine falls on all of them alike.
 *
 *   node --import tsx bench/plugin-slices.ts [--creates 5000] [--rounds 5] [--warmup 3]
 *
 * Needs the compiled dist/ and build/ (`npm run build`). Not a test: no vitest.
 */
import { parseArgs } from 'node:util';
import { positiveInt } from './lib/cli-options.js';
import { median } from './lib/stats.js';
import { brokeredCreates, createPlace } from './lib/layers.js';
import { SandboxRunner, loadProduct, type Product } from './lib/sandbox-runner.js';
import { REPO_ROOT } from './lib/serve.js';
import { SLICES } from './lib/slices.js';
import { formatMicros, markdownTable } from './lib/table.js';

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { creates: { type: 'string' }, rounds: { type: 'string' }, warmup: { type: 'string' } }, strict: true });
  const creates = positiveInt('--creates', values.creates, 5000);
  const rounds = positiveInt('--rounds', values.rounds, 5);
  const warmup = positiveInt('--warmup', values.warmup, 3);
  const product: Product = await loadProduct(REPO_ROOT);
  const place = createPlace('bsh-bench-slices-');
  try {
    const loop = place.tool('create-loop');
    const runners = SLICES.map(
      (slice) => new SandboxRunner(product, { env: place.env, writableRoots: [place.base], scratch: place.scratch, sessionId: `bench-slice-${slice.id}`, plugins: slice.plugins }),
    );
    const once = (i: number) => brokeredCreates(runners[i]!, place, loop, creates, SLICES[i]!.id);
    try {
      for (let w = 0; w < warmup; w += 1) for (const i of SLICES.keys()) await once(i);
      const samples = SLICES.map(() => [] as { us: number; cpuUs: number }[]);
      for (let round = 0; round < rounds; round += 1) {
        for (const i of SLICES.keys()) samples[i]!.push(await once(i));
        process.stderr.write(`round ${round + 1}/${rounds}: ${SLICES.map((slice, i) => `${slice.id} ${samples[i]!.at(-1)!.us.toFixed(0)} µs`).join(', ')}\n`);
      }
      let previous: { us: number; cpu: number } | undefined;
      const rows = SLICES.map((slice, i) => {
        const us = median(samples[i]!.map((s) => s.us));
        const cpu = median(samples[i]!.map((s) => s.cpuUs));
        const row = { label: slice.label, us, cpu, extraUs: previous ? us - previous.us : undefined, extraCpu: previous ? cpu - previous.cpu : undefined };
        previous = { us, cpu };
        return row;
      });
      process.stdout.write(`## What each slice of the standard plugins costs a create (${creates.toLocaleString('en-US')} creates per run on ${place.label}, ${rounds} rounds after ${warmup})\n\n`);
      process.stdout.write(
        `${markdownTable<(typeof rows)[number]>(
          [
            { header: 'broker', value: (r) => r.label },
            { header: 'µs / create (median)', align: 'right', value: (r) => formatMicros(r.us) },
            { header: '+ µs', align: 'right', value: (r) => (r.extraUs === undefined ? '–' : formatMicros(r.extraUs)) },
            { header: 'broker CPU µs / create', align: 'right', value: (r) => formatMicros(r.cpu) },
            { header: '+ CPU µs', align: 'right', value: (r) => (r.extraCpu === undefined ? '–' : formatMicros(r.extraCpu)) },
          ],
          rows,
        )}\n`,
      );
    } finally {
      for (const runner of runners) await runner.close();
    }
  } finally {
    place.remove();
  }
}

await main();
