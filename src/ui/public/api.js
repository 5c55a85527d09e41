// The viewer's JSON API (src/ui/api.ts). The printed address carries the secret in its
// fragment (`#t=SECRET`); it moves into this tab's sessionStorage, which belongs to this
// port alone (a cookie would reach every port of 127.0.0.1), and leaves the address bar.
// Every call sends it as a bearer token; writes are JSON POSTs from this origin.

/** @typedef {import('./api-types').SessionsAnswer} SessionsAnswer */
/** @typedef {import('./api-types').TurnView} TurnView */
/** @typedef {import('./api-types').DiffView} DiffView */
/** @typedef {import('./api-types').RestoreAnswer} RestoreAnswer */
/** @typedef {import('./api-types').RewindReport} RewindReport */
/** @typedef {import('./api-types').RewindPlanAnswer} RewindPlanAnswer */

const SECRET_KEY = 'brokered-shell-viewer-secret';
const FORBIDDEN =
  'This page does not hold the viewer\'s secret (the viewer was restarted, or this tab was not opened from its address). ' +
  'Open the address that `brokered-shell backups ui` printed.';

/** Take the secret out of the address, if it is there, before anything reads the fragment. */
function takeSecretFromAddress() {
  const match = /^#t=([A-Za-z0-9_-]+)$/.exec(location.hash);
  if (!match?.[1]) return;
  sessionStorage.setItem(SECRET_KEY, match[1]);
  history.replaceState(null, '', `${location.pathname}${location.search}`);
}
takeSecretFromAddress();

/** @param {unknown} value @param {string} fallback */
function errorText(value, fallback) {
  if (typeof value === 'object' && value !== null && 'error' in value && typeof value.error === 'string') return value.error;
  return fallback;
}

/**
 * @template T
 * @param {'GET' | 'POST'} method
 * @param {string} path
 * @param {unknown} [body]
 * @returns {Promise<T>}
 */
async function call(method, path, body) {
  const secret = sessionStorage.getItem(SECRET_KEY);
  if (secret === null) throw new Error(FORBIDDEN);
  /** @type {Record<string, string>} */
  const headers = { authorization: `Bearer ${secret}` };
  /** @type {RequestInit} */
  const init = { credentials: 'omit', headers };
  if (method === 'POST') {
    init.method = 'POST';
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  /** @type {unknown} */
  let value;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  if (response.status === 403) throw new Error(FORBIDDEN);
  if (!response.ok) throw new Error(errorText(value, `${response.status} ${text.trim()}`));
  return /** @type {T} */ (value);
}

/** @param {Record<string, string>} params */
const query = (params) => new URLSearchParams(params).toString();

export const api = {
  /** @returns {Promise<SessionsAnswer>} */
  sessions: () => call('GET', '/api/sessions'),
  /** @param {string} session @param {string} turn @returns {Promise<{ turn: TurnView }>} */
  turn: (session, turn) => call('GET', `/api/turn?${query({ session, turn })}`),
  /** @param {string} session @param {string} turn @param {string} path @returns {Promise<{ path: string, diff: DiffView }>} */
  diff: (session, turn, path) => call('GET', `/api/diff?${query({ session, turn, path })}`),
  /** @param {string} session @param {string} turn @returns {Promise<RewindPlanAnswer>} */
  rewindPlan: (session, turn) => call('GET', `/api/rewind-plan?${query({ session, turn })}`),
  /** @param {{ session: string, turn: string, paths?: string[], force?: boolean }} body @returns {Promise<RestoreAnswer>} */
  restore: (body) => call('POST', '/api/restore', body),
  /** @param {{ session: string, turn: string, turns: string[], force?: boolean }} body @returns {Promise<RewindReport>} */
  rewind: (body) => call('POST', '/api/rewind', body),
};

/** @param {unknown} failure */
export const messageOf = (failure) => (failure instanceof Error ? failure.message : String(failure));
