// Pieces every page uses: polling, error display, the confirmation dialog, quota bars.
import { html } from 'htm/preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';

/**
 * The pages' refresh periods times this factor: 1 unless the tab's sessionStorage holds `rotor.refreshScale`
 * (0.05-20), which the browser tests set so a refresh is waited for in a fraction of the period. Never under
 * 100 ms.
 */
function refreshScale() {
  const scale = Number(globalThis.sessionStorage?.getItem('rotor.refreshScale'));
  return scale >= 0.05 && scale <= 20 ? scale : 1;
}

/**
 * Calls `load` now and every `everyMs` (0 = once; scaled by refreshScale) while mounted; `reload()` calls it at
 * once. The last good data stays on screen while a later call fails; the error is shown beside it.
 */
export function usePoll(load, everyMs, deps = []) {
  const [state, setState] = useState({ data: undefined, error: undefined, loading: true });
  const loadRef = useRef(load);
  loadRef.current = load;
  const tick = useRef(0);
  const reload = useCallback(async () => {
    const mine = ++tick.current;
    try {
      const data = await loadRef.current();
      if (mine === tick.current) setState({ data, error: undefined, loading: false });
    } catch (error) {
      if (mine === tick.current) setState((s) => ({ data: s.data, error, loading: false }));
    }
  }, []);
  useEffect(() => {
    let stopped = false;
    let timer;
    const run = async () => {
      await reload();
      if (!stopped && everyMs > 0) timer = setTimeout(run, Math.max(100, everyMs * refreshScale()));
    };
    setState((s) => ({ ...s, loading: true }));
    void run();
    return () => {
      stopped = true;
      clearTimeout(timer);
      tick.current++;
    };
  }, deps);
  return { ...state, reload };
}

/** The API's error as it said it: status, code, message, platform code. */
export function ErrorBox({ error, what }) {
  if (!error) return null;
  const where = what ? `${what}: ` : '';
  const status = error.status ? `${error.status} ` : '';
  const code = error.code ? `${error.code}` : 'ERROR';
  const platform = error.platformCode !== undefined ? ` (platform code ${error.platformCode})` : '';
  const missing =
    error.status === 404 && /^no route /.test(error.message) ? html`<br /><small>This daemon does not have this route yet.</small>` : null;
  return html`<p class="error" role="alert">${where}<strong>${status}${code}</strong>: ${error.message}${platform}${missing}</p>`;
}

/** A line that says what just happened (a created user, a placed order). */
export function Notice({ children }) {
  return children ? html`<p class="notice" role="status">${children}</p>` : null;
}

// ───────────── confirmation ─────────────

let openConfirm;

/**
 * Asks before a destructive action; resolves true only when confirmed. One modal dialog (native <dialog>:
 * focus stays inside, Escape cancels), focus starts on Cancel so Enter alone does not destroy anything.
 */
export function confirmAction({ title, body, confirmLabel = 'Confirm', danger = true }) {
  return new Promise((resolve) => openConfirm({ title, body, confirmLabel, danger, resolve }));
}

export function ConfirmHost() {
  const [ask, setAsk] = useState(null);
  const dialog = useRef(null);
  openConfirm = setAsk;
  useEffect(() => {
    const d = dialog.current;
    if (ask && d && !d.open) d.showModal();
  }, [ask]);
  const done = (answer) => {
    dialog.current?.close();
    ask?.resolve(answer);
    setAsk(null);
  };
  return html`<dialog ref=${dialog} aria-labelledby="confirm-title" onCancel=${(e) => (e.preventDefault(), done(false))}>
    ${
      ask &&
      html`<article>
        <h3 id="confirm-title">${ask.title}</h3>
        <p>${ask.body}</p>
        <footer>
          <button type="button" class="secondary" autofocus onClick=${() => done(false)}>Cancel</button>
          <button type="button" class=${ask.danger ? 'danger' : ''} onClick=${() => done(true)}>${ask.confirmLabel}</button>
        </footer>
      </article>`
    }
  </dialog>`;
}

/** Runs `action` after a confirmation; reports success or the API's error through the setters. */
export async function confirmed(ask, action, { onDone, onError }) {
  if (!(await confirmAction(ask))) return;
  try {
    const result = await action();
    onDone?.(result);
  } catch (error) {
    onError?.(error);
  }
}

export function QuotaBar({ used, limit, level: forced }) {
  if (limit === undefined || limit === null || limit < 0) return html`<span class=${forced ? 'quota full' : 'muted'}>unlimited</span>`;
  const pct = limit === 0 ? 100 : Math.min(100, (used / limit) * 100);
  const level = forced ?? (pct >= 100 ? 'full' : pct >= 80 ? 'high' : 'ok');
  return html`<div class="quota ${level}" title="${pct.toFixed(1)} %">
    <progress value=${Math.min(used, limit)} max=${limit || 1} aria-label="quota used"></progress>
    <small>${pct.toFixed(pct < 10 ? 1 : 0)} %</small>
  </div>`;
}

/** A labelled table that scrolls sideways on narrow screens. */
export function Table({ label, head, children, empty = 'Nothing yet.' }) {
  const rows = [].concat(children).filter(Boolean);
  return html`<div class="table-wrap" role="region" aria-label=${label} tabindex="0">
    <table>
      <thead>
        <tr>
          ${head.map((h) => html`<th scope="col">${h}</th>`)}
        </tr>
      </thead>
      <tbody>
        ${
          rows.length
            ? rows
            : html`<tr>
                <td colspan=${head.length} class="muted">${empty}</td>
              </tr>`
        }
      </tbody>
    </table>
  </div>`;
}

/**
 * What a user's customer is living through now, worst first: disabled, expired, spent (refused at 100 % of
 * the quota), near limit (80 % and up), or enabled. The proxy refuses the first three: they never show as
 * "enabled" with a normal bar.
 */
export function userState(u, now = Date.now()) {
  if (!u) return { key: 'unknown', label: '–' };
  if (u.enabled === false) return { key: 'disabled', label: 'disabled' };
  if (u.expiresAt && Date.parse(u.expiresAt) <= now) return { key: 'expired', label: 'expired' };
  if (u.limitBytes !== undefined && u.limitBytes >= 0 && u.usedBytes >= u.limitBytes) return { key: 'spent', label: 'quota spent' };
  if (u.limitBytes > 0 && u.usedBytes >= 0.8 * u.limitBytes) return { key: 'near', label: 'near limit' };
  if (u.account && u.account.state && u.account.state !== 'ok') return { key: 'account', label: u.account.reason ?? u.account.state };
  return { key: 'enabled', label: 'enabled' };
}

export function StateBadge({ user }) {
  const s = userState(user);
  return s.key === 'enabled'
    ? html`<span class="state ok" data-state="enabled">enabled</span>`
    : html`<mark class="state ${s.key}" data-state=${s.key}>${s.label}</mark>`;
}

/** The quota bar with its period and the user's state: a refused user's bar is red, whatever the bytes. */
export function UserQuota({ user, wide = false }) {
  const s = userState(user);
  const period = user.quota?.period && user.quota.period !== 'total' ? `per ${user.quota.period}` : '';
  const level = s.key === 'disabled' || s.key === 'expired' || s.key === 'spent' ? 'full' : undefined;
  return html`<div class=${wide ? 'quota-wide' : ''}>
    <${QuotaBar} used=${user.usedBytes} limit=${user.limitBytes} level=${level} />
    ${period || user.periodKey ? html`<small class="muted">${period}${user.periodKey && user.periodKey !== 'total' ? ` (${user.periodKey.replace(/^\w+:/, '')})` : ''}</small>` : null}
  </div>`;
}
