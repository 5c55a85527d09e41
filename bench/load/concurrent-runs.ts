/**
 * Load: R concurrent `brokered-shell run`s × N modifications each (default 16 × 1,000),
 * in separate sessions and then all in one shared session. Prints, per mode: ops, lost
 * backups (must be 0), entries of one run found in another's turn (must be 0), the
 * largest RSS of any run's broker, and the wall time. Exits 1 when a check fails.
 *
 *   npx tsc -p tsconfig.build.json     # `run` runs from dist/
 *   node --import tsx bench/load/concurrent-runs.ts [--runs 16] [--files 1000]
 *     [--file-bytes 512] [--modes separate,shared] [--durability each|turn] [--json FILE]
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { formatNumber, markdownTable } from '../lib/table.js';
import { durabilitySchema } from '../../src/backup/settings.js';
import { mib, runConcurrent, type ConcurrentResult, type SessionMode } from './concurrent-lib.js';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: process.env.BENCH_LOAD_RUNS ?? '16' },
    files: { type: 'string', default: process.env.BENCH_LOAD_FILES ?? '1000' },
    'file-bytes': { type: 'string', default: '512' },
    modes: { type: 'string', default: 'separate,shared' },
    durability: { type: 'string' },
    json: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  process.stdout.write('node --import tsx bench/load/concurrent-runs.ts [--runs 16] [--files 1000] [--file-bytes 512] [--modes separate,shared] [--durability each|turn] [--json FILE]\n');
  process.exit(0);
}

const modes = values.modes.split(',').map((m): SessionMode => {
  if (m !== 'separate' && m !== 'shared') throw new Error(`unknown mode ${m}`);
  return m;
});
const durability = values.durability === undefined ? undefined : durabilitySchema.parse(values.durability);
const results: ConcurrentResult[] = [];
for (const mode of modes) {
  process.stderr.write(`${mode}: ${values.runs} runs × ${values.files} modifications…\n`);
  results.push(
    await runConcurrent({ runs: Number(values.runs), filesPerRun: Number(values.files), fileBytes: Number(values['file-bytes']), mode, ...(durability ? { durability } : {}) }),
  );
}

const rows = results.map((r) => {
  const rss = r.runs.map((run) => run.maxRssBytes).sort((a, b) => a - b);
  return {
    mode: r.options.mode,
    durability: r.options.durability,
    runs: r.options.runs,
    ops: r.ops,
    entries: r.entries,
    lost: r.lostBackups,
    crossed: r.crossed,
    exit0: r.runs.filter((run) => run.status === 0).length,
    rssMedian: rss[Math.floor(rss.length / 2)] ?? 0,
    rssMax: r.maxRssBytes,
    wallS: r.wallMs / 1000,
    slowestRunS: Math.max(...r.runs.map((run) => run.wallMs)) / 1000,
  };
});
process.stdout.write(
  `${markdownTable(
    [
      { header: 'sessions', value: (row) => row.mode },
      { header: 'durability', value: (row) => row.durability },
      { header: 'runs', align: 'right', value: (row) => String(row.runs) },
      { header: 'ops', align: 'right', value: (row) => formatNumber(row.ops) },
      { header: 'entries', align: 'right', value: (row) => formatNumber(row.entries) },
      { header: 'lost backups', align: 'right', value: (row) => String(row.lost) },
      { header: 'crossed', align: 'right', value: (row) => String(row.crossed) },
      { header: 'exit 0', align: 'right', value: (row) => `${row.exit0}/${row.runs}` },
      { header: 'RSS median MiB', align: 'right', value: (row) => mib(row.rssMedian) },
      { header: 'RSS max MiB', align: 'right', value: (row) => mib(row.rssMax) },
      { header: 'wall s', align: 'right', value: (row) => row.wallS.toFixed(1) },
      { header: 'ops/s', align: 'right', value: (row) => formatNumber(row.ops / row.wallS) },
    ],
    rows,
  )}\n`,
);
for (const r of results) for (const problem of r.problems) process.stdout.write(`problem (${r.options.mode}): ${problem}\n`);
if (values.json) writeFileSync(values.json, `${JSON.stringify(results, null, 2)}\n`);
const failed = results.some((r) => r.lostBackups > 0 || r.crossed > 0 || r.problems.length > 0);
process.exitCode = failed ? 1 : 0;
