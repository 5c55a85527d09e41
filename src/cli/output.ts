import { BrokerError } from '../core/index.js';

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

export function describeError(error: unknown): string {
  if (error instanceof BrokerError) return `${error.message} [${error.code}]`;
  return error instanceof Error ? error.message : String(error);
}

/** A plain-text table with aligned columns. */
export function table(rows: string[][]): string {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return rows.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join('  ')).join('\n');
}
