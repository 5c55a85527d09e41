import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, expect, it } from 'vitest';

/**
 * Fuzz settings for CI and for long runs:
 *   FUZZ_RUNS  runs per property (default 1000: a few seconds per file)
 *   FUZZ_SEED  the fast-check seed (default fixed, so CI runs the same inputs every time)
 * A failure prints the seed, the counterexample and the path to replay it.
 */
export const FUZZ_RUNS = positive(process.env.FUZZ_RUNS, 1000);
export const FUZZ_SEED = Number.parseInt(process.env.FUZZ_SEED ?? '', 10) || 0x5eed_b5;
/** Heap one property file's worker may use: a parser that buffers without bound fails here. */
const MAX_HEAP_MB = 256;

function positive(raw: string | undefined, fallback: number): number {
  const value = Number.parseInt(raw ?? '', 10);
  return Number.isFinite(value) && value > 0 ? value : fallback;
}

interface PropertyResult {
  name: string;
  runs?: number;
  skips?: number;
  failed?: boolean;
  ms?: number;
  report?: string;
  error?: string;
}

/**
 * Declares one vitest test per property of `module` (a file exporting `properties`, a
 * record of property factories). All of them run in one worker thread with a heap limit;
 * a property that gives no answer within its time budget counts as a hang: the worker is
 * terminated and the property fails. Every name exported must be listed, so none is
 * silently left out.
 */
export function fuzzProperties(module: URL, names: readonly string[], options: { runsDivisor?: number } = {}): void {
  // Properties that touch the file system run fewer inputs per FUZZ_RUNS.
  const numRuns = Math.max(1, Math.ceil(FUZZ_RUNS / (options.runsDivisor ?? 1)));
  // Generous: a hang guard, not a speed check (2 cores shared by many processes).
  const budgetMs = 60_000 + numRuns * 20;
  const waiting = new Map<string, { resolve: (r: PropertyResult) => void; promise: Promise<PropertyResult> }>();
  for (const name of names) {
    let resolve!: (r: PropertyResult) => void;
    const promise = new Promise<PropertyResult>((r) => (resolve = r));
    waiting.set(name, { resolve, promise });
  }
  let exported: string[] | undefined;
  let worker: Worker | undefined;
  let timer: NodeJS.Timeout | undefined;
  const results: PropertyResult[] = [];
  let finished!: () => void;
  const done = new Promise<void>((r) => (finished = r));

  const failRest = (error: string) => {
    for (const [name, entry] of waiting) entry.resolve({ name, error });
  };
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      const pending = [...waiting.keys()][0];
      failRest(`no answer within ${budgetMs} ms while checking "${pending}": a hang (or memory growing without bound)`);
      void worker?.terminate();
    }, budgetMs);
  };

  beforeAll(() => {
    worker = new Worker(new URL('./worker-boot.mjs', import.meta.url), {
      workerData: { entry: module.href, names, seed: FUZZ_SEED, numRuns },
      resourceLimits: { maxOldGenerationSizeMb: MAX_HEAP_MB },
      stdout: false,
    });
    arm();
    worker.on('message', (message: { kind: 'names'; names: string[] } | { kind: 'done' } | ({ kind: 'result' } & PropertyResult)) => {
      if (message.kind === 'done') return finished();
      if (message.kind === 'names') {
        exported = message.names;
        return;
      }
      results.push(message);
      waiting.get(message.name)?.resolve(message);
      waiting.delete(message.name);
      arm();
    });
    worker.on('error', (error) => failRest(`the worker failed (over ${MAX_HEAP_MB} MB of heap?): ${String(error)}`));
    worker.on('exit', () => {
      clearTimeout(timer);
      finished();
      failRest('the worker exited before checking this property');
    });
  });

  afterAll(async () => {
    clearTimeout(timer);
    // Let the module clean up (its cleanup()), unless the worker is stuck.
    if (waiting.size === 0) await Promise.race([done, new Promise((r) => setTimeout(r, 10_000))]);
    await worker?.terminate();
    const file = module.pathname.split('/').pop();
    for (const r of results) {
      // The executions, for the record (FUZZ_RUNS=100000 npx vitest run test/fuzz for long runs).
      console.log(`fuzz ${file} ${r.name}: ${r.runs ?? 0} runs, ${r.skips ?? 0} skipped, seed ${FUZZ_SEED}, ${r.ms ?? 0} ms${r.failed ? ', FAILED' : ''}`);
    }
  });

  it('every exported property is checked', async () => {
    await waitFor(() => exported !== undefined || waiting.size === 0, budgetMs);
    expect([...(exported ?? [])].sort()).toEqual([...names].sort());
  }, budgetMs + 10_000);

  for (const name of names) {
    it(name, async () => {
      const result = await (waiting.get(name)?.promise ?? Promise.resolve(results.find((r) => r.name === name) as PropertyResult));
      expect(result.error, result.error).toBeUndefined();
      expect(result.failed, result.report).toBe(false);
      expect(result.runs).toBe(numRuns);
    }, budgetMs * (names.length + 1));
  }
}

async function waitFor(done: () => boolean, ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (!done() && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
}
