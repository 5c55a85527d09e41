// Small formatting helpers shared by the components.

/** @param {string | null | undefined} iso */
export function formatTime(iso) {
  if (!iso) return '';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  const pad = (/** @type {number} */ n) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

// Control characters and bidi overrides, as the command line escapes them (src/core/printable.ts).
const HIDDEN = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * A model-written name, link target or message as it is stored: an escape sequence or a
 * bidi override shows as `\x1b` or `\u202e` instead of reordering or hiding what follows
 * (`invoice\u202etxt.exe` would read "invoiceexe.txt"). Newlines stay unless `oneLine`.
 * @param {string} text @param {boolean} [oneLine]
 */
export function visible(text, oneLine = true) {
  const escaped = text.replace(HIDDEN, (c) => {
    const code = c.charCodeAt(0);
    return code === 9 ? '\\t' : code > 0xff ? `\\u${code.toString(16).padStart(4, '0')}` : `\\x${code.toString(16).padStart(2, '0')}`;
  });
  return oneLine ? escaped.replaceAll('\n', '\\n') : escaped;
}

/** @param {string | null | undefined} message */
export function firstLine(message) {
  if (!message) return '';
  const [first = '', ...rest] = message.split('\n');
  return visible(rest.some((line) => line.trim() !== '') ? `${first} …` : first);
}

/** @param {number} bytes */
export function formatSize(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/** @param {number} mode */
export const octal = (mode) => mode.toString(8).padStart(4, '0');

/** @param {number} n @param {string} one @param {string} [many] */
export const plural = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** @param {string} path */
export const baseName = (path) => path.slice(path.lastIndexOf('/') + 1) || path;

/** The hash address of one turn: the page's only navigation. */
/** @param {string} session @param {string} turn */
export const turnHref = (session, turn) => `#/session/${encodeURIComponent(session)}/turn/${encodeURIComponent(turn)}`;

/** @returns {{ session: string, turn: string } | undefined} */
export function readHash() {
  const match = /^#\/session\/([^/]+)\/turn\/([^/]+)$/.exec(location.hash);
  if (!match || match[1] === undefined || match[2] === undefined) return undefined;
  try {
    return { session: decodeURIComponent(match[1]), turn: decodeURIComponent(match[2]) };
  } catch {
    return undefined;
  }
}
