import { BrokerError } from '../core/errors.js';
import { printable } from '../core/printable.js';

export { printable };

/** What brokered-shell itself says goes to stderr; stdout is for results and JSON. */
export interface Io {
  out(text: string): void;
  err(text: string): void;
}

export const processIo: Io = {
  out: (text) => void process.stdout.write(text.endsWith('\n') ? text : `${text}\n`),
  err: (text) => void process.stderr.write(text.endsWith('\n') ? text : `${text}\n`),
};

export function printJson(io: Io, value: unknown): void {
  io.out(JSON.stringify(value, null, 2));
}

/**
 * An error for stderr. Its line breaks stay (some messages list things, one per line);
 * any other control character a path or message holds (an escape sequence) is escaped.
 */
export function describeError(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const safe = message.split('\n').map(printable).join('\n');
  return error instanceof BrokerError ? `${safe} [${error.code}]` : safe;
}

/** A plain-text table with aligned columns; cells are made printable first. */
export function table(rows: string[][]): string {
  const safe = rows.map((row) => row.map(printable));
  const widths: number[] = [];
  for (const row of safe) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return safe.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join('  ')).join('\n');
}
