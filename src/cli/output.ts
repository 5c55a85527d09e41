import { BrokerError } from '../core/errors.js';
import { firstLine, printable } from '../core/printable.js';
import type { DamagedTurn } from '../backup/manifest-io.js';
import { ExitCode } from './exit-codes.js';

export { printable };

/** What brokered-shell itself says goes to stderr; stdout is for results and JSON. */
export interface Io {
  /** A line of text, or bytes put out exactly as they are (a raw diff). */
  out(text: string | Buffer): void;
  err(text: string): void;
}

/**
 * A line to stdout or stderr. A reader that goes away early (`| head`) closes the pipe:
 * what is left to say is dropped, and the command still finishes its work (a `run` still
 * commits its turn) instead of dying on EPIPE.
 */
function lineWriter(stream: NodeJS.WriteStream): (text: string | Buffer) => void {
  let watched = false;
  return (text) => {
    if (!watched) {
      watched = true;
      stream.on('error', (error: NodeJS.ErrnoException) => {
        if (error.code !== 'EPIPE') throw error;
      });
    }
    if (stream.destroyed) return;
    if (typeof text === 'string') stream.write(text.endsWith('\n') ? text : `${text}\n`);
    else stream.write(text.at(-1) === 0x0a ? text : Buffer.concat([text, NEWLINE]));
  };
}

const NEWLINE = Buffer.from('\n');

export const processIo: Io = { out: lineWriter(process.stdout), err: lineWriter(process.stderr) };

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

/**
 * Name each turn left out because it cannot be read: it is still a turn that changed files.
 * Returns the status of a command that had to leave some out.
 */
export function nameDamagedTurns(io: Io, damaged: readonly DamagedTurn[]): number {
  for (const d of damaged) io.err(`brokered-shell: turn ${printable(d.name)} of session ${printable(d.sessionId)} cannot be read, left out: ${printable(firstLine(d.reason))}`);
  return damaged.length > 0 ? ExitCode.FAILURE : ExitCode.OK;
}
