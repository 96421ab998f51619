// The access generator, for the reseller (user page) and the customer (portal): the customer's endpoints as
// HTTP and SOCKS5 URLs with the user-name options (region from the platform's dictionaries, sticky session ids,
// session length), in the formats people paste — URL, host:port:user:pass, a curl line, a Python `requests`
// snippet — and N sticky endpoints downloadable as TXT or CSV. The server builds the lines (the same code
// for both); `load(query)` answers JSON, `fetchText(query)` the TXT/CSV file's text.
import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { ErrorBox, usePoll } from './components.js';

export const STYLES = [
  ['url', 'URL'],
  ['hostport', 'host:port:user:pass'],
  ['curl', 'curl'],
  ['python', 'Python requests'],
];

/** The region tree (GetArea) as one list: continents, then their countries and regions, by code. */
export function flattenAreas(nodes, depth = 0, out = []) {
  for (const n of nodes ?? []) {
    if (n?.code) out.push({ code: n.code, name: `${'  '.repeat(depth)}${n.name ?? n.cname ?? n.code}` });
    flattenAreas(n?.children, depth + 1, out);
  }
  return out;
}

/** Saves `text` as a file named `name` (the download needs credentials a plain link does not carry). */
function save(text, name, type) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

export function AccessGenerator({ user, load, fetchText, regions, note }) {
  const [q, setQ] = useState({ protocol: 'http', sessions: '5', sessTime: '10', region: '', style: 'url' });
  const [error, setError] = useState();
  const params = { protocol: q.protocol, sessions: q.sessions, sessTime: q.sessTime, region: q.region };
  const list = usePoll(() => load({ ...params, format: 'json' }), 0, [q.protocol, q.sessions, q.sessTime, q.region]);
  const set = (key) => (e) => setQ((s) => ({ ...s, [key]: e.currentTarget.value }));
  const download = async (format) => {
    try {
      const text = await fetchText({ ...params, style: q.style, format });
      save(text, `${user}-endpoints.${format}`, format === 'csv' ? 'text/csv' : 'text/plain');
      setError(undefined);
    } catch (e) {
      setError(e);
    }
  };
  const endpoints = list.data?.endpoints ?? [];
  return html`<section aria-label="access">
    <h2>Access</h2>
    ${note && html`<p class="muted">${note}</p>`}
    <form class="filters" aria-label="endpoint options" onSubmit=${(e) => e.preventDefault()}>
      <label
        >Protocol
        <select name="protocol" value=${q.protocol} onChange=${set('protocol')}>
          <option value="http">HTTP</option>
          <option value="socks5">SOCKS5</option>
        </select></label
      >
      <label
        >Region
        <select name="region" value=${q.region} onChange=${set('region')}>
          <option value="">any</option>
          ${(regions ?? []).map((r) => html`<option value=${r.code}>${r.name} (${r.code})</option>`)}
        </select></label
      >
      <label
        >Sticky sessions
        <input
          name="sessions"
          type="number"
          min="0"
          max="1000"
          value=${q.sessions}
          onChange=${set('sessions')}
          aria-describedby="sessions-help"
        /><small id="sessions-help">0 = one rotating endpoint</small></label
      >
      <label
        >Session length, min <input name="sessTime" type="number" min="1" max="120" value=${q.sessTime} onChange=${set('sessTime')}
      /></label>
      <label
        >Format
        <select name="style" value=${q.style} onChange=${set('style')}>
          ${STYLES.map(([v, l]) => html`<option value=${v}>${l}</option>`)}
        </select></label
      >
    </form>
    <${ErrorBox} error=${list.error ?? error} what="endpoints" />
    <pre class="endpoints" data-testid="endpoints" tabindex="0">${endpoints.map((e) => e[q.style]).join('\n')}</pre>
    <div class="actions">
      <button type="button" class="secondary" onClick=${() => navigator.clipboard?.writeText(endpoints.map((e) => e[q.style]).join('\n'))}>
        Copy
      </button>
      <button type="button" class="secondary" onClick=${() => download('txt')}>Download TXT</button>
      <button type="button" class="secondary" onClick=${() => download('csv')}>Download CSV</button>
    </div>
  </section>`;
}
