import { isUtf8 } from 'node:buffer';
import { createTwoFilesPatch } from 'diff';
import { BIDI_CONTROLS, escapeChar } from '../core/printable.js';

const BINARY_PROBE_BYTES = 8000;
/**
 * Lines added plus removed past which the diff gives up: the algorithm's cost grows with
 * the square of it (a 20,000-line rewrite took minutes, on the viewer's only thread),
 * and at 2,000 it stops within a second here.
 */
export const MAX_EDIT_LENGTH = 2000;

/** Git's heuristic: a NUL byte near the start means binary. */
export function isBinary(bytes: Buffer): boolean {
  return bytes.subarray(0, BINARY_PROBE_BYTES).includes(0);
}

const paint = (code: string, text: string) => `\u001b[${code}m${text}\u001b[0m`;
export const octal = (mode: number) => mode.toString(8).padStart(4, '0');

export interface RenderDiffOptions {
  color: boolean;
  /** Permission bits of the backup and of the file now; a difference is shown git-style. */
  modes?: { before: number; now?: number };
}

/**
 * Control characters a terminal would act on (tab and newline stay as they are), and the
 * bidirectional marks and overrides that would show a line's characters in another order.
 */
const CONTENT_CONTROL = new RegExp(`[\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f${BIDI_CONTROLS}]`, 'g');

/**
 * File content as text a terminal (or the viewer) shows as it is: an escape sequence in
 * a model-written file cannot move the cursor or erase the lines around it, a bidi
 * override cannot reorder a line (`\u202e`), and a byte that is not UTF-8 reads `\xe9`
 * rather than vanishing into U+FFFD.
 */
export function escapeContent(bytes: Buffer): string {
  const text = isUtf8(bytes) ? bytes.toString('utf8') : decodeWithEscapes(bytes);
  return text.replace(CONTENT_CONTROL, escapeChar);
}

/** UTF-8 where a sequence is valid, `\xNN` for each byte where it is not. */
function decodeWithEscapes(bytes: Buffer): string {
  let out = '';
  let start = 0;
  let i = 0;
  while (i < bytes.length) {
    const length = validSequenceAt(bytes, i);
    if (length > 0) {
      i += length;
      continue;
    }
    out += bytes.toString('utf8', start, i) + escapeChar(String.fromCharCode(bytes[i] ?? 0));
    i++;
    start = i;
  }
  return out + bytes.toString('utf8', start);
}

/** The length of the well-formed UTF-8 sequence at `i` (RFC 3629: no overlongs, surrogates or code points past U+10FFFF), or 0. */
function validSequenceAt(bytes: Buffer, i: number): number {
  const lead = bytes[i] ?? 0;
  if (lead < 0x80) return 1;
  const length = lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3 : lead >= 0xf0 && lead <= 0xf4 ? 4 : 0;
  if (length === 0 || i + length > bytes.length) return 0;
  return isUtf8(bytes.subarray(i, i + length)) ? length : 0;
}

/** `old mode`/`new mode` lines when the permission bits changed (git's wording). */
function modeLines(options: RenderDiffOptions): string[] {
  const modes = options.modes;
  if (!modes || modes.now === undefined || modes.now === modes.before) return [];
  return [`old mode ${octal(modes.before)}`, `new mode ${octal(modes.now)}`];
}

/**
 * A unified diff from the backup (before the turn) to what is on disk now; `now`
 * undefined means the file is gone, `before` undefined that the turn created it (either
 * side is then /dev/null, like git). Content is escaped for a terminal (`escapeContent`).
 */
export function renderDiff(path: string, before: Buffer | undefined, now: Buffer | undefined, options: RenderDiffOptions): string {
  return diffText(path, before, now, options, escapeContent);
}

/**
 * The same diff with the files' bytes exactly as they are (for a pipe: a patch that
 * applies, whatever the encoding). The hunks are built one byte per character and
 * encoded back so; the lines before them (names, modes, verdicts) are text, in UTF-8.
 */
