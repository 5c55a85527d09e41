import { BrokerError, ErrorCodes } from '../core/errors.js';
import { firstLine } from '../core/printable.js';
import {
  backupStats,
  parseCount,
  parseOlderThan,
  parseSize,
  pruneBackups,
  resolveHome,
  type OlderThan,
  type PruneReport,
  type StatsReport,
} from '../backup/index.js';
import { ExitCode } from './exit-codes.js';
import { describeError, nameDamagedTurns, printJson, printable, table, type Io } from './output.js';

export interface PruneCommandOptions {
  session?: string;
  keepLast?: string;
  olderThan?: string;
  maxSize?: string;
  includeNewest?: boolean;
  includeOpen?: boolean;
  dryRun?: boolean;
  json?: boolean;
}

/** `backups prune`: exit 0, or 1 when a size budget cannot be met (or anything failed), 2 for bad values. */
export async function pruneCommand(io: Io, options: PruneCommandOptions, env = process.env): Promise<number> {
  let keepLast: number | undefined;
  let olderThan: OlderThan | undefined;
  let maxSizeBytes: number | undefined;
  try {
    if (options.keepLast !== undefined) keepLast = parseCount(options.keepLast);
    if (options.olderThan !== undefined) olderThan = parseOlderThan(options.olderThan);
    if (options.maxSize !== undefined) maxSizeBytes = parseSize(options.maxSize);
  } catch (error) {
    if (!(error instanceof BrokerError && error.code === ErrorCodes.INVALID_OPTIONS)) throw error;
    io.err(`brokered-shell: ${describeError(error)}`);
    return ExitCode.USAGE;
  }
  const report = await pruneBackups({
    home: resolveHome(env),
    ...(options.session === undefined ? {} : { sessionId: options.session }),
    ...(keepLast === undefined ? {} : { keepLast }),
    ...(olderThan === undefined ? {} : { olderThan }),
    ...(maxSizeBytes === undefined ? {} : { maxSizeBytes }),
    includeNewest: options.includeNewest ?? false,
    includeOpen: options.includeOpen ?? false,
    dryRun: options.dryRun ?? false,
  });
  if (options.json) printJson(io, report);
  else printPrune(io, report);
  if (report.budget && !report.budget.met) {
    io.err(
      `over budget: ${formatBytes(report.storedBytes.after)} ${report.dryRun ? 'would stay' : 'stay'}, the budget is ${formatBytes(report.budget.maxBytes)}; ` +
        'the rest belongs to turns that are always kept (see above) or to blobs written in the last hour',
    );
    return ExitCode.FAILURE;
  }
  return ExitCode.OK;
}

function printPrune(io: Io, report: PruneReport): void {
  const n = report.pruned.length;
  if (n === 0) io.out(report.dryRun ? 'no turns would be pruned' : 'no turns pruned');
  else {
    io.out(report.dryRun ? `would prune ${plural(n, 'turn')}:` : `pruned ${plural(n, 'turn')}:`);
    const rows = report.pruned.map((t) => [
      t.sessionId,
      t.turnId,
      t.committedAt ?? 'open',
      String(t.files),
      t.reasons.join(','),
      firstLine(t.message),
    ]);
    io.out(table([['SESSION', 'TURN', 'COMMITTED', 'FILES', 'WHY', 'MESSAGE'], ...rows]));
  }
  for (const h of report.held) {
    const why =
      h.why === 'newest'
        ? 'the newest turn of its session (--include-newest lets it go)'
        : h.why === 'open'
          ? 'open, not committed (--include-open lets it go)'
          : 'open and written to in the last hour (never pruned)';
    io.out(`kept ${printable(h.turnId)} of session ${printable(h.sessionId)}: ${why}`);
  }
  const { gc } = report;
  const verb = report.dryRun ? 'would remove' : 'removed';
  const blobs = [`${verb} ${plural(gc.blobsRemoved, 'unreferenced blob')} (${formatBytes(gc.bytesFreed)})`];
  if (gc.blobsKeptRecent > 0) blobs.push(`kept ${plural(gc.blobsKeptRecent, 'unreferenced blob')} written in the last hour (${formatBytes(gc.bytesKeptRecent)})`);
  if (gc.tempsRemoved > 0) blobs.push(`${verb} ${plural(gc.tempsRemoved, 'stale temp file')}`);
  io.out(`blobs: ${blobs.join('; ')}`);
  const budget = report.budget ? ` (budget ${formatBytes(report.budget.maxBytes)}: ${report.budget.met ? 'met' : 'NOT met'})` : '';
  io.out(`stored: ${formatBytes(report.storedBytes.before)} -> ${formatBytes(report.storedBytes.after)}${budget}`);
  if (report.dryRun) io.out('dry run: nothing was changed');
}

/** `backups stats`. */
export async function statsCommand(io: Io, options: { session?: string; json?: boolean }, env = process.env): Promise<number> {
  const report = await backupStats({ home: resolveHome(env), ...(options.session === undefined ? {} : { sessionId: options.session }) });
  // As `list` does: a turn left out is named, and the figures are not given as whole.
  const status = nameDamagedTurns(io, report.damaged);
  if (options.json) {
    printJson(io, report);
    return status;
  }
  if (report.sessions.length === 0) {
    io.out('no backups yet');
    return status;
  }
  const row = (name: string, s: StatsReport['total']) => [
    name,
    String(s.turns),
    String(s.openTurns),
    String(s.files),
    String(s.blobs),
    formatBytes(s.storedBytes),
    formatBytes(s.logicalBytes),
    s.dedupRatio === null ? '-' : `${s.dedupRatio.toFixed(2)}x`,
    formatBytes(s.unreferencedBytes),
  ];
  const rows = report.sessions.map((s) => row(s.sessionId, s));
  if (options.session === undefined) rows.push(row('total', report.total));
  io.out(table([['SESSION', 'TURNS', 'OPEN', 'FILES', 'BLOBS', 'STORED', 'LOGICAL', 'DEDUP', 'UNREFERENCED'], ...rows]));
  if (report.damaged.length > 0) io.out('turns that cannot be read are not counted; their blobs count as unreferenced');
  return status;
}

const UNITS = ['KiB', 'MiB', 'GiB', 'TiB'] as const;

/** `512 B`, `1.5 KiB`, `20.0 MiB`: powers of 1024, as `--max-size` reads them. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  let value = bytes;
  let unit: string = 'B';
  for (const next of UNITS) {
    if (value < 1024) break;
    value /= 1024;
    unit = next;
  }
  return `${value.toFixed(1)} ${unit}`;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}
