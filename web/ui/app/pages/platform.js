// Platform: the merchant (GetAppInfo), dynamic balances per main account and product (read live on
// demand), and each account's IP whitelist with add and remove.
import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { api, query } from '../api.js';
import { ErrorBox, Notice, Table, confirmed, usePoll } from '../components.js';
import { bytes, count, time } from '../format.js';

function Whitelist({ account, productNo }) {
  const list = usePoll(() => api(`/v1/whitelist${query({ account, productNo })}`), 0, [account, productNo]);
  const [error, setError] = useState();
  const [notice, setNotice] = useState();
  const change = (method, ip) => api('/v1/whitelist', { method, body: { account, productNo, ip } });
  const add = async (e) => {
    e.preventDefault();
    const form = e.currentTarget;
    const ip = new FormData(form).get('ip').trim();
    try {
      await change('POST', ip);
      form.reset();
      setError(undefined);
      setNotice(`${ip} added.`);
      list.reload();
    } catch (err) {
      setError(err);
    }
  };
  const remove = (ip) =>
    confirmed(
      { title: `Remove ${ip} from the whitelist?`, body: `Draws through ${account} from ${ip} stop working.`, confirmLabel: 'Remove' },
      () => change('DELETE', ip),
      {
        onDone: () => (setError(undefined), setNotice(`${ip} removed.`), list.reload()),
        onError: setError,
      },
    );
  return html`<div>
    <${ErrorBox} error=${list.error} what="whitelist" />
    <${ErrorBox} error=${error} />
    <${Notice}>${notice}<//>
    <ul class="ips">
      ${(list.data?.ipWhiteList ?? []).map((ip) => html`<li><code>${ip}</code> <button type="button" class="small outline danger" onClick=${() => remove(ip)}>Remove</button></li>`)}
      ${list.data && list.data.ipWhiteList.length === 0 ? html`<li class="muted">empty</li>` : null}
    </ul>
    <form class="filters" onSubmit=${add} aria-label=${`add an IP to ${account}'s whitelist`}>
      <label>IP <input name="ip" required placeholder="203.0.113.7" /></label>
      <button type="submit" class="outline">Add</button>
    </form>
  </div>`;
}

function Balance({ account, productNo, value, unit }) {
  const [live, setLive] = useState();
  const [error, setError] = useState();
  const [open, setOpen] = useState(false);
  const read = async () => {
    try {
      setLive(await api(`/v1/accounts/${encodeURIComponent(account)}/balance${query({ productNo })}`));
      setError(undefined);
    } catch (e) {
      setError(e);
    }
  };
  const b = live;
  return html`<article>
    <header><strong>${account}</strong> · ${productNo}</header>
    <p class="big">${b ? `${count(b.balanceMb)} MB` : unit === 'MB' ? `${count(value)} MB` : bytes(value)}</p>
    ${b && html`<small>used ${count(b.usedMb)} MB of ${count(b.totalMb)} MB · read ${time(b.checkedAt)}</small>`}
    <${ErrorBox} error=${error} />
    <div class="actions">
      <button type="button" class="small outline" onClick=${read}>Read now</button>
      <button type="button" class="small outline" aria-expanded=${open} onClick=${() => setOpen(!open)}>Whitelist</button>
    </div>
    ${open && html`<${Whitelist} account=${account} productNo=${productNo} />`}
  </article>`;
}

export function PlatformPage() {
  const app = usePoll(() => api('/v1/app'), 0);
  const stats = usePoll(() => api(`/v1/stats?since=${Date.now()}`), 10000);
  const balances = stats.data?.balances ?? [];
  return html`<section>
    <h2>Merchant</h2>
    <${ErrorBox} error=${app.error} what="app info" />
    ${
      app.data &&
      html`<${Table} label="merchant" head=${['field', 'value']}>
        ${Object.entries(app.data).map(
          ([k, v]) =>
            html`<tr>
              <th scope="row">${k}</th>
              <td>${typeof v === 'object' ? JSON.stringify(v) : String(v)}</td>
            </tr>`,
        )}
      <//>`
    }
    <h2>Balances and whitelists</h2>
    <${ErrorBox} error=${stats.error} what="balances" />
    ${balances.length === 0 && !stats.loading ? html`<p class="muted">No dynamic balance read yet.</p>` : null}
    <div class="cards wide">
      ${balances.map((b) => html`<${Balance} key=${b.account + b.product} account=${b.account} productNo=${b.product} value=${b.value} unit=${b.unit} />`)}
    </div>
  </section>`;
}
