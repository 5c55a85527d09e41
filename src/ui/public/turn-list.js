// The sidebar: every session, newest activity first, and its turns, newest first.
import { html } from './html.js';
import { firstLine, formatTime, plural, turnHref } from './format.js';

/** @typedef {import('./api-types').SessionSummary} SessionSummary */

/** @param {SessionSummary} session */
const lastStart = (session) => session.turns.reduce((latest, t) => (t.startedAt > latest ? t.startedAt : latest), '');

/**
 * @param {{
 *   sessions: SessionSummary[],
 *   selected: { session: string, turn: string } | undefined,
 * }} props
 */
export function TurnList({ sessions, selected }) {
  if (sessions.length === 0) return html`<p class="placeholder">No backups yet. Turns appear here once a command changed a file.</p>`;
  const ordered = [...sessions].sort((a, b) => (lastStart(a) < lastStart(b) ? 1 : -1));
  return ordered.map(
    (session, index) => html`
      <section class="session" aria-labelledby=${`session-${index}`}>
        <h2 id=${`session-${index}`}>Session <code>${session.id}</code></h2>
        <ol class="turns">
          ${[...session.turns].reverse().map((turn) => {
            const current = selected?.session === session.id && selected.turn === turn.id;
            return html`
              <li key=${turn.id}>
                <a class="turn-link" href=${turnHref(session.id, turn.id)} aria-current=${current ? 'page' : undefined}>
                  <span class="turn-top">
                    <span class=${`badge kind-${turn.kind}`}>${turn.kind}</span>
                    <time datetime=${turn.startedAt}>${formatTime(turn.startedAt)}</time>
                  </span>
                  <span class="turn-message">${firstLine(turn.message) || (turn.committedAt ? '(no message)' : '(open turn)')}</span>
                  <span class="turn-meta"
                    ><code>${turn.id}</code> · ${plural(turn.fileCount, 'file')}${turn.otherCount > 0 ? ` + ${plural(turn.otherCount, 'other path')}` : ''}${turn.committedAt ? '' : ' · open'}</span
                  >
                </a>
              </li>
            `;
          })}
        </ol>
      </section>
    `,
  );
}
