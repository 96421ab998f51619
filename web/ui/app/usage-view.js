// A customer's usage history (a chart of hours or days, up and down) and live and recent connections: shown on
// the reseller's page of a customer and in the customer's own portal. `load` reads the usage rows.
import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { Chart } from './chart.js';
import { ErrorBox, Table, usePoll } from './components.js';
import { bytes, duration, time } from './format.js';

const itemsOf = (data) => (Array.isArray(data) ? data : Array.isArray(data?.items) ? data.items : []);

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** Usage rows (one per period) as chart columns, oldest first, with the empty periods filled with zeros. */
export function usageSeries(rows, granularity, from, to) {
  const step = granularity === 'hour' ? HOUR : DAY;
  const by = new Map(rows.map((r) => [Date.parse(r.period), r]));
  const times = [];
  const up = [];
  const down = [];
  for (let t = Math.floor(from / step) * step; t <= to; t += step) {
    const r = by.get(t);
    times.push(t / 1000);
    up.push(r ? r.bytesUp : 0);
    down.push(r ? r.bytesDown : 0);
  }
  return {
    times,
    series: [
      { label: 'down', values: down },
      { label: 'up', values: up },
    ],
  };
}

export function UsageHistory({ load }) {
  const [granularity, setGranularity] = useState('hour');
  const usage = usePoll(
    async () => {
      const to = Date.now();
      const from = to - (granularity === 'hour' ? 48 * HOUR : 30 * DAY);
      return { ...usageSeries(itemsOf(await load({ granularity, from, to })), granularity, from, to), granularity };
    },
    30_000,
    [granularity],
  );
  const d = usage.data;
  return html`<section aria-label="usage history">
    <div class="actions">
      <h2 class="inline">Usage</h2>
      <div role="group" class="toggle" aria-label="granularity">
        <button
          type="button"
          class="small ${granularity === 'hour' ? '' : 'outline'}"
          aria-pressed=${granularity === 'hour'}
          onClick=${() => setGranularity('hour')}
        >
          Hours (48)
        </button>
        <button
          type="button"
          class="small ${granularity === 'day' ? '' : 'outline'}"
          aria-pressed=${granularity === 'day'}
          onClick=${() => setGranularity('day')}
        >
          Days (30)
        </button>
      </div>
    </div>
    <${ErrorBox} error=${usage.error} what="usage" />
    ${d && d.granularity === granularity ? html`<${Chart} key=${granularity} title=${`bytes per ${granularity}`} times=${d.times} series=${d.series} format=${bytes} />` : html`<p aria-busy="true">Loading…</p>`}
  </section>`;
}

export function ConnectionTables({ live, recent, onClose }) {
  return html`<div class="grid-2">
    <section>
      <h2>Live connections</h2>
      <${Table} label="live connections" head=${['target', 'up', 'down', 'since', ...(onClose ? [''] : [])]} empty="No open connections.">
        ${live.map(
          (c) =>
            html`<tr data-connection=${c.id}>
              <td>${c.target ?? '–'}${c.session ? html`<br /><small class="muted">session ${c.session}</small>` : null}</td>
              <td class="num">${bytes(c.bytesUp)}</td>
              <td class="num">${bytes(c.bytesDown)}</td>
              <td>${time(c.startedAt)}</td>
              ${onClose && html`<td><button type="button" class="small outline danger" onClick=${() => onClose(c)}>Close</button></td>`}
            </tr>`,
        )}
      <//>
    </section>
    <section>
      <h2>Recent connections</h2>
      <${Table} label="recent connections" head=${['started', 'target', 'up', 'down', 'duration', 'result']} empty="No records yet.">
        ${recent.map(
          (c) =>
            html`<tr>
              <td>${time(c.startedAt)}</td>
              <td>${c.target ?? '–'}</td>
              <td class="num">${bytes(c.bytesUp)}</td>
              <td class="num">${bytes(c.bytesDown)}</td>
              <td class="num">${duration(c.durationMs)}</td>
              <td>${c.result === 'ok' ? 'ok' : html`<mark title=${c.reason ?? ''}>${c.result}</mark>`}</td>
            </tr>`,
        )}
      <//>
    </section>
  </div>`;
}
