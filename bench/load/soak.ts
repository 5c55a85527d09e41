/**
 * Soak: one library session (`createSandboxSession`) running commands for a while (default
 * 60 s), each its own turn rewriting N files; prints the fd count and the heap (after a
 * full GC) of the broker process over time, the heap's slope after the warm-up, and
 * whether the fds came back to their baseline. Exits 1 when a command failed or the fds
 * did not come back.
 *
 *   node --expose-gc --import tsx bench/load/soak.ts [--seconds 60] [--files 50]
 *     [--warmup 5] [--json FILE]
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { formatNumber, markdownTable } from '../lib/table.js';
import { mib } from './concurrent-lib.js';
import { runSoak } from './soak-lib.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: process.env.BENCH_SOAK_SECONDS ?? '60' },
    files: { type: 'string', default: '50' },
    warmup: { type: 'string', default: '5' },
    json: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  process.stdout.write('node --expose-gc --import tsx bench/load/soak.ts [--seconds 60] [--files 50] [--warmup 5] [--json FILE]\n');
  process.exit(0);
}

process.stderr.write(`soak: ${values.seconds} s, ${values.files} files per command…\n`);
const result = await runSoak({ durationMs: Number(values.seconds) * 1000, filesPerCommand: Number(values.files), warmup: Number(values.warmup) });

// A few points along the run (the first after the warm-up, then evenly spaced).
const steady = result.samples.filter((s) => s.command >= Number(values.warmup));
const points = [0, 0.25, 0.5, 0.75, 1].map((f) => steady[Math.min(steady.length - 1, Math.round(f * (steady.length - 1)))]).filter((s) => s !== undefined);
process.stdout.write(
  `${markdownTable(
    [
      { header: 'command', align: 'right', value: (s) => String(s.command) },
      { header: 'fds', align: 'right', value: (s) => String(s.fds) },
      { header: 'heap MiB', align: 'right', value: (s) => mib(s.heapUsed) },
      { header: 'RSS MiB', align: 'right', value: (s) => mib(s.rss) },
    ],
    points,
  )}\n\n`,
);
const summary = {
  commands: result.commands,
  backups: result.backups,
  'fds before session / baseline / max / final / after close': `${result.fdsBeforeSession} / ${result.fdBaseline} / ${result.fdMax} / ${result.fdFinal} / ${result.fdsAfterClose}`,
  'heap slope after warm-up': `${formatNumber(result.heapSlopeBytesPerCommand)} bytes/command`,
  'heap baseline / max / final': `${mib(result.heapBaseline)} / ${mib(result.heapMax)} / ${mib(result.heapFinal)} MiB`,
  'RSS max': `${mib(result.rssMax)} MiB`,
  wall: `${(result.wallMs / 1000).toFixed(1)} s`,
};
for (const [key, value] of Object.entries(summary)) process.stdout.write(`- ${key}: ${value}\n`);
for (const failure of result.failures) process.stdout.write(`failure: ${failure}\n`);
if (values.json) writeFileSync(values.json, `${JSON.stringify(result, null, 2)}\n`);
process.exitCode = result.failures.length > 0 || result.fdFinal > result.fdBaseline || result.fdsAfterClose > result.fdsBeforeSession ? 1 : 0;
