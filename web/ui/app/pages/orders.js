// Orders and instances: the lists, an order's details, placing open / renew / release after a confirmation
// (the result arrives without a reload: the placed order is polled until it is final), and an instance's
// change and password reset.
import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { api, itemsOf } from '../api.js';
import { ErrorBox, Notice, Table, confirmed, usePoll } from '../components.js';
import { INSTANCE_STATUS, ORDER_STATUS, ORDER_TYPE, isFinalOrder, time } from '../format.js';

/** Follows one order until it is final: pending → processing → succeeded / failed / partial. */
function Tracked({ order, onFinal }) {
  const no = order.appOrderNo;
  const [final, setFinal] = useState(isFinalOrder(order.status));
  const live = usePoll(
    async () => {
      const o = await api(`/v1/orders/${encodeURIComponent(no)}`);
      if (isFinalOrder(o.status)) {
        setFinal(true);
        onFinal?.(o);
      }
      return o;
    },
    final ? 0 : 1000,
    [no, final],
  );
  const o = live.data ?? order;
  const status = ORDER_STATUS[o.status] ?? o.status;
  return html`<div class="tracked" data-order=${no} aria-live="polite">
    ${ORDER_TYPE[o.type] ?? 'order'} <code>${no}</code>${o.orderNo ? html` (platform <code>${o.orderNo}</code>)` : null}:
    <strong class="status-${status}" data-testid="order-status">${status}</strong>
    ${!isFinalOrder(o.status) ? html` <span aria-busy="true"></span>` : null} ${o.amount ? ` · amount ${o.amount}` : ''}
    ${o.instances?.length ? html` · instances ${o.instances.map((i) => html`<code>${i.instanceNo}</code> `)}` : null}
    <${ErrorBox} error=${live.error} />
  </div>`;
}

// An order is named by a merchant number made once per intent: after an answer that leaves the outcome unknown
// (503 ORDER_OUTCOME_UNKNOWN, a lost reply, no answer) placing the same order again resends that number, which
// the platform answers once: never a second charge. A definite answer (placed, or refused) forgets it.
const intents = new Map();
const INTENTS_KEPT = 50;
const merchantNo = () => `ui${Date.now().toString(36)}${Math.random().toString(36).slice(2, 10)}`;

async function placeOnce(path, body, field = 'appOrderNo') {
  const key = `${path} ${JSON.stringify(body)}`;
  let no = intents.get(key);
  if (no === undefined) {
    no = merchantNo();
    intents.set(key, no);
    if (intents.size > INTENTS_KEPT) intents.delete(intents.keys().next().value);
  }
  try {
    const placed = await api(path, { method: 'POST', body: { ...body, [field]: no } });
    intents.delete(key);
    return placed;
  } catch (error) {
    const unknown = error.code === 'ORDER_OUTCOME_UNKNOWN' || error.status === 0 || error.status >= 500;
    if (!unknown) intents.delete(key);
    throw error;
  }
}

function OpenForm({ onPlaced }) {
  const products = usePoll(() => api('/v1/products'), 0);
  const [error, setError] = useState();
  const statics = itemsOf(products.data).filter((p) => ![104, 105].includes(Number(p.proxyType)));
  const submit = async (e) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget);
    const body = { productNo: f.get('productNo'), count: Number(f.get('count')), cycleTimes: Number(f.get('cycleTimes')) };
    await confirmed(
      {
        title: 'Place this order?',
        body: `Open ${body.count} × ${body.productNo} for ${body.cycleTimes} cycle(s). The platform charges the merchant's balance.`,
        confirmLabel: 'Place order',
        danger: false,
      },
      () => placeOnce('/v1/orders/open', body),
      { onDone: (o) => (setError(undefined), onPlaced(o)), onError: setError },
    );
  };
  return html`<form class="filters" onSubmit=${submit} aria-label="open an order">
    <label
      >Product
      <select name="productNo" required>
        ${statics.map((p) => html`<option value=${p.productNo}>${p.productNo}${p.productName ? ` — ${p.productName}` : ''}</option>`)}
      </select>
    </label>
    <label>Count <input name="count" type="number" min="1" max="100" value="1" required /></label>
    <label>Cycles <input name="cycleTimes" type="number" min="1" value="1" required /></label>
    <button type="submit">Open…</button>
    <${ErrorBox} error=${products.error} what="products" />
    <${ErrorBox} error=${error} />
  </form>`;
}

