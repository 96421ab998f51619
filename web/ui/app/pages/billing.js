// Billing: a period's usage and amounts per customer with totals (GET /v1/usage, summed over the period's
// days), Rotor's bytes beside the platform's per main account and product (?compare=platform), and the CSV
// the API writes (Content-Disposition, the currency in every row) as a download.
import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { api, itemsOf, query } from '../api.js';
import { ErrorBox, Table, usePoll } from '../components.js';
import { bytes, count } from '../format.js';

const monthStart = (y, m) => Date.UTC(y, m, 1);
/** [from, to) of a month, UTC; offset 0 = this month. */
function month(offset) {
  const now = new Date();
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth() + offset;
  return { from: monthStart(y, m), to: Math.min(monthStart(y, m + 1), Date.now()) };
}
const day = (ms) => new Date(ms).toISOString().slice(0, 10);

/** Usage rows (per user and day) summed per user, with the totals. */
export function perCustomer(rows) {
  const by = new Map();
  for (const r of rows) {
    const t = by.get(r.user) ?? { user: r.user, bytesUp: 0, bytesDown: 0, connections: 0, failures: 0, amount: null };
    t.bytesUp += r.bytesUp;
    t.bytesDown += r.bytesDown;
    t.connections += r.connections;
    t.failures += r.failures;
    if (r.amount !== null && r.amount !== undefined) t.amount = (t.amount ?? 0) + r.amount;
    by.set(r.user, t);
  }
  const users = [...by.values()].sort((a, b) => b.bytesUp + b.bytesDown - (a.bytesUp + a.bytesDown));
  const total = users.reduce(
    (s, u) => ({
      bytes: s.bytes + u.bytesUp + u.bytesDown,
      connections: s.connections + u.connections,
      amount: u.amount === null ? s.amount : (s.amount ?? 0) + u.amount,
    }),
    { bytes: 0, connections: 0, amount: null },
  );
  return { users, total };
}

function perAccount(rows) {
  const by = new Map();
  for (const r of rows) {
    const k = `${r.account}\u0000${r.productNo}`;
    const t = by.get(k) ?? { account: r.account, productNo: r.productNo, rotorBytes: 0, platformBytes: null };
    t.rotorBytes += r.rotorBytes;
    if (r.platformBytes !== null && r.platformBytes !== undefined) t.platformBytes = (t.platformBytes ?? 0) + r.platformBytes;
    by.set(k, t);
  }
  return [...by.values()];
}

const money = (v, currency) => (v === null || v === undefined ? html`<span class="muted">no price</span>` : `${v.toFixed(2)} ${currency}`);

function save(text, name) {
  const url = URL.createObjectURL(new Blob([text], { type: 'text/csv' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

export function BillingPage() {
  const [period, setPeriod] = useState(() => month(0));
  const [error, setError] = useState();
  const window = { from: new Date(period.from).toISOString(), to: new Date(period.to).toISOString(), granularity: 'day' };
  const usage = usePoll(
    async () => {
      const r = await api(`/v1/usage${query(window)}`, { withHeaders: true });
      return { ...perCustomer(itemsOf(r.data)), currency: r.headers.get('x-rotor-currency') ?? '' };
    },
    60_000,
    [period.from, period.to],
  );
  const compare = usePoll(async () => perAccount(itemsOf(await api(`/v1/usage${query({ ...window, compare: 'platform' })}`))), 0, [
    period.from,
    period.to,
  ]);
  const pick = (e) => {
    e.preventDefault();
    const d = new FormData(e.currentTarget);
    const from = Date.parse(`${d.get('from')}T00:00:00Z`);
    const to = Math.min(Date.parse(`${d.get('to')}T00:00:00Z`) + 86_400_000, Date.now());
    if (Number.isFinite(from) && Number.isFinite(to) && from < to) setPeriod({ from, to });
  };
  const download = async () => {
    try {
      save(await api(`/v1/usage${query({ ...window, format: 'csv' })}`), `rotor-usage-${day(period.from)}-${day(period.to - 1)}.csv`);
      setError(undefined);
    } catch (e) {
      setError(e);
    }
  };
  const d = usage.data;
  const currency = d?.currency ?? '';
  return html`<section>
    <div class="actions">
      <button type="button" class="secondary small" onClick=${() => setPeriod(month(0))}>This month</button>
      <button type="button" class="secondary small" onClick=${() => setPeriod(month(-1))}>Last month</button>
      <form class="filters" aria-label="billing period" onSubmit=${pick} key=${`${period.from}-${period.to}`}>
        <label>From <input name="from" type="date" value=${day(period.from)} /></label>
        <label>To <input name="to" type="date" value=${day(period.to - 1)} /></label>
        <button type="submit" class="secondary">Show</button>
      </form>
      <button type="button" onClick=${download}>Download CSV</button>
    </div>
    <p class="muted">${day(period.from)} to ${day(period.to - 1)} (UTC), amounts in ${currency || 'the billing currency'}.</p>
    <${ErrorBox} error=${error} />
    <${ErrorBox} error=${usage.error} what="usage" />
    ${
      d &&
      html`<div class="cards">
        <article>
          <small class="muted">customers with traffic</small>
          <p class="big">${count(d.users.length)}</p>
        </article>
        <article>
          <small class="muted">traffic</small>
          <p class="big" data-testid="total-bytes">${bytes(d.total.bytes)}</p>
        </article>
        <article>
          <small class="muted">connections</small>
          <p class="big">${count(d.total.connections)}</p>
        </article>
        <article>
          <small class="muted">amount</small>
          <p class="big" data-testid="total-amount">${d.total.amount === null ? '–' : `${d.total.amount.toFixed(2)} ${currency}`}</p>
        </article>
      </div>`
    }
    <h2>Per customer</h2>
    <${Table}
      label="usage per customer"
      head=${['customer', 'up', 'down', 'total', 'connections', 'failures', 'amount']}
      empty=${usage.loading ? 'Loading…' : 'No usage in this period.'}
    >
      ${(d?.users ?? []).map(
        (u) =>
          html`<tr data-billing-user=${u.user}>
            <th scope="row"><a href="#/users/${encodeURIComponent(u.user)}">${u.user}</a></th>
            <td class="num">${bytes(u.bytesUp)}</td>
            <td class="num">${bytes(u.bytesDown)}</td>
            <td class="num">${bytes(u.bytesUp + u.bytesDown)}</td>
            <td class="num">${count(u.connections)}</td>
            <td class="num">${count(u.failures)}</td>
            <td class="num">${money(u.amount, currency)}</td>
          </tr>`,
      )}
    <//>
    <h2>Rotor beside the platform</h2>
    <${ErrorBox} error=${compare.error} what="platform comparison" />
    <${Table}
      label="rotor beside the platform"
      head=${['main account', 'product', 'Rotor', 'platform', 'difference']}
      empty=${compare.loading ? 'Loading…' : 'Nothing to compare in this period.'}
    >
      ${(compare.data ?? []).map(
        (r) =>
          html`<tr>
            <th scope="row">${r.account}</th>
            <td>${r.productNo}</td>
            <td class="num">${bytes(r.rotorBytes)}</td>
            <td class="num">${r.platformBytes === null ? html`<span class="muted">not kept</span>` : bytes(r.platformBytes)}</td>
            <td class="num">
              ${r.platformBytes === null ? '–' : `${r.platformBytes < r.rotorBytes ? '−' : ''}${bytes(Math.abs(r.platformBytes - r.rotorBytes))}`}
            </td>
          </tr>`,
      )}
    <//>
  </section>`;
}
