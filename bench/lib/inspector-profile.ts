import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

export interface InProcessProfileFiles {
  /** Where the `.cpuprofile` goes (what `summarizeProfile` reads); none: no CPU profiler (and no SIGPROF). */
  cpu?: string;
  /** Also take a sampling heap profile of every allocation (collected ones included) and write it here. */
  heap?: string;
}

/**
 * A CPU profile of this very process around `work` (the inspector's Profiler, as
 * `node --cpu-prof` uses), and optionally a sampling allocation profile. For the
 * library-level runs the broker lives in this process, so these are its profiles.
 */
export async function profileThisProcess<T>(files: InProcessProfileFiles, work: () => Promise<T>, intervalUs = 250): Promise<T> {
  const session = new Session();
  session.connect();
  try {
    if (files.cpu) {
      await session.post('Profiler.enable');
      await session.post('Profiler.setSamplingInterval', { interval: intervalUs });
    }
    if (files.heap) {
      await session.post('HeapProfiler.enable');
      // Count what the GC collected too: the question is what allocates, not what stays.
      const sampling = { samplingInterval: 16 * 1024, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true };
      await session.post('HeapProfiler.startSampling', sampling);
    }
    if (files.cpu) await session.post('Profiler.start');
    let result: T;
    try {
      result = await work();
    } finally {
      if (files.cpu) {
        const { profile } = await session.post('Profiler.stop');
        writeFileSync(files.cpu, JSON.stringify(profile));
      }
      if (files.heap) {
        const heap = await session.post('HeapProfiler.stopSampling');
        writeFileSync(files.heap, JSON.stringify(heap.profile));
      }
    }
    return result;
  } finally {
    if (files.cpu) await session.post('Profiler.disable').catch(() => undefined);
    if (files.heap) await session.post('HeapProfiler.disable').catch(() => undefined);
    session.disconnect();
  }
}
