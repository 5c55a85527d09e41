// Runs in a worker thread (plain ESM: vitest's transform does not reach workers). Loads a
// TypeScript property module through tsx, then checks each named property with
// fast-check and posts one result per property, so the parent can stop a hung run
// (worker.terminate) and the heap limit it set bounds the memory any input may take.
import { parentPort, workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';
import fc from 'fast-check';

register();
const { entry, names, seed, numRuns } = workerData;
const { properties, cleanup } = await import(entry);
parentPort.postMessage({ kind: 'names', names: Object.keys(properties) });
for (const name of names) {
  const make = properties[name];
  if (typeof make !== 'function') {
    parentPort.postMessage({ kind: 'result', name, error: `no property named "${name}"` });
    continue;
  }
  const started = Date.now();
  const details = await fc.check(make(), { seed, numRuns });
  parentPort.postMessage({
    kind: 'result',
    name,
    runs: details.numRuns,
    skips: details.numSkips,
    failed: details.failed,
    ms: Date.now() - started,
    report: details.failed ? `${fc.defaultReportMessage(details) ?? 'failed'}\n${details.errorInstance?.message ?? ''}` : undefined,
  });
}
// What the module made (temp trees) goes before the parent ends the worker.
if (typeof cleanup === 'function') await cleanup();
parentPort.postMessage({ kind: 'done' });
