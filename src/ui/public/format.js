// Small formatting helpers shared by the components.

/** @param {string | null | undefined} iso */
export function formatTime(iso) {
  if (!iso) return '';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  const pad = (/** @type {number} */ n) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

/** @param {string | null | undefined} message */
export function firstLine(message) {
  if (!message) return '';
  const [first = '', ...rest] = message.split('\n');
  return rest.some((line) => line.trim() !== '') ? `${first} …` : first;
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
