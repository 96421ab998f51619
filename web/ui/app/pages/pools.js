// Pools and nodes (state, fails, probes, cooling until), sticky sessions with forced rotation, and the exits
// banned by request rules (each ban can be lifted).
import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { api, itemsOf } from '../api.js';
import { BansTable } from '../bans.js';
import { ErrorBox, Notice, Table, confirmed, usePoll } from '../components.js';
import { count, duration, relative, time } from '../format.js';

/** A node's last health probe, in whatever shape the pool reports it. */
function probeText(n) {
  const p = n.probe ?? n.lastProbe;
  if (!p) return html`<span class="muted">–</span>`;
  const result = p.result ?? (p.ok === true ? 'ok' : p.ok === false ? 'failed' : '');
  const latency = p.latencyMs ?? p.ms;
  return html`<span title=${`${time(p.at ?? p.time)}${p.reason ? ` — ${p.reason}` : ''}`}
    >${p.ok === false ? html`<mark>${result}</mark>` : result}${latency !== undefined ? ` · ${duration(latency)}` : ''}</span
  >`;
}

function Pool({ pool }) {
  const k = pool.key ?? {};
  return html`<details open>
    <summary>
      <strong>${k.user ?? pool.id}</strong> · ${k.productNo || 'default product'}${k.region ? ` · ${k.region}` : ''}
      <small class="muted">
        — ${pool.strategy}, ${pool.ready} ready, ${pool.cooling}
        cooling${pool.drawing ? ', drawing' : ''}${pool.ipsLeft !== undefined ? `, ${pool.ipsLeft} IPs left` : ''}</small
      >
    </summary>
    ${pool.drawError && html`<p class="error" role="alert">Draws failing (${pool.drawError.consecutive}×): <strong>${pool.drawError.code ?? ''}</strong> ${pool.drawError.message} — next try ${relative(pool.drawError.retryAt)}</p>`}
    <${Table}
      label=${`nodes of ${pool.id}`}
      head=${['node', 'address', 'state', 'fails', 'open', 'probe', 'cooling until', 'expires']}
      empty="No nodes."
    >
      ${(pool.nodes ?? []).map(
        (n) =>
          html`<tr>
            <td class="clip" title=${n.id}><code>${n.id}</code></td>
            <td>${n.protocol}://${n.host}:${n.port}</td>
            <td>
              ${n.state === 'cooling' ? html`<mark>cooling</mark>` : n.state}${n.awaitingProbe ? html`<br /><small class="muted">awaiting a probe</small>` : null}
            </td>
            <td class="num">${count(n.fails)}</td>
            <td class="num">${count(n.activeConnections)}</td>
            <td>${probeText(n)}</td>
            <td>
              ${n.coolingUntil && n.state === 'cooling' ? html`<span title=${time(n.coolingUntil)}>${relative(n.coolingUntil)}</span>` : '–'}
            </td>
            <td>${n.expiresAt ? html`<span title=${time(n.expiresAt)}>${relative(n.expiresAt)}</span>` : '–'}</td>
          </tr>`,
      )}
    <//>
  </details>`;
}

/** Sessions the page lists at most (the API counts the rest). */
const SESSIONS_SHOWN = 500;

export function PoolsPage() {
  const pools = usePoll(() => api('/v1/pools'), 3000);
  const sessions = usePoll(async () => {
    const r = await api(`/v1/sessions?limit=${SESSIONS_SHOWN}`, { withHeaders: true });
    return { items: itemsOf(r.data), total: Number(r.headers.get('x-total-count') ?? 0) };
  }, 2000);
  const shown = sessions.data?.items ?? [];
  const total = sessions.data?.total ?? shown.length;
  const [notice, setNotice] = useState();
  const [error, setError] = useState();
  const rotate = (s) =>
    confirmed(
      {
        title: `Rotate session ${s.sessionId} of ${s.user}?`,
        body: 'Its next connection leaves through a new upstream node.',
        confirmLabel: 'Rotate',
      },
      () => api(`/v1/sessions/${encodeURIComponent(s.user)}/${encodeURIComponent(s.sessionId)}`, { method: 'DELETE' }),
      {
        onDone: () => (setError(undefined), setNotice(`Session ${s.sessionId} of ${s.user} rotated.`), sessions.reload()),
        onError: (e) => (setNotice(undefined), setError(e)),
      },
    );
  return html`<section>
    <h2>Sticky sessions</h2>
    <${Notice}>${notice}<//>
    <${ErrorBox} error=${error} />
    <${ErrorBox} error=${sessions.error} what="sessions" />
    ${total > shown.length && html`<p class="muted" data-testid="sessions-shown">The first ${shown.length} of ${total} sessions.</p>`}
    <${Table} label="sticky sessions" head=${['user', 'session', 'node', 'started', 'expires', '']} empty="No sticky sessions.">
      ${shown.map(
        (s) =>
          html`<tr data-session=${s.sessionId}>
            <td>${s.user}</td>
            <td><code>${s.sessionId}</code></td>
            <td class="clip" title=${s.nodeId}><code data-testid="session-node">${s.nodeId}</code></td>
            <td>${time(s.startedAt)}</td>
            <td>${relative(s.expiresAt)}</td>
            <td><button type="button" class="small outline" onClick=${() => rotate(s)}>Rotate</button></td>
          </tr>`,
      )}
    <//>
    <h2>Bans in force</h2>
    <p class="muted">Exits a request rule banned for one customer: that customer's connections avoid them until the ban ends.</p>
    <${BansTable} />
    <h2>Pools</h2>
    <${ErrorBox} error=${pools.error} what="pools" />
    ${itemsOf(pools.data).length === 0 && !pools.loading ? html`<p class="muted">No pools yet: a pool is made on a user's first connection.</p>` : null}
    ${itemsOf(pools.data).map((p) => html`<${Pool} key=${p.id} pool=${p} />`)}
  </section>`;
}
