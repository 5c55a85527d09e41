const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;
const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/**
 * Text safe for one terminal line: control characters (newlines, escape sequences a
 * model-written file name or message may hold) are shown as escapes, never sent raw.
 */
export function printable(text: string): string {
  return text.replace(CONTROL, (c) => NAMED[c] ?? `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

/** A message on one table row: its first line, marked when there is more. */
export function firstLine(message: string | null): string {
  if (message === null) return '';
  const [first = '', ...rest] = message.split('\n');
  return rest.some((line) => line.trim() !== '') ? `${first} …` : first;
}
