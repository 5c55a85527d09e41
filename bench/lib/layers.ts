import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statfsSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT, benchTempDir } from './serve.js';
import type { KernelHandler } from './request-counter.js';
import { SandboxRunner, answerAtOnce, type Product } from './sandbox-runner.js';
import { median } from './stats.js';

/**
 * Where one create's time goes, layer by layer: the same C loop of exclusive creates run
 * natively, under the launcher with a C broker that allows everything at once, with the
 * Node channel answering at once, and with the broker's whole pipeline. On tmpfs when
 * there is one, so the file system's own cost (ext4's inode allocator moves a native
 * create between 20 µs and 0.7 ms here) does not drown the layers.
 */
export interface LayerRow {
  id: LayerId;
  label: string;
  runs: number;
  /** µs per create, timed inside the loop (no process start or exit). */
  minUs: number;
  medianUs: number;
  maxUs: number;
  /** This layer's median less the one before it. */
  extraUs?: number;
  /** CPU of this process (the broker's side) per create, median of the runs. */
  brokerCpuUs?: number;
}

export const LAYER_IDS = ['native', 'supervisor', 'node-channel', 'pipeline'] as const;
export type LayerId = (typeof LAYER_IDS)[number];

const LABELS: Record<LayerId, string> = {
  native: 'native: the create loop alone',
  supervisor: 'launcher + supervisor (Landlock, seccomp notification, open on behalf), a C broker answering at once',
  'node-channel': 'the same with the Node channel answering at once (no pipeline)',
  pipeline: "the broker's pipeline with the standard plugins and backups (library level)",
};

/** The broker's JIT needs tens of thousands of requests before its runs are comparable (a standalone run). */
const PIPELINE_WARMUP_RUNS = 6;
const TMPFS_MAGIC = 0x01021994;

export interface LayerReport {
  rows: LayerRow[];
  /** Where the files were created: tmpfs, or the bench's temp dir when there is none. */
  place: string;
}

/**
 * Where a create loop runs: a tree on tmpfs when there is one (else under the bench's temp
 * dir) with the backup store's home and the command's scratch dir in it, the C tools
 * compiled beside it, and a fresh directory per run. `remove()` takes all of it away.
 */
export interface CreatePlace {
  base: string;
  /** tmpfs, or the temp dir when there is none, for the report. */
  label: string;
  env: NodeJS.ProcessEnv;
  scratch: string;
  tool(name: 'create-loop' | 'answer-at-once'): string;
  freshDir(): string;
  remove(): void;
}

export function createPlace(prefix: string): CreatePlace {
  const tools = benchTempDir(`${prefix}tools-`);
  const onTmpfs = tmpfsBase();
  const base = mkdtempSync(path.join(onTmpfs ?? tools, prefix));
  for (const dir of ['home', 'scratch', 'runs']) mkdirSync(path.join(base, dir));
  const scratch = path.join(base, 'scratch');
  let serial = 0;
  return {
    base,
    label: onTmpfs ? 'tmpfs' : 'the temp dir (no tmpfs found)',
    env: { PATH: process.env.PATH, LC_ALL: 'C', TMPDIR: scratch, BROKERED_SHELL_HOME: path.join(base, 'home') },
    scratch,
    tool: (name) => compileLayerTool(name, tools),
    freshDir: () => {
      const dir = path.join(base, 'runs', `r${serial++}`);
      mkdirSync(dir);
      return dir;
    },
    remove: () => {
      rmSync(base, { recursive: true, force: true });
      rmSync(tools, { recursive: true, force: true });
    },
  };
}

/**
 * One run of the create loop through `runner` (its broker, or `handler` instead): µs per
 * create timed inside the loop, and this process's CPU per create. Every create must have
 * reached the handler, or the figure would stand for less than it says.
 */
