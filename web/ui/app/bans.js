// Request rules and the bans they made: a customer's rules in words, and the bans in force (GET /v1/bans,
// ?user= on a customer's page) with a way to lift one (DELETE /v1/bans/:id) after a confirmation.
import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { api, query } from './api.js';
import { ErrorBox, Notice, Table, confirmed, usePoll } from './components.js';
import { relative, time } from './format.js';

const ACTIONS = { retry: 'retry elsewhere', ban: 'ban the exit', retry_ban: 'retry elsewhere and ban the exit', tag: 'tag the record' };

/** What fires a rule, in words. */
function firesOn(r) {
  const parts = [];
  if (r.status?.length) parts.push(`status ${r.status.join(', ')}`);
  if (r.headers && Object.keys(r.headers).length)
    parts.push(
      `header ${Object.entries(r.headers)
        .map(([k, v]) => `${k} ~ "${v}"`)
        .join(', ')}`,
    );
  if (r.body) parts.push(`body /${r.body}/ in the first ${r.bodyBytes ?? 8192} bytes`);
  if (r.timeoutMs) parts.push(`no first byte in ${r.timeoutMs} ms`);
  return parts.join(' or ') || '–';
}

/** A user's request rules (checked before the global ones), read-only; the form below edits them. */
export function RequestRulesTable({ rules }) {
  return html`<${Table}
    label="request rules"
    head=${['rule', 'hosts', 'fires on', 'action', 'retries', 'ban']}
    empty="No request rules of this customer's own."
  >
    ${(rules ?? []).map(
      (r, i) =>
        html`<tr data-rule=${r.name ?? `user#${i}`}>
          <td><code>${r.name ?? `user#${i}`}</code></td>
          <td>${r.hosts?.length ? r.hosts.join(', ') : 'all'}</td>
          <td>${firesOn(r)}</td>
          <td>
            ${ACTIONS[r.action] ?? r.action}${r.methods?.length ? html`<br /><small class="muted">${r.methods.join(' ')}</small>` : null}
          </td>
          <td class="num">${r.action === 'retry' || r.action === 'retry_ban' ? (r.retries ?? 1) : '–'}</td>
          <td>
            ${r.action === 'ban' || r.action === 'retry_ban' ? `${r.banSeconds ?? 600} s${r.banHost ? ', that host only' : ''}` : '–'}
          </td>
        </tr>`,
    )}
  <//>`;
}

/** The bans in force (of one user when `user` is given), soonest to end first, each with a Lift button. */
export function BansTable({ user }) {
  const bans = usePoll(() => api(`/v1/bans${query({ user })}`), 3000, [user]);
  const [notice, setNotice] = useState();
  const [error, setError] = useState();
  const lift = (b) =>
    confirmed(
      {
        title: `Lift ban ${b.id}?`,
        body: `${b.user} may leave through ${b.exit}${b.host ? ` to ${b.host}` : ''} again at once.`,
        confirmLabel: 'Lift',
      },
      () => api(`/v1/bans/${encodeURIComponent(b.id)}`, { method: 'DELETE' }),
      {
        onDone: () => (setError(undefined), setNotice(`Ban ${b.id} lifted.`), bans.reload()),
        onError: (e) => (setNotice(undefined), setError(e), bans.reload()),
      },
    );
  const head = [...(user === undefined ? ['user'] : []), 'exit', 'node', 'target host', 'rule', 'since', 'ends', ''];
  return html`<div class="bans">
    <${Notice}>${notice}<//>
    <${ErrorBox} error=${error} />
    <${ErrorBox} error=${bans.error} what="bans" />
    <${Table} label="bans in force" head=${head} empty="No bans in force.">
      ${(Array.isArray(bans.data) ? bans.data : []).map(
        (b) =>
          html`<tr data-ban=${b.id}>
            ${user === undefined ? html`<td><a href=${`#/users/${encodeURIComponent(b.user)}`}>${b.user}</a></td>` : null}
            <td>${b.exit}</td>
            <td class="clip" title=${b.node}><code>${b.node}</code></td>
            <td>${b.host ?? html`<span class="muted">every host</span>`}</td>
            <td><code>${b.rule}</code></td>
            <td>${time(b.createdAt)}</td>
            <td><span title=${time(b.until)}>${relative(b.until)}</span></td>
            <td><button type="button" class="small outline" data-lift=${b.id} onClick=${() => lift(b)}>Lift</button></td>
          </tr>`,
      )}
    <//>
  </div>`;
}
