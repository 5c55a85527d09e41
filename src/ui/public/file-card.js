// One path a turn recorded: what was there before the turn, where it stands now, its
// diff (loaded when shown) and a button that restores just this path.
import { useEffect, useState } from 'preact/hooks';
import { html } from './html.js';
import { api, messageOf } from './api.js';
import { DiffView } from './diff-view.js';
import { formatSize, octal, visible } from './format.js';

/** @typedef {import('./api-types').FileView} FileView */
/** @typedef {import('./api-types').DiffView} DiffView */

/** @type {Record<import('./api-types').FileStatus, { label: string, tone: string }>} */
const STATUS = {
  'as-turn-left': { label: 'changed by the turn', tone: 'changed' },
  'as-before': { label: 'as before the turn', tone: 'same' },
  'changed-since': { label: 'changed since the turn', tone: 'warn' },
  'not-committed': { label: 'turn still open', tone: 'warn' },
  'no-content': { label: 'too large: not kept', tone: 'muted' },
};

/** @param {import('./api-types').AfterState} now */
function describeNow(now) {
  switch (now.type) {
    case 'absent':
      return 'nothing (deleted)';
    case 'file':
      return `${formatSize(now.size)}, mode ${octal(now.mode)}`;
    case 'symlink':
      return `symlink → ${visible(now.target)}`;
    default:
      return now.mode === undefined ? `a ${now.fileType}` : `a ${now.fileType}, mode ${octal(now.mode)}`;
  }
}

/** @param {FileView} file */
function describeBefore(file) {
  switch (file.kind) {
    case 'absent':
      return 'nothing (the turn created it)';
    case 'directory':
      return `directory, mode ${octal(file.mode ?? 0)}`;
    case 'special':
      return `a ${file.fileType ?? 'special file'}, mode ${octal(file.mode ?? 0)}`;
    case 'symlink':
      return `symlink → ${visible(file.linkTarget ?? '')}`;
    default:
      return `${formatSize(file.size ?? 0)}, mode ${octal(file.mode ?? 0)}`;
  }
}

/** What the restore button says: restoring a created path removes it. */
const ACTION_LABEL = { file: 'Restore file', symlink: 'Restore file', directory: 'Restore directory', special: 'Restore file', metadata: 'Restore mode, owner and times', renamed: 'Rename back', absent: 'Remove created path' };

/**
 * @param {{
 *   file: FileView, session: string, turn: string, startOpen: boolean, busy: boolean,
 *   onRestore: (paths: string[]) => void,
 * }} props
 */
export function FileCard({ file, session, turn, startOpen, busy, onRestore }) {
  // Paths without content (created by the turn, directories, special files) have no diff: the states say it all.
  const hasContent = file.kind === 'file' || file.kind === 'symlink';
  const [open, setOpen] = useState(startOpen && hasContent);
  const [diff, setDiff] = useState(/** @type {DiffView | null} */ (null));
  const [error, setError] = useState(/** @type {string | null} */ (null));
  useEffect(() => {
    if (!open || !hasContent) return undefined;
    let live = true;
    api.diff(session, turn, file.path).then(
      (answer) => live && (setDiff(answer.diff), setError(null)),
      (failure) => live && setError(messageOf(failure)),
    );
    return () => {
      live = false;
    };
  }, [open, hasContent, file, session, turn]);

  const status = STATUS[file.status];
  const action = ACTION_LABEL[file.kind];
  const diffId = `diff-${encodeURIComponent(file.path)}`;
  return html`
    <li class="file">
      <div class="file-head">
        <span class="badge op">${file.operation}</span>
        <code class="path">${visible(file.path)}</code>
        <span class=${`badge status ${status.tone}`}>${status.label}</span>
      </div>
      <p class="file-states">
        <span>before: ${describeBefore(file)}</span>
        <span>now: ${describeNow(file.now)}</span>
        ${file.detail ? html`<span class="warn-text">${file.detail}</span>` : null}
      </p>
      <div class="file-actions">
        ${hasContent
          ? html`<button type="button" aria-expanded=${open} aria-controls=${diffId} onClick=${() => setOpen(!open)}>
              ${open ? 'Hide diff' : 'Show diff'}
            </button>`
          : null}
        <button
          type="button"
          class="primary"
          aria-label=${`${action} ${file.path}`}
          disabled=${busy || file.status === 'as-before' || file.status === 'no-content'}
          title=${file.status === 'as-before' ? 'already as it was before the turn' : undefined}
          onClick=${() => onRestore([file.path])}
        >
          ${action}
        </button>
      </div>
      <div id=${diffId} hidden=${!open || !hasContent}>
        ${error
          ? html`<p class="error" role="alert">${error}</p>`
          : diff
            ? html`<${DiffView} diff=${diff} label=${`diff of ${file.path}`} />`
            : open
              ? html`<p class="note">Loading diff…</p>`
              : null}
      </div>
    </li>
  `;
}
