// One file's diff, backup → now, as `backups diff` prints it, coloured per line.
import { html } from './html.js';

/** @param {{ diff: import('./api-types').DiffView, label: string }} props */
export function DiffView({ diff, label }) {
  return html`
    <pre class="diff" aria-label=${label}>${diff.lines.map((line) => html`<span class=${`line ${line.kind}`}>${line.text || ' '}</span>`)}</pre>
    ${diff.omitted > 0
      ? html`<p class="note">${diff.omitted} more lines not shown; <code>brokered-shell backups diff</code> shows them all.</p>`
      : null}
  `;
}
