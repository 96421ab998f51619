// The user form (create and edit). Its inputs are controlled by the form's own state, set once from the
// record when the form opens: the list's and the user page's refreshes re-render the form with a newer
// record, and none of that reaches what is being typed (a refresh used to reset quota, rate and connections
// to the stored values every 2 s). Every field of a record is here: quota and period, rate, connections,
// expiry as a date, price per GB, destination rules, the dedicated port and its allow list.
import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { api } from './api.js';
import { ErrorBox } from './components.js';

const MiB = 1024 * 1024;
const PERIODS = ['total', 'day', 'week', 'month'];

/** A date (YYYY-MM-DD) ↔ RFC 3339: a user expires at the end of that day, UTC. */
export const dateOf = (iso) => (iso ? new Date(iso).toISOString().slice(0, 10) : '');
const endOfDay = (day) => (day ? `${day}T23:59:59Z` : null);
const list = (v) =>
  String(v ?? '')
    .split(/[\s,]+/)
    .map((s) => s.trim())
    .filter(Boolean);
const ports = (v) => list(v).map(Number);
const joined = (a) => (a ?? []).join(', ');

/** The form's state from a record (or the defaults of a new one). */
function initial(user) {
  const q = user?.quota?.bytes ?? user?.limitBytes;
  return {
    name: '',
    mainAccount: '',
    password: '',
    product: user?.product ?? '',
    quota: q !== undefined && q >= 0 ? String(q / MiB) : '',
    period: user?.quota?.period ?? 'total',
    rate: user?.rateBytesPerSec ? String(user.rateBytesPerSec / 1024) : '0',
    maxConnections: String(user?.maxConnections ?? 0),
    expires: dateOf(user?.expiresAt),
    price: user?.pricePerGb === null || user?.pricePerGb === undefined ? '' : String(user.pricePerGb),
    listenPort: user?.listen ? String(user.listen.port) : '',
    allowIps: joined(user?.listen?.allowIps),
    listenTls: user?.listen?.tls === true,
    denyHosts: joined(user?.rules?.denyHosts),
    denyPorts: joined(user?.rules?.denyPorts),
    allowHosts: joined(user?.rules?.allowHosts),
    allowPorts: joined(user?.rules?.allowPorts),
    enabled: user?.enabled ?? true,
    // Request rules (retry/ban on answers), edited as JSON where this daemon's records have them.
    requestRules: Array.isArray(user?.requestRules) ? JSON.stringify(user.requestRules, null, 1) : undefined,
  };
}

/** The request body from the form's state. */
function bodyOf(v, creating) {
  const body = {
    quota: { bytes: v.quota.trim() === '' ? -1 : Math.round(Number(v.quota) * MiB), period: v.period },
    rateBytesPerSec: Math.round(Number(v.rate || 0) * 1024),
    maxConnections: Number(v.maxConnections || 0),
    expiresAt: endOfDay(v.expires),
    pricePerGb: v.price.trim() === '' ? null : Number(v.price),
    listen:
      v.listenPort.trim() === '' ? null : { port: Number(v.listenPort), allowIps: list(v.allowIps), ...(v.listenTls ? { tls: true } : {}) },
    rules: { denyHosts: list(v.denyHosts), denyPorts: ports(v.denyPorts), allowHosts: list(v.allowHosts), allowPorts: ports(v.allowPorts) },
    enabled: v.enabled,
  };
  if (v.product.trim()) body.product = v.product.trim();
  if (v.requestRules !== undefined) {
    try {
      body.requestRules = v.requestRules.trim() === '' ? [] : JSON.parse(v.requestRules);
    } catch (e) {
      throw Object.assign(new Error(`request rules: not JSON (${e.message})`), { code: 'INVALID_INPUT' });
    }
  }
  if (creating) {
    body.name = v.name.trim();
    body.mainAccount = v.mainAccount.trim();
    if (v.password) body.password = v.password;
  }
  return body;
}

