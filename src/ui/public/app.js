// The backup viewer: sessions and turns on the left, the chosen turn on the right.
import { render } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { html } from './html.js';
import { api, messageOf } from './api.js';
import { readHash } from './format.js';
import { TurnList } from './turn-list.js';
import { TurnView } from './turn-view.js';

function App() {
  const [data, setData] = useState(/** @type {import('./api-types').SessionsAnswer | null} */ (null));
  const [error, setError] = useState(/** @type {string | null} */ (null));
  const [selected, setSelected] = useState(readHash());
  const [version, setVersion] = useState(0);
  const reload = useCallback(() => setVersion((n) => n + 1), []);

  useEffect(() => {
    api.sessions().then(
      (answer) => (setData(answer), setError(null)),
      (failure) => setError(messageOf(failure)),
    );
  }, [version]);
  useEffect(() => {
    const follow = () => setSelected(readHash());
    addEventListener('hashchange', follow);
    return () => removeEventListener('hashchange', follow);
  }, []);

  return html`
    <header class="top">
      <h1>brokered-shell backups</h1>
      ${data ? html`<p class="home">store <code>${data.home}</code></p>` : null}
      <button type="button" onClick=${reload}>Refresh</button>
    </header>
    ${error ? html`<p class="error" role="alert">${error}</p>` : null}
    <div class="layout">
      <nav aria-label="Sessions and turns">
        ${data ? html`<${TurnList} sessions=${data.sessions} selected=${selected} />` : html`<p class="placeholder">Loading…</p>`}
      </nav>
      <main>
        ${selected
          ? html`<${TurnView} key=${`${selected.session}/${selected.turn}`} session=${selected.session} turn=${selected.turn} onChanged=${reload} />`
          : html`<p class="placeholder">Choose a turn to see the files it changed, their diffs, and to restore them.</p>`}
      </main>
    </div>
  `;
}

const root = document.getElementById('app');
if (root) {
  root.textContent = '';
  render(html`<${App} />`, root);
}
