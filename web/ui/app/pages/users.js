// Users: the list with quota bars, current rate, connections and expiry; create, edit, disable/enable,
// delete and new password (interface.md "Users as data"). The rate comes from GET /v1/stats.
import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { api, itemsOf } from '../api.js';
import { ErrorBox, Notice, QuotaBar, Table, confirmed, usePoll } from '../components.js';
import { bytes, count, rate, relative, time } from '../format.js';

const MiB = 1024 * 1024;
const PERIODS = ['total', 'day', 'week', 'month'];

/** datetime-local value ↔ RFC 3339 */
const toLocalInput = (iso) => (iso ? new Date(new Date(iso).getTime() - new Date().getTimezoneOffset() * 60000).toISOString().slice(0, 16) : '');
const fromLocalInput = (v) => (v ? new Date(v).toISOString() : null);

function UserForm({ user, onSaved, onCancel }) {
  const creating = !user;
  const [error, setError] = useState();
  const [busy, setBusy] = useState(false);
  const quotaBytes = user?.quota?.bytes ?? user?.limitBytes;
  const submit = async (e) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget);
    const quota = String(f.get('quota')).trim();
    const body = {
      quota: { bytes: quota === '' ? -1 : Math.round(Number(quota) * MiB), period: f.get('period') },
      rateBytesPerSec: Math.round(Number(f.get('rate') || 0) * 1024),
      maxConnections: Number(f.get('maxConnections') || 0),
      expiresAt: fromLocalInput(f.get('expiresAt')),
      enabled: f.get('enabled') === 'on',
    };
    const product = String(f.get('product')).trim();
    if (product) body.product = product;
    if (creating) {
      body.name = String(f.get('name')).trim();
      body.mainAccount = String(f.get('mainAccount')).trim();
      const password = String(f.get('password'));
      if (password) body.password = password;
    }
    setBusy(true);
    try {
      const saved = creating ? await api('/v1/users', { method: 'POST', body }) : await api(`/v1/users/${encodeURIComponent(user.name)}`, { method: 'PATCH', body });
      onSaved(saved, creating);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<article class="form-card">
    <h2>${creating ? 'New user' : `Edit ${user.name}`}</h2>
    <form onSubmit=${submit}>
      <div class="fields">
        ${creating && html`<label>Name <input name="name" required pattern="[A-Za-z0-9_.]+" maxlength="32" autofocus /></label>`}
        ${creating && html`<label>Main account <input name="mainAccount" required /></label>`}
        ${creating && html`<label>Password <input name="password" type="password" autocomplete="new-password" placeholder="generated when empty" /></label>`}
        <label>Product <input name="product" value=${user?.product ?? ''} placeholder="first dynamic product" /></label>
        <label>Quota, MiB <input name="quota" type="number" min="0" step="any" value=${quotaBytes >= 0 ? quotaBytes / MiB : ''} placeholder="unlimited" /></label>
        <label>Quota period
          <select name="period">${PERIODS.map((p) => html`<option selected=${(user?.quota?.period ?? 'total') === p}>${p}</option>`)}</select>
        </label>
        <label>Rate limit, KiB/s <input name="rate" type="number" min="0" value=${user?.rateBytesPerSec ? user.rateBytesPerSec / 1024 : 0} /></label>
        <label>Max connections <input name="maxConnections" type="number" min="0" value=${user?.maxConnections ?? 0} /></label>
        <label>Expires <input name="expiresAt" type="datetime-local" value=${toLocalInput(user?.expiresAt)} /></label>
        <label class="check"><input name="enabled" type="checkbox" role="switch" checked=${user?.enabled ?? true} /> Enabled</label>
      </div>
      <${ErrorBox} error=${error} />
      <div class="actions">
        <button type="submit" aria-busy=${busy}>${creating ? 'Create user' : 'Save'}</button>
        <button type="button" class="secondary" onClick=${onCancel}>Cancel</button>
      </div>
    </form>
  </article>`;
}

export function UsersPage() {
  const users = usePoll(() => api('/v1/users'), 2000);
  const stats = usePoll(() => api(`/v1/stats?since=${Date.now()}`), 3000);
  const [editing, setEditing] = useState(null); // null | 'new' | user
  const [notice, setNotice] = useState();
  const [error, setError] = useState();
  const rates = new Map((stats.data?.users ?? []).map((u) => [u.name, u.bytesPerSec]));
  const list = itemsOf(users.data);
  const path = (u, rest = '') => `/v1/users/${encodeURIComponent(u.name)}${rest}`;
  const act = (ask, action, done) =>
    confirmed(ask, action, {
      onDone: (r) => (setError(undefined), setNotice(done(r)), users.reload()),
      onError: (e) => (setNotice(undefined), setError(e)),
    });

  return html`<section>
    <div class="actions">
      <button type="button" onClick=${() => (setNotice(undefined), setEditing('new'))}>New user</button>
    </div>
    ${editing &&
    html`<${UserForm}
      user=${editing === 'new' ? null : editing}
      onCancel=${() => setEditing(null)}
      onSaved=${(u, created) => {
        setEditing(null);
        setError(undefined);
        setNotice(created && u.password ? html`Created <strong>${u.name}</strong>. Password (shown once): <code data-testid="new-password">${u.password}</code>` : `Saved ${u.name}.`);
        users.reload();
      }}
    />`}
    <${Notice}>${notice}<//>
    <${ErrorBox} error=${error} />
    <${ErrorBox} error=${users.error} what="users" />
    <${Table} label="users" head=${['user', 'used', 'quota', 'rate now', 'rate limit', 'connections', 'expires', 'state', '']} empty=${users.loading ? 'Loading…' : 'No users.'}>
      ${list.map(
        (u) => html`<tr data-user=${u.name}>
          <th scope="row">${u.name}${u.mainAccount ? html`<br /><small class="muted">${u.mainAccount}</small>` : null}</th>
          <td class="num" data-testid="used">${bytes(u.usedBytes)}</td>
          <td><${QuotaBar} used=${u.usedBytes} limit=${u.limitBytes} />${u.quota?.period && u.quota.period !== 'total' ? html`<small class="muted"> per ${u.quota.period}</small>` : null}</td>
          <td class="num">${rate(rates.get(u.name) ?? 0)}</td>
          <td class="num">${u.rateBytesPerSec ? rate(u.rateBytesPerSec) : html`<span class="muted">none</span>`}</td>
          <td class="num">${count(u.activeConnections)}${u.maxConnections ? ` / ${u.maxConnections}` : ''}</td>
          <td>${u.expiresAt ? html`<span title=${time(u.expiresAt)}>${relative(u.expiresAt)}</span>` : html`<span class="muted">never</span>`}</td>
          <td>${u.enabled === false ? html`<mark>disabled</mark>` : 'enabled'}</td>
          <td class="row-actions">
            <button type="button" class="small outline" onClick=${() => (setNotice(undefined), setEditing(u))}>Edit</button>
            <button type="button" class="small outline" onClick=${() =>
              act(
                u.enabled === false
                  ? { title: `Enable ${u.name}?`, body: 'The user may connect again.', confirmLabel: 'Enable', danger: false }
                  : { title: `Disable ${u.name}?`, body: 'New connections are refused and the open ones are closed.', confirmLabel: 'Disable' },
                () => api(path(u), { method: 'PATCH', body: { enabled: u.enabled === false } }),
                () => `${u.name} ${u.enabled === false ? 'enabled' : 'disabled'}.`,
              )}>${u.enabled === false ? 'Enable' : 'Disable'}</button>
            <button type="button" class="small outline" onClick=${() =>
              act(
                { title: `New password for ${u.name}?`, body: 'The old password stops working at once. The new one is shown once.', confirmLabel: 'Generate' },
                () => api(path(u, '/password'), { method: 'POST', body: {} }),
                (r) => html`New password for <strong>${u.name}</strong> (shown once): <code data-testid="new-password">${r?.password}</code>`,
              )}>New password</button>
            <button type="button" class="small outline danger" onClick=${() =>
              act(
                { title: `Delete ${u.name}?`, body: 'The user is removed and its open connections are closed. This cannot be undone.', confirmLabel: 'Delete' },
                () => api(path(u), { method: 'DELETE' }),
                () => `${u.name} deleted.`,
              )}>Delete</button>
          </td>
        </tr>`,
      )}
    <//>
  </section>`;
}
