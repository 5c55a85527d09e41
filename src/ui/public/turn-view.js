// One turn: what it is, the whole-turn actions, the report of the last action, its files.
import { useEffect, useRef, useState } from 'preact/hooks';
import { html } from './html.js';
import { api, messageOf } from './api.js';
import { FileCard } from './file-card.js';
import { firstLine, formatTime, plural, turnHref, visible } from './format.js';
import { Report } from './report.js';

/** @typedef {import('./api-types').TurnView} TurnView */
/** @typedef {import('./api-types').RewindPlanAnswer} RewindPlanAnswer */
/** @typedef {import('./api-types').Outcome} Outcome */

/** Diffs shown without a click, for the first files of a turn. */
const OPEN_DIFFS = 8;

/** @param {{ session: string, turn: string, onChanged: () => void }} props */
export function TurnView({ session, turn, onChanged }) {
  const [view, setView] = useState(/** @type {TurnView | null} */ (null));
  const [error, setError] = useState(/** @type {string | null} */ (null));
  const [version, setVersion] = useState(0);
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState(/** @type {Outcome | null} */ (null));
  const [outcomeId, setOutcomeId] = useState(0);
  const [plan, setPlan] = useState(/** @type {RewindPlanAnswer | null} */ (null));
  const reportRef = useRef(/** @type {HTMLElement | null} */ (null));
  const confirmed = useRef(/** @type {string[]} */ ([]));

  useEffect(() => {
    let live = true;
    api.turn(session, turn).then(
      (answer) => live && (setView(answer.turn), setError(null)),
      (failure) => live && setError(messageOf(failure)),
    );
    return () => {
      live = false;
    };
  }, [session, turn, version]);

  // A finished action's report takes the focus, so it is read out and seen.
  useEffect(() => {
    if (outcome) reportRef.current?.focus();
  }, [outcomeId]);

  /** @param {() => Promise<Outcome>} task */
  async function act(task) {
    setBusy(true);
    /** @type {Outcome} */
    let next;
    try {
      next = await task();
    } catch (failure) {
      next = { type: 'error', message: messageOf(failure) };
    }
    setOutcome(next);
    setOutcomeId((n) => n + 1);
    setBusy(false);
    setVersion((n) => n + 1);
    onChanged();
  }

  /** @param {string[] | undefined} paths @param {boolean} force */
  const restore = (paths, force) =>
    act(async () => ({ type: /** @type {const} */ ('restore'), paths, result: await api.restore({ session, turn, ...(paths ? { paths } : {}), force }) }));
  /** @param {boolean} force */
  const rewind = (force) =>
    act(async () => {
      setPlan(null);
      // The turns the person confirmed: the server refuses if the plan has changed since.
      return { type: /** @type {const} */ ('rewind'), result: await api.rewind({ session, turn, turns: confirmed.current, force }) };
    });
  const askRewind = () =>
    api.rewindPlan(session, turn).then(
      (answer) => ((confirmed.current = answer.turns.map((t) => t.id)), setPlan(answer)),
      (failure) => (setOutcome({ type: 'error', message: messageOf(failure) }), setOutcomeId((n) => n + 1)),
    );

  if (error && !view) return html`<p class="error" role="alert">${error}</p>`;
  if (!view) return html`<p class="placeholder">Loading turn…</p>`;
  // As `backups restore` does, paths without content that need nothing are counted, not shown.
  const dull = (/** @type {import('./api-types').FileView} */ file) => (file.kind === 'absent' || file.kind === 'directory' || file.kind === 'special') && file.status === 'as-before';
  const shown = view.files.filter((file) => !dull(file));
  const quiet = view.files.filter(dull);
  const card = (/** @type {import('./api-types').FileView} */ file, /** @type {boolean} */ startOpen) => html`<${FileCard}
    key=${file.path}
    file=${file}
    session=${session}
    turn=${view.id}
    startOpen=${startOpen}
    busy=${busy}
    onRestore=${(/** @type {string[]} */ paths) => restore(paths, false)}
  />`;
  return html`
    <article class="turn" aria-labelledby="turn-title">
      <header class="turn-header">
        <h2 id="turn-title">Turn <code>${view.id}</code> <span class=${`badge kind-${view.kind}`}>${view.kind}</span></h2>
        <p class="message">${view.message === null ? '(not committed yet)' : visible(view.message, false)}</p>
        <dl class="facts">
          <dt>Session</dt><dd><code>${view.sessionId}</code></dd>
          <dt>Started</dt><dd><time datetime=${view.startedAt}>${formatTime(view.startedAt)}</time></dd>
          <dt>Committed</dt><dd>${view.committedAt ? html`<time datetime=${view.committedAt}>${formatTime(view.committedAt)}</time>` : 'no (open)'}</dd>
          <dt>Backed up</dt><dd>${plural(view.fileCount, 'file')}${view.otherCount > 0 ? `, ${plural(view.otherCount, 'other path')} (created by the turn, or directories)` : ''}</dd>
          ${view.restoreOf
            ? html`<dt>Restore of</dt><dd><a href=${turnHref(view.sessionId, view.restoreOf)}><code>${view.restoreOf}</code></a></dd>`
            : null}
        </dl>
        ${view.kind === 'restore'
          ? html`<p class="note">This turn holds what a restore replaced. Restoring it undoes that restore.</p>`
          : null}
        <div class="turn-actions">
          <button type="button" class="primary" disabled=${busy || view.files.length === 0} onClick=${() => restore(undefined, false)}>
            Restore whole turn
          </button>
          ${view.kind === 'turn'
            ? html`<button type="button" disabled=${busy} onClick=${askRewind}>Rewind to before this turn…</button>`
            : null}
        </div>
        ${plan ? html`<${RewindConfirm} plan=${plan} busy=${busy} onRewind=${() => rewind(false)} onCancel=${() => setPlan(null)} />` : null}
      </header>
      <section class="report" aria-live="polite" aria-busy=${busy} tabindex="-1" ref=${reportRef} aria-label="What the last action did">
        ${busy ? html`<p class="note">Working…</p>` : null}
        ${outcome
          ? html`<${Report}
              key=${outcomeId}
              outcome=${outcome}
              session=${session}
              busy=${busy}
              onForceRestore=${(/** @type {string[]} */ paths) => restore(paths, true)}
              onForceRewind=${() => rewind(true)}
            />`
          : null}
      </section>
      <section aria-labelledby="files-title">
        <h3 id="files-title">Changed paths (${view.files.length})</h3>
        ${view.files.length === 0 ? html`<p class="placeholder">This turn backed up nothing.</p>` : null}
        <ul class="files">
          ${shown.map((file, index) => card(file, index < OPEN_DIFFS))}
        </ul>
        ${quiet.length > 0
          ? html`<details class="quiet">
              <summary>${plural(quiet.length, 'more path')} without content, already as before the turn (files it created and removed again, directories)</summary>
              <ul class="files">
                ${quiet.map((file) => card(file, false))}
              </ul>
            </details>`
          : null}
      </section>
    </article>
  `;
}

