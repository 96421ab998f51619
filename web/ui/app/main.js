// The dashboard: a login gate (the admin token, kept in sessionStorage for this tab only), a navigation bar
// and one page per hash route (#/overview, #/users, …). Pages read the admin API themselves.
import { html, render } from 'htm/preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, onUnauthorized, session } from './api.js';
import { ConfirmHost, ErrorBox } from './components.js';
import { ConnectionsPage } from './pages/connections.js';
import { OrdersPage } from './pages/orders.js';
import { OverviewPage } from './pages/overview.js';
import { PlatformPage } from './pages/platform.js';
import { PoolsPage } from './pages/pools.js';
import { UsersPage } from './pages/users.js';
import { UserPage } from './pages/user.js';
import { BillingPage } from './pages/billing.js';

const PAGES = [
  { path: 'overview', title: 'Overview', Page: OverviewPage },
  { path: 'users', title: 'Users', Page: UsersPage },
  { path: 'pools', title: 'Pools & sessions', Page: PoolsPage },
  { path: 'connections', title: 'Connections', Page: ConnectionsPage },
  { path: 'orders', title: 'Orders & instances', Page: OrdersPage },
  { path: 'billing', title: 'Billing', Page: BillingPage },
  { path: 'platform', title: 'Platform', Page: PlatformPage },
];
/** Pages reached from another page (not in the navigation): #/users/<name>. */
const SUBPAGES = { users: { title: 'Customer', Page: UserPage } };

const routeOf = () => location.hash.replace(/^#\/?/, '').split('?')[0] || 'overview';
const safeDecode = (s) => {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
};
/** 'users/alice' → the customer page of alice, under the Users tab. */
function pageOf(route) {
  const [first, ...rest] = route.split('/');
  const top = PAGES.find((p) => p.path === first) ?? PAGES[0];
  const param = rest.join('/');
  if (param && SUBPAGES[top.path]) return { ...SUBPAGES[top.path], title: safeDecode(param), path: top.path, key: route, param, top };
  return { ...top, key: top.path, top };
}

function useRoute() {
  const [route, setRoute] = useState(routeOf());
  useEffect(() => {
    const on = () => setRoute(routeOf());
    addEventListener('hashchange', on);
    // A hash changed between the first render and this effect (a click or a link followed right after the login
    // drew the shell) fired no event this listener heard: read it once now.
    on();
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}

function Login({ onIn, error: initial }) {
  const [error, setError] = useState(initial);
  const [busy, setBusy] = useState(false);
  // `autofocus` on an element inserted by script is applied at the browser's next rendering update, not when
  // the element appears; focusing it here means a user (or a test) typing as soon as the field shows is heard.
  const field = useRef(null);
  useEffect(() => field.current?.focus(), []);
  const submit = async (e) => {
    e.preventDefault();
    const token = new FormData(e.currentTarget).get('token').trim();
    setBusy(true);
    try {
      await api('/v1/stats?since=' + Date.now(), { token });
      session.save(token);
      onIn({ tokenless: false });
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<main class="container login">
    <article>
      <h1>Rotor</h1>
      <form onSubmit=${submit}>
        <label
          >Admin token
          <input
            ref=${field}
            name="token"
            type="password"
            autocomplete="current-password"
            required
            autofocus
            aria-describedby="token-help"
          />
        </label>
        <small id="token-help">The <code>admin.token</code> of this daemon. It stays in this browser tab only.</small>
        <${ErrorBox} error=${error} />
        <button type="submit" aria-busy=${busy}>Log in</button>
      </form>
    </article>
  </main>`;
}

function Shell({ tokenless, onOut }) {
  const route = useRoute();
  const page = pageOf(route);
  useEffect(() => {
    document.title = `${page.title} · Rotor`;
    document.getElementById('main')?.focus();
  }, [page.key]);
  return html`<div>
    <a class="skip" href="#main" onClick=${(e) => (e.preventDefault(), document.getElementById('main')?.focus())}>Skip to content</a>
    <header class="bar">
      <strong class="brand">Rotor</strong>
      <nav aria-label="pages">
        ${PAGES.map((p) => html`<a href="#/${p.path}" aria-current=${p === page.top ? 'page' : undefined}>${p.title}</a>`)}
        <a href="/docs" target="_blank" rel="noopener">API docs</a>
      </nav>
      ${tokenless ? html`<small class="muted">no admin token set</small>` : html`<button type="button" class="secondary outline small" onClick=${onOut}>Log out</button>`}
    </header>
    <main id="main" class="container-fluid" tabindex="-1">
      <h1>${page.title}</h1>
      <${page.Page} key=${page.key} param=${page.param} />
    </main>
    <${ConfirmHost} />
  </div>`;
}

function App() {
  // undefined: checking; null: logged out; {tokenless}: in.
  const [auth, setAuth] = useState(undefined);
  const [error, setError] = useState(undefined);
  useEffect(() => {
    // A daemon without a token answers without one; with a stored token, check it is still good. A 401 to this
    // first check only means "log in": the login form shows no error for it (the listener below is for a
    // token refused later, while logged in).
    let checking = true;
    const stored = session.token();
    api('/v1/stats?since=' + Date.now(), { token: stored }).then(
      () => ((checking = false), setAuth({ tokenless: !stored })),
      (err) => {
        checking = false;
        if (stored && err.status === 401) session.clear();
        if (err.status !== 401) setError(err);
        setAuth(null);
      },
    );
    return onUnauthorized((err) => {
      if (checking) return;
      session.clear();
      setError(err);
      setAuth(null);
    });
  }, []);
  if (auth === undefined) return html`<main class="container" aria-busy="true">Loading…</main>`;
  if (auth === null) return html`<${Login} error=${error} onIn=${(a) => (setError(undefined), setAuth(a))} />`;
  return html`<${Shell} tokenless=${auth.tokenless} onOut=${() => (session.clear(), setAuth(null))} />`;
}

render(html`<${App} />`, document.getElementById('app'));