export function renderDiffBytes(path: string, before: Buffer | undefined, now: Buffer | undefined, options: Omit<RenderDiffOptions, 'color'>): Buffer {
  const lines = diffText(path, before, now, { ...options, color: false }, (bytes) => bytes.toString('latin1')).split('\n');
  const firstHunk = lines.findIndex((line) => line.startsWith('@@'));
  if (firstHunk < 0) return Buffer.from(lines.join('\n'), 'utf8');
  return Buffer.concat([Buffer.from(lines.slice(0, firstHunk).map((line) => `${line}\n`).join(''), 'utf8'), Buffer.from(lines.slice(firstHunk).join('\n'), 'latin1')]);
}

function diffText(path: string, before: Buffer | undefined, now: Buffer | undefined, options: RenderDiffOptions, decode: (bytes: Buffer) => string): string {
  const modes = now === undefined || before === undefined ? [] : modeLines(options);
  const header = (lines: string[]) => (options.color ? lines.map((l) => paint('1', l)) : lines);
  if (now !== undefined && before?.equals(now)) {
    if (modes.length === 0) return `${path}: unchanged since the backup`;
    return [`${path}: content unchanged since the backup`, ...header(modes)].join('\n');
  }
  const oldName = before === undefined ? '/dev/null' : `${path} (backup)`;
  const newName = now === undefined ? '/dev/null' : `${path} (now)`;
  if ((before !== undefined && isBinary(before)) || (now !== undefined && isBinary(now))) {
    const beforePart = before === undefined ? '/dev/null' : `${path} (backup, ${before.length} B)`;
    const nowPart = now === undefined ? '/dev/null' : `${path} (now, ${now.length} B)`;
    return [...header(modes), `Binary files ${beforePart} and ${nowPart} differ`].join('\n');
  }
  const patch = createTwoFilesPatch(oldName, newName, before === undefined ? '' : decode(before), now === undefined ? '' : decode(now), undefined, undefined, {
    maxEditLength: MAX_EDIT_LENGTH,
  });
  if (patch === undefined) {
    const lines = (bytes: Buffer | undefined) => (bytes === undefined ? 0 : bytes.reduce((count, byte) => count + (byte === 0x0a ? 1 : 0), 0));
    return [...header(modes), `${path}: over ${MAX_EDIT_LENGTH} lines changed, too many to diff line by line (${lines(before)} lines in the backup, ${lines(now)} now)`].join('\n');
  }
  // The library opens with a line of '=' that neither diff(1) nor git prints.
  // Only the final newline goes: trimming whitespace would take a CRLF file's last '\r' with it.
  const lines = (patch.endsWith('\n') ? patch.slice(0, -1) : patch).split('\n');
  if (lines[0]?.startsWith('====')) lines.shift();
  if (!options.color) return [...modes, ...lines].join('\n');
  // Only lines before the first hunk are headers: a removed line "-- x" reads "--- x" in a hunk.
  let inHunks = false;
  const painted = lines.map((line) => {
    if (line.startsWith('@@')) {
      inHunks = true;
      return paint('36', line);
    }
    if (!inHunks) return paint('1', line);
    if (line.startsWith('+')) return paint('32', line);
    if (line.startsWith('-')) return paint('31', line);
    return line;
  });
  return [...header(modes), ...painted].join('\n');
}

/** What a symlink's backup says against what is at its path now (`beforeTarget` undefined: the turn created it). */
export function renderLinkDiff(
  path: string,
  beforeTarget: string | undefined,
  now: { type: 'absent' } | { type: 'symlink'; target: string } | { type: 'other'; what: string },
  options: { color: boolean },
): string {
  if (now.type === 'symlink' && now.target === beforeTarget) return `${path}: symlink unchanged since the backup (-> ${beforeTarget})`;
  const was = beforeTarget === undefined ? [] : [`-symlink -> ${beforeTarget}`];
  const is = now.type === 'absent' ? [] : now.type === 'symlink' ? [`+symlink -> ${now.target}`] : [`+${now.what}`];
  const lines = [`--- ${beforeTarget === undefined ? '/dev/null' : `${path} (backup)`}`, `+++ ${now.type === 'absent' ? '/dev/null' : `${path} (now)`}`, ...was, ...is];
  if (!options.color) return lines.join('\n');
  return lines.map((line, i) => (i < 2 ? paint('1', line) : paint(line.startsWith('+') ? '32' : '31', line))).join('\n');
}