export async function brokeredCreates(
  runner: SandboxRunner,
  place: CreatePlace,
  loop: string,
  creates: number,
  what: string,
  handler?: KernelHandler,
): Promise<{ us: number; cpuUs: number }> {
  const dir = place.freshDir();
  try {
    const run = await runner.run([loop, dir, String(creates)], dir, place.env, { keepStdout: true, ...(handler ? { handler } : {}) });
    if (run.code !== 0) throw new Error(`${what}: exit ${String(run.code)}: ${run.stderrTail.slice(-500)}`);
    if (run.requests.requests < creates) throw new Error(`${what}: ${run.requests.requests} broker requests for ${creates} creates`);
    return { us: loopMicros(run.stdoutTail ?? '', creates, what), cpuUs: (run.selfCpuMs * 1000) / creates };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function layerRows(product: Product, creates: number, runs: number, log: (line: string) => void): Promise<LayerReport> {
  const place = createPlace('bsh-bench-layers-');
  try {
    const loop = place.tool('create-loop');
    const cBroker = place.tool('answer-at-once');
    const { env } = place;
    const runner = new SandboxRunner(product, { env, writableRoots: [place.base], scratch: place.scratch, sessionId: 'bench-layers' });
    const launcher = product.sandbox.locateSandboxBinary();
    const once = async (layer: LayerId): Promise<{ us: number; cpuUs?: number }> => {
      if (layer === 'node-channel') return brokeredCreates(runner, place, loop, creates, layer, answerAtOnce);
      if (layer === 'pipeline') return brokeredCreates(runner, place, loop, creates, layer);
      const dir = place.freshDir();
      try {
        const argv = layer === 'native' ? [loop, dir, String(creates)] : [cBroker, launcher, loop, dir, String(creates)];
        const done = spawnSync(argv[0]!, argv.slice(1), { env, encoding: 'utf8' });
        if (done.status !== 0) throw new Error(`${layer}: exit ${String(done.status)}: ${done.stderr.slice(-500)}`);
        // Every create must have been a broker request, or the layer measures less than it says.
        const asked = Number(/answer-at-once: (\d+) requests/.exec(done.stderr)?.[1] ?? Number.NaN);
        if (layer === 'supervisor' && !(asked >= creates)) throw new Error(`supervisor: ${String(asked)} broker requests for ${creates} creates`);
        return { us: loopMicros(done.stdout, creates, layer) };
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    };
    try {
      for (let i = 0; i < PIPELINE_WARMUP_RUNS; i += 1) await once('pipeline');
      for (const layer of LAYER_IDS) await once(layer);
      const samples = new Map<LayerId, { us: number; cpuUs?: number }[]>(LAYER_IDS.map((id) => [id, []]));
      // Round by round, so a drift of the machine's speed falls on every layer alike.
      for (let round = 0; round < runs; round += 1) {
        for (const layer of LAYER_IDS) samples.get(layer)!.push(await once(layer));
        log(`  layers round ${round + 1}/${runs}: ${LAYER_IDS.map((id) => `${id} ${samples.get(id)!.at(-1)!.us.toFixed(1)} µs`).join(', ')}`);
      }
      let previous: number | undefined;
      const rows = LAYER_IDS.map((id): LayerRow => {
        const us = samples.get(id)!.map((s) => s.us);
        const cpu = samples.get(id)!.flatMap((s) => (s.cpuUs === undefined ? [] : [s.cpuUs]));
        const row: LayerRow = { id, label: LABELS[id], runs: us.length, minUs: Math.min(...us), medianUs: median(us), maxUs: Math.max(...us) };
        if (previous !== undefined) row.extraUs = row.medianUs - previous;
        if (cpu.length > 0) row.brokerCpuUs = median(cpu);
        previous = row.medianUs;
        return row;
      });
      return { rows, place: place.label };
    } finally {
      await runner.close();
    }
  } finally {
    place.remove();
  }
}

/** `bench/layers/NAME.c` built with `cc -O2` into `dir`; the executable's path. */
function compileLayerTool(name: string, dir: string): string {
  const out = path.join(dir, name);
  const built = spawnSync('cc', ['-O2', '-o', out, path.join(REPO_ROOT, 'bench', 'layers', `${name}.c`)], { encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`cannot compile bench/layers/${name}.c: ${built.error?.message ?? built.stderr}`);
  return out;
}

/** /dev/shm when it is a writable tmpfs. */
function tmpfsBase(): string | undefined {
  try {
    const probe = mkdtempSync('/dev/shm/bsh-probe-');
    rmSync(probe, { recursive: true });
    return statfsSync('/dev/shm').type === TMPFS_MAGIC ? '/dev/shm' : undefined;
  } catch {
    return undefined;
  }
}

/** The loop's own "N nanoseconds" line as µs per create. */
function loopMicros(stdout: string, creates: number, layer: string): number {
  const match = /^(\d+) (\d+)$/m.exec(stdout);
  if (!match || Number(match[1]) !== creates) throw new Error(`${layer}: the create loop printed ${JSON.stringify(stdout.slice(-200))}`);
  return Number(match[2]) / 1000 / creates;
}
