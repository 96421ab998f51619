// One customer (#/users/<name>): the quota bar with its period and state, the usage history (hours or days,
// up and down, GET /v1/usage?user=), live and recent connections, every field of the record editable, the
// actions of the list, its request rules and the bans in force (each can be lifted), and the access generator (the customer's endpoints in the formats people paste).
import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { api, itemsOf, query } from '../api.js';
import { AccessGenerator, flattenAreas } from '../access.js';
import { BansTable, RequestRulesTable } from '../bans.js';
import { ErrorBox, Notice, StateBadge, UserQuota, confirmed, usePoll } from '../components.js';
import { bytes, count, rate } from '../format.js';
import { ConnectionTables, UsageHistory } from '../usage-view.js';
import { UserForm, dateOf } from '../user-form.js';
import { userActions } from './users.js';

export function UserPage({ param }) {
  let name = param ?? '';
  try {
    name = decodeURIComponent(name);
  } catch {
    // kept as typed: the API answers 404 for it
  }
  const path = `/v1/users/${encodeURIComponent(name)}`;
  const user = usePoll(() => api(path), 3000, [name]);
  const live = usePoll(async () => itemsOf(await api('/v1/connections/active')).filter((c) => c.user === name), 3000, [name]);
  const recent = usePoll(async () => itemsOf(await api(`/v1/connections${query({ user: name, limit: 20 })}`)), 10_000, [name]);
  const areas = usePoll(() => api('/v1/areas'), 0, []);
  const [notice, setNotice] = useState();
  const [error, setError] = useState();
  const [formKey, setFormKey] = useState(0);
  const u = user.data;
  const act = (ask, action, done) =>
    confirmed(ask, action, {
      onDone: (r) => (setError(undefined), setNotice(done(r)), user.reload(), setFormKey((k) => k + 1)),
      onError: (e) => (setNotice(undefined), setError(e)),
    });
  const close = (c) =>
    act(
      { title: `Close connection ${c.id}?`, body: `${c.target ?? 'target'}: the client's connection is cut now.`, confirmLabel: 'Close' },
      () => api(`/v1/connections/${encodeURIComponent(c.id)}`, { method: 'DELETE' }),
      () => `Connection ${c.id} closed.`,
    );
  return html`<section class="user-page" data-user-page=${name}>
    <p><a href="#/users">← Users</a></p>
    <p class="user-name">
      ${u && html`<${StateBadge} user=${u} />`} ${u?.mainAccount ? html`<small class="muted">main account ${u.mainAccount}</small>` : null}
    </p>
    <${ErrorBox} error=${user.error} what=${name} />
    <${Notice}>${notice}<//>
    <${ErrorBox} error=${error} />
    ${
      u &&
      html`<div class="cards">
          <article>
            <small class="muted">used this period</small>
            <p class="big" data-testid="used">${bytes(u.usedBytes)}</p>
            <${UserQuota} user=${u} wide />
          </article>
          <article>
            <small class="muted">quota</small>
            <p class="big">${u.limitBytes >= 0 ? bytes(u.limitBytes) : 'unlimited'}</p>
            <small>${u.quota?.period ?? 'total'}</small>
          </article>
          <article>
            <small class="muted">connections</small>
            <p class="big">${count(u.activeConnections)}${u.maxConnections ? ` / ${u.maxConnections}` : ''}</p>
            <small>rate limit ${u.rateBytesPerSec ? rate(u.rateBytesPerSec) : 'none'}</small>
          </article>
          <article>
            <small class="muted">expires</small>
            <p class="big">${u.expiresAt ? dateOf(u.expiresAt) : 'never'}</p>
            <small>${u.pricePerGb !== null && u.pricePerGb !== undefined ? `${u.pricePerGb} per GB` : 'billing default price'}</small>
          </article>
        </div>
        <div class="actions">${userActions(u, act, { onDeleted: () => setTimeout(() => (location.hash = '#/users'), 0) })}</div>`
    }
    <${UsageHistory} load=${(q) => api(`/v1/usage${query({ ...q, user: name })}`)} />
    <${ConnectionTables} live=${live.data ?? []} recent=${recent.data ?? []} onClose=${close} />
    ${
      u &&
      html`<${AccessGenerator}
        user=${name}
        regions=${flattenAreas(areas.data)}
        load=${(q) => api(`${path}/endpoints${query(q)}`)}
        fetchText=${(q) => api(`${path}/endpoints${query(q)}`)}
        note="The customer's password is not kept in readable form: the lines show PASSWORD in its place. The customer's portal shows the real ones."
      />`
    }
    ${
      u &&
      html`<h3>Request rules and bans</h3>
        <${RequestRulesTable} rules=${u.requestRules} />
        <${BansTable} user=${name} />`
    }
    ${u && html`<${UserForm} key=${formKey} user=${u} title=${`Settings of ${name}`} onSaved=${(saved) => (setNotice(`Saved ${saved.name}.`), setError(undefined), user.reload())} />`}
  </section>`;
}