export function UserForm({ user, onSaved, onCancel, title }) {
  const creating = !user;
  const [v, setV] = useState(() => initial(user));
  const [error, setError] = useState();
  const [busy, setBusy] = useState(false);
  const field = (key) => ({ name: key, value: v[key], onInput: (e) => setV((s) => ({ ...s, [key]: e.currentTarget.value })) });
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    try {
      const body = bodyOf(v, creating);
      const saved = creating
        ? await api('/v1/users', { method: 'POST', body })
        : await api(`/v1/users/${encodeURIComponent(user.name)}`, { method: 'PATCH', body });
      setError(undefined);
      onSaved(saved, creating);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<article class="form-card">
    <h2>${title ?? (creating ? 'New user' : `Edit ${user.name}`)}</h2>
    <form onSubmit=${submit} aria-label=${creating ? 'new user' : `edit ${user.name}`}>
      <div class="fields">
        ${creating && html`<label>Name <input ...${field('name')} required pattern="[A-Za-z0-9_.]+" maxlength="32" autofocus /></label>`}
        ${creating && html`<label>Main account <input ...${field('mainAccount')} required /></label>`}
        ${creating && html`<label>Password <input ...${field('password')} type="password" autocomplete="new-password" placeholder="generated when empty" /></label>`}
        <label>Product <input ...${field('product')} placeholder="first dynamic product" /></label>
        <label>Quota, MiB <input ...${field('quota')} type="number" min="0" step="any" placeholder="unlimited" /></label>
        <label
          >Quota period
          <select ...${field('period')} onChange=${(e) => setV((s) => ({ ...s, period: e.currentTarget.value }))}>
            ${PERIODS.map((p) => html`<option value=${p}>${p}</option>`)}
          </select>
        </label>
        <label>Rate limit, KiB/s <input ...${field('rate')} type="number" min="0" step="any" /></label>
        <label>Max connections <input ...${field('maxConnections')} type="number" min="0" /></label>
        <label
          >Expires on <input ...${field('expires')} type="date" aria-describedby="expires-help" /><small id="expires-help"
            >at the end of that day, UTC; empty = never</small
          ></label
        >
        <label>Price per GB <input ...${field('price')} type="number" min="0" step="any" placeholder="billing default" /></label>
        <label>Dedicated port <input ...${field('listenPort')} type="number" min="0" max="65535" placeholder="none" /></label>
        <label>Port allow list <input ...${field('allowIps')} placeholder="IPs or CIDRs, comma separated" /></label>
        <label class="check"
          ><input
            name="listenTls"
            type="checkbox"
            checked=${v.listenTls}
            onChange=${(e) => setV((s) => ({ ...s, listenTls: e.currentTarget.checked }))}
          />
          Port over TLS (proxy.https's certificate)</label
        >
        <label>Denied hosts <input ...${field('denyHosts')} placeholder="*.example.com, 10.0.0.0/8" /></label>
        <label>Denied ports <input ...${field('denyPorts')} placeholder="25, 465" /></label>
        <label>Allowed hosts only <input ...${field('allowHosts')} placeholder="any" /></label>
        <label>Allowed ports only <input ...${field('allowPorts')} placeholder="any" /></label>
        ${
          v.requestRules !== undefined &&
          html`<label class="wide"
            >Request rules (JSON list)
            <textarea
              name="requestRules"
              rows="3"
              value=${v.requestRules}
              onInput=${(e) => setV((s) => ({ ...s, requestRules: e.currentTarget.value }))}
              placeholder='[{"hosts":["*.example.com"],"status":[429],"action":"retry"}]'
            ></textarea>
          </label>`
        }
        <label class="check"
          ><input
            name="enabled"
            type="checkbox"
            role="switch"
            checked=${v.enabled}
            onChange=${(e) => setV((s) => ({ ...s, enabled: e.currentTarget.checked }))}
          />
          Enabled</label
        >
      </div>
      <${ErrorBox} error=${error} />
      <div class="actions">
        <button type="submit" aria-busy=${busy}>${creating ? 'Create user' : 'Save'}</button>
        ${onCancel && html`<button type="button" class="secondary" onClick=${onCancel}>Cancel</button>`}
      </div>
    </form>
  </article>`;
}