function OrderDetails({ no, onClose }) {
  const order = usePoll(() => api(`/v1/orders/${encodeURIComponent(no)}`), 0, [no]);
  const o = order.data;
  return html`<article class="form-card" aria-label="order details">
    <h2>Order <code>${no}</code></h2>
    <${ErrorBox} error=${order.error} />
    ${
      o &&
      html`<dl class="pairs">
        <dt>type</dt>
        <dd>${ORDER_TYPE[o.type] ?? o.type}</dd>
        <dt>status</dt>
        <dd>${ORDER_STATUS[o.status] ?? o.status}</dd>
        <dt>platform number</dt>
        <dd>${o.orderNo ?? '–'}</dd>
        <dt>merchant number</dt>
        <dd>${o.appOrderNo}</dd>
        <dt>amount</dt>
        <dd>${o.amount ?? '–'}</dd>
        <dt>created</dt>
        <dd>${time(o.createdAt)}</dd>
        <dt>updated</dt>
        <dd>${time(o.updatedAt)}</dd>
        <dt>instances</dt>
        <dd>${(o.instances ?? []).map((i) => html`<code>${i.instanceNo}</code> `) || '–'}</dd>
      </dl>`
    }
    <button type="button" class="secondary" onClick=${onClose}>Close</button>
  </article>`;
}