/**
 * The rewind's confirmation: the turns it restores and what its dry run found.
 * @param {{ plan: RewindPlanAnswer, busy: boolean, onRewind: () => void, onCancel: () => void }} props
 */
function RewindConfirm({ plan, busy, onRewind, onCancel }) {
  const { turns, preview } = plan;
  const byTurn = new Map(preview.turns.map((report) => [report.turnId, report]));
  return html`
    <div class="confirm" role="group" aria-labelledby="rewind-title">
      <h3 id="rewind-title">Rewind to before this turn?</h3>
      <p>
        This restores ${turns.length === 1 ? 'this turn' : `these ${turns.length} turns, newest first`}. Everything it replaces is kept in
        one rescue turn, so the rewind can be undone.
      </p>
      <ol>
        ${turns.map((t) => {
          const report = byTurn.get(t.id);
          const found = report
            ? [
                report.restored.length > 0 ? `restores ${plural(report.restored.length, 'path')}` : 'nothing to restore',
                report.conflicts.length > 0 ? plural(report.conflicts.length, 'conflict') : '',
              ]
                .filter(Boolean)
                .join(', ')
            : 'not reached';
          return html`<li><code>${t.id}</code> ${firstLine(t.message)} <span class="note">(${found})</span></li>`;
        })}
      </ol>
      ${preview.stoppedAt
        ? html`<p class="warn-text">
            The dry run stops at turn <code>${preview.stoppedAt}</code>: files there changed since the turn. The rewind will stop there too, and
            ask before forcing.
          </p>`
        : null}
      <button type="button" class="primary" disabled=${busy} onClick=${onRewind}>Rewind ${plural(turns.length, 'turn')}</button>
      <button type="button" onClick=${onCancel}>Cancel</button>
    </div>
  `;
}
