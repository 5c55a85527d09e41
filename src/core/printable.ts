/** The bidirectional marks, embeddings, overrides and isolates that show characters in another order (a regex class body). */
export const BIDI_CONTROLS = '\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069';
const CONTROL = new RegExp(`[\\u0000-\\u001f\\u007f-\\u009f${BIDI_CONTROLS}]`, 'g');
const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** One character as the escape that shows it: `\n`, `\x1b`, `\u202e`. */
export function escapeChar(c: string): string {
  const code = c.charCodeAt(0);
  return NAMED[c] ?? (code > 0xff ? `\\u${code.toString(16).padStart(4, '0')}` : `\\x${code.toString(16).padStart(2, '0')}`);
}

/**
 * Text safe for one terminal line: control characters (newlines, escape sequences a
 * model-written file name or message may hold) are shown as escapes, never sent raw, and
 * so are bidi overrides (`invoice\u202etxt.exe` would read "invoiceexe.txt").
 */
export function printable(text: string): string {
  return text.replace(CONTROL, escapeChar);
}

/** A message on one table row: its first line, marked when there is more. */
export function firstLine(message: string | null): string {
  if (message === null) return '';
  const [first = '', ...rest] = message.split('\n');
  return rest.some((line) => line.trim() !== '') ? `${first} …` : first;
}
