// What a restore or a rewind did, and the explicit confirmation that forcing needs.
import { useState } from 'preact/hooks';
import { html } from './html.js';
import { plural, turnHref, visible } from './format.js';

/** @typedef {import('./api-types').RestoreReport} RestoreReport */
/** @typedef {import('./api-types').Conflict} Conflict */
/** @typedef {import('./api-types').Outcome} Outcome */

/** Conflicts a forced restore resolves; a directory in the way or a changed parent never are. */
const FORCEABLE = new Set(['changed-since-turn', 'not-committed', 'occupied-by-special-file']);

const REASON = {
  'changed-since-turn': 'changed since the turn',
  'not-committed': 'the turn was never committed',
  'occupied-by-directory': 'a directory is there now; it is never replaced',
  'occupied-by-special-file': 'a special file is there now',
  'parent-changed': 'its folder changed; restore never writes through it',
};

/** How a restored path was restored, when it is more than its content put back. */
const ACTION = { recreate: ' (recreated)', remove: ' (removed: the turn created it)', metadata: ' (metadata)' };

/** @param {string} reason */
const reasonText = (reason) => (reason in REASON ? REASON[/** @type {keyof typeof REASON} */ (reason)] : reason);

/** @param {{ report: RestoreReport, session: string, rescue?: boolean }} props */
function ReportLists({ report, session, rescue = true }) {
  const verb = report.dryRun ? 'Would restore' : 'Restored';
  return html`
    ${report.restored.length > 0
      ? html`<h4>${verb} (${report.restored.length})</h4>
          <ul class="report-list ok">
            ${report.restored.map(
              (item) =>
                html`<li><code>${visible(item.path)}</code>${item.action in ACTION ? ACTION[/** @type {keyof typeof ACTION} */ (item.action)] : ''}${item.forced ? ' (forced)' : ''}</li>`,
            )}
          </ul>`
      : null}
    ${report.skipped.length > 0
      ? html`<h4>Left as they are (${report.skipped.length})</h4>
          <ul class="report-list">
            ${report.skipped.map((item) => html`<li><code>${visible(item.path)}</code>: ${item.detail}</li>`)}
          </ul>`
      : null}
    ${report.conflicts.length > 0
      ? html`<h4>Conflicts (${report.conflicts.length})</h4>
          <ul class="report-list warn">
            ${report.conflicts.map(
              (item) => html`<li><code>${visible(item.path)}</code>: ${reasonText(item.reason)} <span class="note">(${item.detail})</span></li>`,
            )}
          </ul>`
      : null}
    ${report.failed.length > 0
      ? html`<h4>Failed (${report.failed.length})</h4>
          <ul class="report-list bad">
            ${report.failed.map((item) => html`<li><code>${visible(item.path)}</code>: ${item.message} [${item.code}]</li>`)}
          </ul>`
      : null}
    ${report.notInTurn.length > 0
      ? html`<p class="error">Not in this turn, so nothing was restored: ${report.notInTurn.map((p) => html`<code>${p}</code> `)}</p>`
      : null}
    ${rescue && report.rescueTurnId
      ? html`<p class="rescue">
          What was replaced is kept in turn <a href=${turnHref(session, report.rescueTurnId)}><code>${report.rescueTurnId}</code></a>; restore that turn to undo this.
        </p>`
      : null}
  `;
}

/**
 * The force confirmation: nothing is forced until the person ticks the box and presses.
 * @param {{ conflicts: Conflict[], busy: boolean, action: string, onForce: () => void }} props
 */
function ForceConfirm({ conflicts, busy, action, onForce }) {
  const [confirmed, setConfirmed] = useState(false);
  const forceable = conflicts.filter((c) => FORCEABLE.has(c.reason));
  if (forceable.length === 0) return null;
  return html`
    <fieldset class="force">
      <legend>Replace files that changed?</legend>
      <p>
        ${plural(forceable.length, 'file is', 'files are')} not as the turn left ${forceable.length === 1 ? 'it' : 'them'}.
        Forcing replaces what is there now; that is first kept in a rescue turn, so it can be undone.
      </p>
      <label><input type="checkbox" checked=${confirmed} onChange=${(/** @type {Event} */ e) => setConfirmed(/** @type {HTMLInputElement} */ (e.currentTarget).checked)} />
        Replace ${plural(forceable.length, 'file')} anyway</label>
      <button type="button" class="danger" disabled=${!confirmed || busy} onClick=${onForce}>${action}</button>
    </fieldset>
  `;
}

/** @param {{ outcome: Outcome, session: string, busy: boolean, onForceRestore: (paths: string[]) => void, onForceRewind: () => void }} props */
export function Report({ outcome, session, busy, onForceRestore, onForceRewind }) {
  if (outcome.type === 'error') return html`<p class="error" role="alert">${outcome.message}</p>`;
  if (outcome.type === 'restore') {
    const { report, refused } = outcome.result;
    const forceable = report.conflicts.filter((c) => FORCEABLE.has(c.reason)).map((c) => c.path);
    return html`
      <h3>${refused ? 'Nothing was restored' : outcome.paths ? 'Restore of one file' : 'Restore of the whole turn'}</h3>
      <${ReportLists} report=${report} session=${session} />
      ${!refused && report.restored.length === 0 && report.conflicts.length === 0 && report.failed.length === 0
        ? html`<p>Nothing needed restoring.</p>`
        : null}
      <${ForceConfirm} conflicts=${report.conflicts} busy=${busy} action="Force restore" onForce=${() => onForceRestore(forceable)} />
    `;
  }
  const result = outcome.result;
  const last = result.turns[result.turns.length - 1];
  return html`
    <h3>Rewind to before <code>${result.to}</code>: ${result.complete ? 'done' : 'stopped'}</h3>
    ${result.complete
      ? html`<p>${plural(result.turns.length, 'turn')} restored, newest first.</p>`
      : last && last.failed.length > 0
        ? html`<p>Stopped after failures in turn <code>${result.stoppedAt}</code>; older turns were not touched.</p>`
        : html`<p>Stopped at turn <code>${result.stoppedAt}</code>: it has conflicts, so nothing of it, nor of older turns, was changed.</p>`}
    <ol class="steps">
      ${result.turns.map(
        (report) => html`
          <li>
            <h4>Turn <a href=${turnHref(session, report.turnId)}><code>${report.turnId}</code></a></h4>
            <${ReportLists} report=${report} session=${session} rescue=${false} />
          </li>
        `,
      )}
    </ol>
    ${result.rescueTurnId
      ? html`<p class="rescue">
          What the rewind replaced is kept in turn <a href=${turnHref(session, result.rescueTurnId)}><code>${result.rescueTurnId}</code></a>; restore that turn to undo the rewind.
        </p>`
      : null}
    ${!result.complete && last ? html`<${ForceConfirm} conflicts=${last.conflicts} busy=${busy} action="Force rewind" onForce=${onForceRewind} />` : null}
  `;
}
