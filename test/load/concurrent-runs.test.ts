/**
 * Concurrent `brokered-shell run`s, bounded for CI (bench/load/concurrent-runs.ts runs
 * the full 16 × 1,000): each run rewrites every one of its own existing files, in
 * separate sessions (no backup of one session lands in another) and all in one session
 * under one store (its turns stay apart while written at once; there the stores sync only at
 * each commit, durability 'turn', so several processes' unsynced blobs meet). Every modification has
 * its backup holding the file's previous bytes, each run has exactly one turn of N
 * entries, every run exits 0, and each broker's memory stays bounded.
 */
import { describe, expect, it } from 'vitest';
import { mib, runConcurrent, type SessionMode } from '../../bench/load/concurrent-lib.js';
import type { Durability } from '../../src/backup/settings.js';

const RUNS = 4;
const FILES = 200;
/** Generous: a `run` broker sits near 100 MiB; a leak per request would pass this over 200 files only if it were huge, so the bench reports the real figures. */
const MAX_RSS_BYTES = 400 * 1024 * 1024;

describe('concurrent runs under load', () => {
  const cases: Array<[SessionMode, Durability]> = [
    ['separate', 'each'],
    ['shared', 'turn'],
  ];
  for (const [mode, durability] of cases) {
    it(`${RUNS} runs × ${FILES} modifications, ${mode} sessions, durability ${durability}: every backup present, none crossed`, { timeout: 120_000 }, async () => {
      const result = await runConcurrent({ runs: RUNS, filesPerRun: FILES, fileBytes: 512, mode, durability });
      expect(result.problems).toEqual([]);
      expect(result.runs.map((r) => r.status)).toEqual(new Array<number>(RUNS).fill(0));
      expect(result.ops).toBe(RUNS * FILES);
      expect(result.entries).toBe(RUNS * FILES);
      expect(result.lostBackups).toBe(0);
      expect(result.crossed).toBe(0);
      for (const run of result.runs) {
        expect(run.samples).toBeGreaterThan(0);
        expect(run.maxRssBytes).toBeLessThan(MAX_RSS_BYTES);
      }
      console.info(
        `load ${mode} ${durability}: ${result.ops} ops, ${result.entries} entries, lost ${result.lostBackups}, crossed ${result.crossed}, ` +
          `max RSS ${mib(result.maxRssBytes)} MiB, ${(result.wallMs / 1000).toFixed(1)} s`,
      );
    });
  }
});
