/**
 * Soak, bounded for CI (bench/load/soak.ts runs it for minutes): one library sandbox
 * session in this process runs command after command, each its own turn rewriting the
 * same files, creating and removing a file and a directory. Every command exits 0 and
 * commits all its backups; between commands this process's fd count ends where it was
 * after the warm-up and comes back to where it was before the session once it is closed; the
 * heap (after a full GC) stays within a generous bound of its baseline.
 */
import { describe, expect, it } from 'vitest';
import { mib } from '../../bench/load/concurrent-lib.js';
import { runSoak } from '../../bench/load/soak-lib.js';

const FILES = 20;
const WARMUP = 3;
/** A leak of even a few KiB per backup would pass this over the run; the bench reports the real slope. */
const HEAP_GROWTH_BYTES = 32 * 1024 * 1024;

describe('soak', () => {
  it('commands in a loop, one turn each: every backup committed, no fd left behind, heap bounded', { timeout: 90_000 }, async () => {
    const result = await runSoak({ durationMs: 12_000, filesPerCommand: FILES, warmup: WARMUP });
    expect(result.failures).toEqual([]);
    expect(result.commands).toBeGreaterThan(WARMUP);
    expect(result.backups).toBe(result.commands * FILES);
    expect(result.fdFinal).toBe(result.fdBaseline);
    expect(result.fdsAfterClose).toBeLessThanOrEqual(result.fdsBeforeSession);
    expect(result.heapMax - result.heapBaseline).toBeLessThan(HEAP_GROWTH_BYTES);
    console.info(
      `soak: ${result.commands} commands, ${result.backups} backups, fds ${result.fdsBeforeSession}/${result.fdBaseline}/${result.fdFinal}/${result.fdsAfterClose}, ` +
        `heap ${mib(result.heapBaseline)}→${mib(result.heapFinal)} MiB, RSS max ${mib(result.rssMax)} MiB`,
    );
  });
});
