// The customer portal: sign in with the proxy user name and password; then the customer's own quota and
// state, usage history, connections, access generator, and a password change. Every request is relative to
// this page (the portal's configured path) and carries the session cookie; writes carry the CSRF token the
// sign-in (or GET api/me) answer names in its x-rotor-csrf header, kept in this page's memory only.
import { html, render } from 'htm/preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { AccessGenerator, flattenAreas } from './access.js';
import { ErrorBox, Notice, StateBadge, UserQuota, usePoll } from './components.js';
import { bytes, count, rate } from './format.js';
import { ConnectionTables, UsageHistory } from './usage-view.js';

let csrf = '';

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const listeners = new Set();

async function papi(path, { method = 'GET', body } = {}) {
  const headers = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && csrf) headers['x-rotor-csrf'] = csrf;
  let res;
  try {
    res = await fetch(`api/${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
      credentials: 'same-origin',
    });
  } catch (err) {
    throw new ApiError(0, 'NETWORK', `the server did not answer (${err.message})`);
  }
  const token = res.headers.get('x-rotor-csrf');
  if (token) csrf = token;
  const text = await res.text();
  let data = text;
  try {
    data = text ? JSON.parse(text) : undefined;
  } catch {
    // a TXT or CSV file: kept as text
  }
  if (res.ok) return data;
  const e = data && typeof data === 'object' && data.error ? data.error : {};
  const error = new ApiError(res.status, e.code ?? `HTTP_${res.status}`, e.message ?? res.statusText);
  if (res.status === 401 && path !== 'login' && path !== 'password') for (const l of listeners) l(error);
  throw error;
}

const query = (params) => {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
};

function SignIn({ onIn, error: initial }) {
  const [error, setError] = useState(initial);
  const [busy, setBusy] = useState(false);
  const field = useRef(null);
  useEffect(() => field.current?.focus(), []);
  const submit = async (e) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget);
    setBusy(true);
    try {
      await papi('login', { method: 'POST', body: { user: String(f.get('user')).trim(), password: String(f.get('password')) } });
      setError(undefined);
      onIn();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<main class="container login">
    <article>
      <h1>Your proxy account</h1>
      <form onSubmit=${submit} aria-label="sign in">
        <label>User name <input ref=${field} name="user" autocomplete="username" required maxlength="32" /></label>
        <label>Password <input name="password" type="password" autocomplete="current-password" required /></label>
        <small>The user name and password you use with the proxy.</small>
        <${ErrorBox} error=${error} />
        <button type="submit" aria-busy=${busy}>Sign in</button>
      </form>
    </article>
  </main>`;
}

function PasswordForm() {
  const [error, setError] = useState();
  const [notice, setNotice] = useState();
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    const form = e.currentTarget;
    const f = new FormData(form);
    if (f.get('password') !== f.get('again')) return setError(new ApiError(0, 'MISMATCH', 'the two new passwords differ'));
    setBusy(true);
    try {
      await papi('password', { method: 'POST', body: { current: String(f.get('current')), password: String(f.get('password')) } });
      form.reset();
      setError(undefined);
      setNotice('Password changed. Use the new one with the proxy from now on; other signed-in browsers were signed out.');
    } catch (err) {
      setNotice(undefined);
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<section aria-label="password">
    <h2>Password</h2>
    <form class="fields" onSubmit=${submit} aria-label="change password">
      <label>Current password <input name="current" type="password" autocomplete="current-password" required /></label>
      <label>New password <input name="password" type="password" autocomplete="new-password" minlength="8" required /></label>
      <label>New password again <input name="again" type="password" autocomplete="new-password" minlength="8" required /></label>
      <div><button type="submit" aria-busy=${busy}>Change password</button></div>
    </form>
    <${ErrorBox} error=${error} />
    <${Notice}>${notice}<//>
  </section>`;
}

function Account({ onOut }) {
  const me = usePoll(() => papi('me'), 5000);
  const connections = usePoll(() => papi('connections?limit=20'), 5000);
  const regions = usePoll(() => papi('regions'), 0);
  const u = me.data;
  useEffect(() => {
    if (u) document.title = `${u.name} · proxy account`;
  }, [u?.name]);
  const out = async () => {
    try {
      await papi('logout', { method: 'POST', body: {} });
    } finally {
      onOut();
    }
  };
  return html`<div class="portal">
    <header class="bar portal-bar">
      <strong class="brand">Proxy account${u ? html` · <span data-testid="me">${u.name}</span>` : ''}</strong>
      <button type="button" class="secondary outline small" onClick=${out}>Sign out</button>
    </header>
    <main class="container-fluid">
      <${ErrorBox} error=${me.error} />
      ${
        u &&
        html`<section aria-label="account">
          <h1 class="state-line">${u.name} <${StateBadge} user=${u} /></h1>
          <div class="cards">
            <article>
              <small class="muted">used this period</small>
              <p class="big" data-testid="used">${bytes(u.usedBytes)}</p>
              <${UserQuota} user=${u} wide />
            </article>
            <article>
              <small class="muted">quota</small>
              <p class="big">${u.limitBytes >= 0 ? bytes(u.limitBytes) : 'unlimited'}</p>
              <small>${u.quota?.period ?? 'total'}</small>
            </article>
            <article>
              <small class="muted">connections</small>
              <p class="big">${count(u.activeConnections)}${u.maxConnections ? ` / ${u.maxConnections}` : ''}</p>
              <small>speed limit ${u.rateBytesPerSec ? rate(u.rateBytesPerSec) : 'none'}</small>
            </article>
            <article>
              <small class="muted">valid until</small>
              <p class="big">${u.expiresAt ? u.expiresAt.slice(0, 10) : 'no end'}</p>
              ${u.listen ? html`<small>your own port ${u.listen.port}</small>` : null}
            </article>
          </div>
        </section>`
      }
      <${UsageHistory} load=${(q) => papi(`usage${query({ granularity: q.granularity, from: q.from, to: q.to })}`)} />
      <${ConnectionTables} live=${connections.data?.live ?? []} recent=${connections.data?.recent ?? []} />
      ${
        u &&
        html`<${AccessGenerator}
          user=${u.name}
          regions=${flattenAreas(regions.data)}
          load=${(q) => papi(`endpoints${query(q)}`)}
          fetchText=${(q) => papi(`endpoints${query(q)}`)}
          note="Each line is a ready proxy: paste it into your tool. A sticky line keeps its exit address for the session length."
        />`
      }
      <${PasswordForm} />
    </main>
  </div>`;
}

function App() {
  const [state, setState] = useState('checking');
  const [error, setError] = useState();
  useEffect(() => {
    papi('me').then(
      () => setState('in'),
      (err) => {
        if (err.status !== 401) setError(err);
        setState('out');
      },
    );
    const on = (err) => (setError(err), setState('out'));
    listeners.add(on);
    return () => listeners.delete(on);
  }, []);
  if (state === 'checking') return html`<main class="container" aria-busy="true">Loading…</main>`;
  if (state === 'out') return html`<${SignIn} error=${error} onIn=${() => (setError(undefined), setState('in'))} />`;
  return html`<${Account} onOut=${() => ((csrf = ''), setState('out'))} />`;
}

render(html`<${App} />`, document.getElementById('app'));
