import { BrokerError } from '../core/errors.js';

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

const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;
const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/**
 * Text safe for one terminal line: control characters (newlines, escape sequences a
 * model-written file name or message may hold) are shown as escapes, never sent raw.
 */
export function printable(text: string): string {
  return text.replace(CONTROL, (c) => NAMED[c] ?? `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

/** A plain-text table with aligned columns; cells are made printable first. */
export function table(rows: string[][]): string {
  const safe = rows.map((row) => row.map(printable));
  const widths: number[] = [];
  for (const row of safe) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return safe.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join('  ')).join('\n');
}
