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
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { Broker, BrokerPlugin } from '../src/index.js';
import { positiveInt } from './lib/cli-options.js';
import { median } from './lib/compare.js';
import { compileLayerTool, loopMicros, tmpfsBase } from './lib/layers.js';
import { loadProduct, type Product } from './lib/sandbox-runner.js';
import { REPO_ROOT, benchTempDir } from './lib/serve.js';
import { formatMicros, markdownTable } from './lib/table.js';

/** Resolves every path to itself as an absent file: the core's own work with no real resolution. */
const standInResolver: BrokerPlugin = {
  name: 'bench-stand-in-resolver',
  apply(broker: Broker) {
    broker.hooks.resolvePath.tap('bench-stand-in-resolver', (resolution) => ({
      targets: resolution.targets.map((t) => ({ role: t.role, path: t.path, access: t.access, lexical: t.path, resolved: t.path, ruleForm: t.path, kind: 'absent' as const })),
    }));
  },
};

/** Allows everything it is asked about, for the slices that have no policy plugin yet. */
const allowAll: BrokerPlugin = {
  name: 'bench-allow-all',
  apply(broker: Broker) {
    broker.hooks.evaluatePolicy.tap('bench-allow-all', () => ({ verdict: 'sandbox' as const, source: 'bench-allow-all' }));
  },
};

const BACKUP_PLUGINS = ['modify-backup', 'command-prebackup'];

interface Slice {
  id: string;
  label: string;
  plugins: (standard: BrokerPlugin[]) => BrokerPlugin[];
}

const SLICES: Slice[] = [
  { id: 'core', label: 'the core alone (a stand-in resolver, allow all)', plugins: () => [standInResolver, allowAll] },
  { id: 'resolution', label: '+ path-resolution', plugins: (all) => [...pick(all, ['path-resolution']), allowAll] },
  { id: 'file-safety', label: '+ file-safety (no allow-all)', plugins: (all) => pick(all, ['path-resolution', 'file-safety']) },
  { id: 'no-backup', label: '+ every other standard plugin but the backup ones', plugins: (all) => all.filter((p) => !BACKUP_PLUGINS.includes(p.name)) },
  { id: 'standard', label: '+ modify-backup and command-prebackup: the standard set', plugins: (all) => all },
];

function pick(all: BrokerPlugin[], names: string[]): BrokerPlugin[] {
  return all.filter((plugin) => names.includes(plugin.name));
}

interface Sample {
  us: number;
  cpuUs: number;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { creates: { type: 'string' }, rounds: { type: 'string' }, warmup: { type: 'string' } }, strict: true });
  const creates = positiveInt('--creates', values.creates, 5000);
  const rounds = positiveInt('--rounds', values.rounds, 5);
  const warmup = positiveInt('--warmup', values.warmup, 3);
  const product: Product = await loadProduct(REPO_ROOT);
  const { index, sandbox, bridge } = product;
  const tools = benchTempDir('bsh-bench-slices-tools-');
  const place = tmpfsBase();
  const base = mkdtempSync(path.join(place ?? tools, 'bsh-bench-slices-'));
  try {
    const loop = compileLayerTool('create-loop', tools);
    for (const dir of ['home', 'scratch', 'runs']) mkdirSync(path.join(base, dir));
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, LC_ALL: 'C', TMPDIR: path.join(base, 'scratch'), BROKERED_SHELL_HOME: path.join(base, 'home') };
    const brokers = SLICES.map((slice) => {
      const broker = new index.Broker({ sessionId: `bench-slice-${slice.id}`, logger: index.createLogger({ level: 'error' }) });
      broker.use(...slice.plugins(index.standardPlugins({ home: index.resolveHome(env), writableRoots: [base], backup: {} })));
      return { slice, broker, handler: bridge.kernelBridge(broker, { toolCallId: 'bench-call', traceId: 'bench-trace' }) };
    });
    let serial = 0;
    const once = async ({ slice, broker, handler }: (typeof brokers)[number]): Promise<Sample> => {
      const dir = path.join(base, 'runs', `r${serial++}`);
      mkdirSync(dir);
      try {
        await broker.beginTurn();
        const cpu0 = process.cpuUsage();
        const run = sandbox.spawnSandboxed({ argv: [loop, dir, String(creates)], cwd: dir, env, scratchDirs: [path.join(base, 'scratch')], onRequest: handler, stdio: ['ignore', 'pipe', 'pipe'] });
        let stdout = '';
        let stderr = '';
        run.child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
        run.child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
        const exit = await run.exit;
        const cpu = process.cpuUsage(cpu0);
        await broker.commitTurn(`bench slice ${slice.id}`);
        if (exit.code !== 0) throw new Error(`${slice.id}: exit ${String(exit.code)}: ${stderr.slice(-500)}`);
        return { us: loopMicros(stdout, creates, slice.id), cpuUs: (cpu.user + cpu.system) / creates };
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    };
    for (let i = 0; i < warmup; i += 1) for (const entry of brokers) await once(entry);
    const samples = brokers.map(() => [] as Sample[]);
    for (let round = 0; round < rounds; round += 1) {
      for (const [i, entry] of brokers.entries()) samples[i]!.push(await once(entry));
      process.stderr.write(`round ${round + 1}/${rounds}: ${brokers.map((b, i) => `${b.slice.id} ${samples[i]!.at(-1)!.us.toFixed(0)} µs`).join(', ')}\n`);
    }
    for (const { broker } of brokers) await broker.close();
    let previous: { us: number; cpu: number } | undefined;
    const rows = brokers.map(({ slice }, i) => {
      const us = median(samples[i]!.map((s) => s.us));
      const cpu = median(samples[i]!.map((s) => s.cpuUs));
      const row = { label: slice.label, us, cpu, extraUs: previous ? us - previous.us : undefined, extraCpu: previous ? cpu - previous.cpu : undefined };
      previous = { us, cpu };
      return row;
    });
    process.stdout.write(`## What each slice of the standard plugins costs a create (${creates.toLocaleString('en-US')} creates per run on ${place ? 'tmpfs' : 'the temp dir'}, ${rounds} rounds after ${warmup})\n\n`);
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
    rmSync(base, { recursive: true, force: true });
    rmSync(tools, { recursive: true, force: true });
  }
}

await main();
