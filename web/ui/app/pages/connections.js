// Connections: the live list with a close button, and the connection log with filters and paging
// (docs/reference.md "Connection log and usage").
import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { api, itemsOf, query } from '../api.js';
import { ErrorBox, Notice, Table, confirmed, usePoll } from '../components.js';
import { bytes, duration, time } from '../format.js';

const RESULTS = ['', 'ok', 'auth_failed', 'limited', 'not_allowed', 'upstream_error', 'bad_request'];
const PAGE = 25;
const fromLocalInput = (v) => (v ? new Date(v).toISOString() : undefined);

function Live() {
  const active = usePoll(() => api('/v1/connections/active'), 2000);
  const [notice, setNotice] = useState();
  const [error, setError] = useState();
  const close = (c) =>
    confirmed(
      {
        title: `Close connection ${c.id}?`,
        body: `${c.user ?? ''} → ${c.target ?? 'target'}: the client's connection is cut now.`,
        confirmLabel: 'Close',
      },
      () => api(`/v1/connections/${encodeURIComponent(c.id)}`, { method: 'DELETE' }),
      {
        onDone: () => (setError(undefined), setNotice(`Connection ${c.id} closed.`), active.reload()),
        onError: (e) => (setNotice(undefined), setError(e)),
      },
    );
  return html`<section>
    <h2>Live</h2>
    <${Notice}>${notice}<//>
    <${ErrorBox} error=${error} />
    <${ErrorBox} error=${active.error} what="live connections" />
    <${Table}
      label="live connections"
      head=${['id', 'user', 'listener', 'target', 'node', 'up', 'down', 'since', '']}
      empty="No open connections."
    >
      ${itemsOf(active.data).map(
        (c) =>
          html`<tr data-connection=${c.id}>
            <td><code>${c.id}</code></td>
            <td>${c.user}${c.session ? html`<br /><small class="muted">session ${c.session}</small>` : null}</td>
            <td>${c.listener}</td>
            <td>${c.target ?? '–'}</td>
            <td class="clip" title=${c.node ?? ''}><code>${c.node ?? '–'}</code></td>
            <td class="num">${bytes(c.bytesUp)}</td>
            <td class="num">${bytes(c.bytesDown)}</td>
            <td>${time(c.startedAt)}</td>
            <td><button type="button" class="small outline danger" onClick=${() => close(c)}>Close</button></td>
          </tr>`,
      )}
    <//>
  </section>`;
}

function Log() {
  const [filters, setFilters] = useState({ limit: PAGE });
  const [pages, setPages] = useState({ items: [], next: null });
  const [error, setError] = useState();
  const [busy, setBusy] = useState(false);
  const load = async (f, cursor) => {
    setBusy(true);
    try {
      const r = await api(`/v1/connections${query({ ...f, cursor })}`);
      setPages((p) => ({ items: cursor ? [...p.items, ...itemsOf(r)] : itemsOf(r), next: r?.next ?? null }));
      setError(undefined);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  usePoll(() => load(filters), 0, [filters]);
  const submit = (e) => {
    e.preventDefault();
    const d = new FormData(e.currentTarget);
    setFilters({
      user: d.get('user').trim(),
      result: d.get('result'),
      since: fromLocalInput(d.get('since')),
      until: fromLocalInput(d.get('until')),
      limit: d.get('limit'),
    });
  };
  return html`<section>
    <h2>Log</h2>
    <form class="filters" onSubmit=${submit} aria-label="log filters">
      <label>User <input name="user" /></label>
      <label
        >Result
        <select name="result">
          ${RESULTS.map((r) => html`<option value=${r}>${r || 'any'}</option>`)}
        </select></label
      >
      <label>Since <input name="since" type="datetime-local" /></label>
      <label>Until <input name="until" type="datetime-local" /></label>
      <label>Per page <input name="limit" type="number" min="1" max="1000" value=${PAGE} /></label>
      <button type="submit" aria-busy=${busy}>Filter</button>
    </form>
    <${ErrorBox} error=${error} what="connection log" />
    <${Table}
      label="connection log"
      head=${['started', 'user', 'listener', 'target', 'node', 'exit', 'up', 'down', 'duration', 'result']}
      empty=${busy ? 'Loading…' : 'No records.'}
    >
      ${pages.items.map(
        (c) =>
          html`<tr>
            <td>${time(c.startedAt)}</td>
            <td>${c.user}${c.session ? html`<br /><small class="muted">${c.session}</small>` : null}</td>
            <td>${c.listener}</td>
            <td>${c.target ?? '–'}</td>
            <td class="clip" title=${c.node ?? ''}><code>${c.node ?? '–'}</code></td>
            <td>${c.exit ?? '–'}</td>
            <td class="num">${bytes(c.bytesUp)}</td>
            <td class="num">${bytes(c.bytesDown)}</td>
            <td class="num">${duration(c.durationMs)}</td>
            <td>
              ${c.result === 'ok' ? 'ok' : html`<mark title=${c.reason ?? ''}>${c.result}</mark>`}${c.reason ? html`<br /><small class="muted">${c.reason}</small>` : null}
            </td>
          </tr>`,
      )}
    <//>
    ${pages.next && html`<button type="button" class="secondary" aria-busy=${busy} onClick=${() => load(filters, pages.next)}>Load more</button>`}
  </section>`;
}

export function ConnectionsPage() {
  return html`<${Live} /><${Log} />`;
}