export function OrdersPage() {
  const orders = usePoll(() => api('/v1/orders?limit=50'), 3000);
  const instances = usePoll(() => api('/v1/instances?limit=200'), 5000);
  const [tracked, setTracked] = useState([]);
  const [details, setDetails] = useState(null);
  const [selected, setSelected] = useState(new Set());
  const [cycles, setCycles] = useState(1);
  const [notice, setNotice] = useState();
  const [error, setError] = useState();
  const track = (o) => (setTracked((t) => [o, ...t.filter((x) => x.appOrderNo !== o.appOrderNo)].slice(0, 5)), orders.reload());
  const refresh = () => (orders.reload(), instances.reload());
  const chosen = [...selected];
  const toggle = (no) =>
    setSelected((s) => {
      const n = new Set(s);
      if (n.has(no)) n.delete(no);
      else n.add(no);
      return n;
    });
  const place = (ask, action) =>
    confirmed(ask, action, { onDone: (o) => (setError(undefined), setNotice(undefined), track(o)), onError: setError });
  const instanceAct = (ask, action, done) =>
    confirmed(ask, action, {
      onDone: (r) => (setError(undefined), setNotice(done(r)), refresh()),
      onError: (e) => (setNotice(undefined), setError(e)),
    });

  return html`<section>
    <h2>Open an order</h2>
    <${OpenForm} onPlaced=${track} />
    ${tracked.length > 0 && html`<section aria-label="placed orders">${tracked.map((o) => html`<${Tracked} key=${o.appOrderNo} order=${o} onFinal=${refresh} />`)}</section>`}
    <${Notice}>${notice}<//>
    <${ErrorBox} error=${error} />

    <h2>Instances</h2>
    <div class="actions">
      <label class="inline"
        >Cycles <input type="number" min="1" value=${cycles} onInput=${(e) => setCycles(Number(e.currentTarget.value) || 1)}
      /></label>
      <button
        type="button"
        class="outline"
        disabled=${chosen.length === 0}
        onClick=${() =>
          place(
            {
              title: `Renew ${chosen.length} instance(s)?`,
              body: `${chosen.join(', ')} for ${cycles} more cycle(s). The platform charges the merchant's balance.`,
              confirmLabel: 'Renew',
            },
            () => placeOnce('/v1/orders/renew', { instances: chosen.map((instanceNo) => ({ instanceNo, cycleTimes: cycles })) }),
          )}
      >
        Renew selected
      </button>
      <button
        type="button"
        class="outline danger"
        disabled=${chosen.length === 0}
        onClick=${() =>
          place(
            {
              title: `Release ${chosen.length} instance(s)?`,
              body: `${chosen.join(', ')} stop working and are given back. This cannot be undone.`,
              confirmLabel: 'Release',
            },
            () => placeOnce('/v1/orders/release', { instances: chosen }, 'orderNo'),
          )}
      >
        Release selected
      </button>
    </div>
    <${ErrorBox} error=${instances.error} what="instances" />
    <${Table} label="instances" head=${['', 'instance', 'product', 'status', 'address', 'user', 'expires', '']} empty="No instances.">
      ${itemsOf(instances.data).map(
        (i) =>
          html`<tr data-instance=${i.instanceNo}>
            <td>
              <input
                type="checkbox"
                aria-label=${`select ${i.instanceNo}`}
                checked=${selected.has(i.instanceNo)}
                onChange=${() => toggle(i.instanceNo)}
              />
            </td>
            <td><code>${i.instanceNo}</code></td>
            <td>${i.productNo ?? '–'}</td>
            <td>${INSTANCE_STATUS[i.status] ?? i.status ?? '–'}</td>
            <td>${i.ip ? `${i.ip}:${i.port}` : '–'}</td>
            <td>${i.username ?? '–'}</td>
            <td>${time(i.userExpired)}</td>
            <td class="row-actions">
              <button
                type="button"
                class="small outline"
                onClick=${() =>
                  place(
                    {
                      title: `Change the proxy behind ${i.instanceNo}?`,
                      body: 'The instance gets a new IP; clients using the old one lose it.',
                      confirmLabel: 'Change',
                    },
                    () => api(`/v1/instances/${encodeURIComponent(i.instanceNo)}/change`, { method: 'POST', body: {} }),
                  )}
              >
                Change
              </button>
              <button
                type="button"
                class="small outline"
                onClick=${() =>
                  instanceAct(
                    { title: `Reset the password of ${i.instanceNo}?`, body: 'The old password stops working.', confirmLabel: 'Reset' },
                    () => api('/v1/instances/reset-password', { method: 'POST', body: { instanceNoList: [i.instanceNo] } }),
                    (r) =>
                      `Password of ${i.instanceNo} reset${r?.list?.[0]?.passwordChanged || r?.list?.[0]?.newPassword ? ': the new one is stored on the instance' : ''}.`,
                  )}
              >
                Reset password
              </button>
            </td>
          </tr>`,
      )}
    <//>

    <h2>Orders</h2>
    ${details && html`<${OrderDetails} no=${details} onClose=${() => setDetails(null)} />`}
    <${ErrorBox} error=${orders.error} what="orders" />
    <${Table} label="orders" head=${['merchant number', 'platform number', 'type', 'status', 'amount', 'updated', '']} empty="No orders.">
      ${itemsOf(orders.data).map(
        (o) =>
          html`<tr>
            <td><code>${o.appOrderNo}</code></td>
            <td>${o.orderNo ?? '–'}</td>
            <td>${ORDER_TYPE[o.type] ?? o.type}</td>
            <td>${ORDER_STATUS[o.status] ?? o.status}</td>
            <td>${o.amount ?? '–'}</td>
            <td>${time(o.updatedAt)}</td>
            <td><button type="button" class="small outline" onClick=${() => setDetails(o.appOrderNo)}>Details</button></td>
          </tr>`,
      )}
    <//>
  </section>`;
}
