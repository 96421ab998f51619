// Overview: throughput and connections now and over the last hour, refusals and upstream failures, hedges,
// balances. The series comes from GET /v1/stats (sampled on the server); after the first answer only newer
// points are fetched.
import { html } from 'htm/preact';
import { useRef } from 'preact/hooks';
import { api } from '../api.js';
import { Chart } from '../chart.js';
import { ErrorBox, Table, usePoll } from '../components.js';
import { bytes, count, rate } from '../format.js';

/** Sums each key over the points. */
function sumBy(points, field) {
  const out = {};
  for (const p of points) for (const [k, v] of Object.entries(p[field] ?? {})) out[k] = (out[k] ?? 0) + v;
  return out;
}

function CountTable({ label, lastHour, total, empty }) {
  const keys = [...new Set([...Object.keys(total ?? {}), ...Object.keys(lastHour)])].sort();
  return html`<${Table} label=${label} head=${['', 'last hour', 'since start']} empty=${empty}>
    ${keys.map(
      (k) =>
        html`<tr>
          <th scope="row">${k.replace(/_/g, ' ')}</th>
          <td>${count(lastHour[k] ?? 0)}</td>
          <td>${count(total?.[k] ?? 0)}</td>
        </tr>`,
    )}
  <//>`;
}

export function OverviewPage() {
  const series = useRef({ points: [], last: 0 });
  const stats = usePoll(async () => {
    const s = series.current;
    const view = await api(`/v1/stats?since=${s.last}`);
    const cutoff = Date.now() - view.windowMs;
    s.points = [...s.points, ...view.points].filter((p) => p.t > cutoff);
    s.last = s.points.length ? s.points[s.points.length - 1].t : s.last;
    return view;
  }, 3000);
  const view = stats.data;
  const points = series.current.points;
  const last = points[points.length - 1];
  const times = points.map((p) => p.t / 1000);
  const connectionsHour = sumBy(points, 'connections');
  const refusalsHour = Object.fromEntries(Object.entries(connectionsHour).filter(([k]) => k !== 'ok'));
  const refusalsTotal = Object.fromEntries(Object.entries(view?.totals.connections ?? {}).filter(([k]) => k !== 'ok'));

  return html`<section>
    <${ErrorBox} error=${stats.error} what="stats" />
    <div class="cards">
      <article>
        <small>Throughput now</small>
        <p class="big" data-testid="throughput">${rate((last?.upBytesPerSec ?? 0) + (last?.downBytesPerSec ?? 0))}</p>
        <small>↑ ${rate(last?.upBytesPerSec)} · ↓ ${rate(last?.downBytesPerSec)}</small>
      </article>
      <article>
        <small>Open connections</small>
        <p class="big" data-testid="connections-active">${count(last?.connectionsActive ?? 0)}</p>
        <small>${count(connectionsHour.ok ?? 0)} served in the last hour</small>
      </article>
      <article>
        <small>Sticky sessions</small>
        <p class="big">${count(last?.sessionsActive ?? 0)}</p>
      </article>
      <article>
        <small>Relayed since start</small>
        <p class="big">${bytes((view?.totals.bytesUp ?? 0) + (view?.totals.bytesDown ?? 0))}</p>
      </article>
    </div>
    <div class="grid-2">
      <${Chart}
        title="Throughput (last hour)"
        times=${times}
        format=${rate}
        axisFormat=${bytes}
        series=${[
          { label: 'up', values: points.map((p) => p.upBytesPerSec) },
          { label: 'down', values: points.map((p) => p.downBytesPerSec) },
        ]}
      />
      <${Chart}
        title="Connections (last hour)"
        times=${times}
        format=${(v) => count(Math.round(v))}
        series=${[
          { label: 'open', values: points.map((p) => p.connectionsActive) },
          {
            label: 'refused or failed',
            values: points.map((p) => Object.entries(p.connections).reduce((a, [k, v]) => (k === 'ok' ? a : a + v), 0)),
          },
        ]}
      />
    </div>
    <div class="grid-3">
      <section>
        <h2>Refusals by reason</h2>
        <${CountTable} label="refusals by reason" lastHour=${refusalsHour} total=${refusalsTotal} empty="No refusals." />
      </section>
      <section>
        <h2>Upstream failures</h2>
        <${CountTable}
          label="upstream failures by reason"
          lastHour=${sumBy(points, 'failures')}
          total=${view?.totals.failures}
          empty="No upstream failures."
        />
      </section>
      <section>
        <h2>Hedged dials</h2>
        <${CountTable}
          label="hedged dials by outcome"
          lastHour=${sumBy(points, 'hedges')}
          total=${view?.totals.hedges}
          empty="No hedged dials."
        />
      </section>
    </div>
    <section>
      <h2>Balance per account</h2>
      <${Table} label="balances" head=${['account', 'product', 'balance']} empty="No balance read yet.">
        ${(view?.balances ?? []).map(
          (b) =>
            html`<tr>
              <td>${b.account}</td>
              <td>${b.product}</td>
              <td>${b.unit === 'MB' ? `${count(b.value)} MB` : bytes(b.value)}</td>
            </tr>`,
        )}
      <//>
    </section>
  </section>`;
}
