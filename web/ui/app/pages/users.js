// Users: one page of the list at a time (GET /v1/users?limit=&after=&prefix=&sort=, the next page's cursor in
// the x-next-cursor header), searched on the server by name prefix; quota bars with the user's state, current
// rate, connections and expiry; create, edit, disable/enable, delete, new password. Each name opens the
// customer's own page (#/users/<name>). The rate comes from GET /v1/stats.
import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { api, itemsOf, query } from '../api.js';
import { ErrorBox, Notice, StateBadge, Table, UserQuota, confirmed, usePoll } from '../components.js';
import { bytes, count, rate, time } from '../format.js';
import { UserForm, dateOf } from '../user-form.js';

const PAGE_SIZE = 100;

/** Disable/enable, new password and delete: each after a confirmation. */
export function userActions(u, act, { onDeleted } = {}) {
  const path = (rest = '') => `/v1/users/${encodeURIComponent(u.name)}${rest}`;
  return html` <button
      type="button"
      class="small outline"
      onClick=${() =>
        act(
          u.enabled === false
            ? { title: `Enable ${u.name}?`, body: 'The user may connect again.', confirmLabel: 'Enable', danger: false }
            : { title: `Disable ${u.name}?`, body: 'New connections are refused and the open ones are closed.', confirmLabel: 'Disable' },
          () => api(path(), { method: 'PATCH', body: { enabled: u.enabled === false } }),
          () => `${u.name} ${u.enabled === false ? 'enabled' : 'disabled'}.`,
        )}
    >
      ${u.enabled === false ? 'Enable' : 'Disable'}
    </button>
    <button
      type="button"
      class="small outline"
      onClick=${() =>
        act(
          {
            title: `New password for ${u.name}?`,
            body: 'The old password stops working at once. The new one is shown once.',
            confirmLabel: 'Generate',
          },
          () => api(path('/password'), { method: 'POST', body: {} }),
          (r) => html`New password for <strong>${u.name}</strong> (shown once): <code data-testid="new-password">${r?.password}</code>`,
        )}
    >
      New password
    </button>
    <button
      type="button"
      class="small outline danger"
      onClick=${() =>
        act(
          {
            title: `Delete ${u.name}?`,
            body: 'The user is removed and its open connections are closed. This cannot be undone.',
            confirmLabel: 'Delete',
          },
          () => api(path(), { method: 'DELETE' }),
          () => (onDeleted?.(), `${u.name} deleted.`),
        )}
    >
      Delete
    </button>`;
}

export function UsersPage() {
  // The search and the page: `cursors` holds the `after` of each page seen so far (Back pops it).
  const [search, setSearch] = useState({ prefix: '', sort: '' });
  const [cursors, setCursors] = useState(['']);
  const after = cursors[cursors.length - 1];
  const users = usePoll(
    async () => {
      const r = await api(`/v1/users${query({ limit: PAGE_SIZE, after, prefix: search.prefix, sort: search.sort })}`, {
        withHeaders: true,
      });
      return { items: itemsOf(r.data), next: r.headers.get('x-next-cursor'), total: r.headers.get('x-total-count') };
    },
    2000,
    [after, search.prefix, search.sort],
  );
  const stats = usePoll(() => api(`/v1/stats?since=${Date.now()}`), 3000);
  const [editing, setEditing] = useState(null); // null | 'new' | user
  const [notice, setNotice] = useState();
  const [error, setError] = useState();
  const rates = new Map((stats.data?.users ?? []).map((u) => [u.name, u.bytesPerSec]));
  const list = users.data?.items ?? [];
  const next = users.data?.next;
  const act = (ask, action, done) =>
    confirmed(ask, action, {
      onDone: (r) => (setError(undefined), setNotice(done(r)), users.reload()),
      onError: (e) => (setNotice(undefined), setError(e)),
    });
  const find = (e) => {
    e.preventDefault();
    const d = new FormData(e.currentTarget);
    setSearch({ prefix: String(d.get('prefix')).trim(), sort: String(d.get('sort')) });
    setCursors(['']);
  };

  return html`<section>
    <div class="actions">
      <button type="button" onClick=${() => (setNotice(undefined), setEditing('new'))}>New user</button>
      <form class="filters search" role="search" aria-label="find users" onSubmit=${find}>
        <label>Name starts with <input name="prefix" type="search" maxlength="32" /></label>
        <label
          >Order
          <select name="sort">
            <option value="">by name</option>
            <option value="usage">by usage</option>
          </select></label
        >
        <button type="submit" class="secondary">Find</button>
      </form>
    </div>
    ${
      editing &&
      html`<${UserForm}
        key=${editing === 'new' ? 'new' : editing.name}
        user=${editing === 'new' ? null : editing}
        onCancel=${() => setEditing(null)}
        onSaved=${(u, created) => {
          setEditing(null);
          setError(undefined);
          setNotice(
            created && u.password
              ? html`Created <strong>${u.name}</strong>. Password (shown once): <code data-testid="new-password">${u.password}</code>`
              : `Saved ${u.name}.`,
          );
          users.reload();
        }}
      />`
    }
    <${Notice}>${notice}<//>
    <${ErrorBox} error=${error} />
    <${ErrorBox} error=${users.error} what="users" />
    <${Table}
      label="users"
      head=${['user', 'state', 'used', 'quota', 'rate now', 'rate limit', 'connections', 'expires', '']}
      empty=${users.loading ? 'Loading…' : 'No users.'}
    >
      ${list.map(
        (u) =>
          html`<tr data-user=${u.name}>
            <th scope="row">
              <a href="#/users/${encodeURIComponent(u.name)}">${u.name}</a
              >${u.mainAccount ? html`<br /><small class="muted">${u.mainAccount}</small>` : null}
            </th>
            <td><${StateBadge} user=${u} /></td>
            <td class="num" data-testid="used">${bytes(u.usedBytes)}</td>
            <td><${UserQuota} user=${u} /></td>
            <td class="num">${rate(rates.get(u.name) ?? 0)}</td>
            <td class="num">${u.rateBytesPerSec ? rate(u.rateBytesPerSec) : html`<span class="muted">none</span>`}</td>
            <td class="num">${count(u.activeConnections)}${u.maxConnections ? ` / ${u.maxConnections}` : ''}</td>
            <td>
              ${u.expiresAt ? html`<time datetime=${u.expiresAt} title=${time(u.expiresAt)}>${dateOf(u.expiresAt)}</time>` : html`<span class="muted">never</span>`}
            </td>
            <td class="row-actions">
              <button type="button" class="small outline" onClick=${() => (setNotice(undefined), setEditing(u))}>Edit</button>
              ${userActions(u, act)}
            </td>
          </tr>`,
      )}
    <//>
    <nav class="pager" aria-label="pages of users">
      <button type="button" class="secondary small" disabled=${cursors.length < 2} onClick=${() => setCursors((c) => c.slice(0, -1))}>
        Previous
      </button>
      <small class="muted" data-testid="page"
        >${`page ${cursors.length}`}${list.length ? `: ${list[0].name} – ${list[list.length - 1].name}` : ''}${users.data?.total ? ` of ${count(Number(users.data.total))} users` : ''}</small
      >
      <button type="button" class="secondary small" disabled=${!next} onClick=${() => setCursors((c) => [...c, next])}>Next</button>
    </nav>
  </section>`;
}
