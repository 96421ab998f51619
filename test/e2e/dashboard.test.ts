// The dashboard in a real browser (Debian's Chromium through playwright-core) against the real daemon on the
// embedded sandbox, with an admin token set: log in (and a wrong token refused with the API's words), create a
// user, see a user's bytes move on the users page while traffic flows through the proxy, place an open order
// and watch it reach success without a reload, force-rotate a sticky session (and cancel once: nothing
// happens), close a live connection, use it by keyboard, see API errors as the API wrote them.
// A form being edited is never touched by the page's refreshes (typed into, two refreshes waited for, saved,
// read back through the API).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import type { Page } from 'playwright-core';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { curl, startGateway, viaHttp, type Gateway } from './harness.ts';
import { startTarget, type BytesTarget } from './limits-harness.ts';
import { launchChromium, type Browser } from '../support/browser.ts';

const TOKEN = 'dash-admin-token-7Yq2';
const MIB = 1024 * 1024;

let gw: Gateway;
let target: BytesTarget;
let browser: Browser;

before(async () => {
  gw = await startGateway({ config: { admin: { token: TOKEN } } });
  target = await startTarget();
  browser = await launchChromium();
  // Every tab refreshes its data four times as often as a user's (web/ui/app/components.js refreshScale): the
  // tests below wait for refreshes (events, never sleeps), and each wait is a quarter of the period.
  await browser.context.addInitScript(() => (globalThis as unknown as PageGlobals).sessionStorage.setItem('rotor.refreshScale', '0.25'));
});

after(async () => {
  await browser?.close();
  await target?.close();
  await gw?.close();
});

const pageErrors: string[] = [];

/** The page's document and storage, typed for the few calls made inside page.evaluate (runs in the browser). */
interface PageGlobals {
  document: {
    querySelector(selector: string): { textContent: string | null } | null;
    activeElement: { textContent: string | null; getAttribute(name: string): string | null } | null;
  };
  sessionStorage: { getItem(key: string): string | null; setItem(key: string, value: string): void };
}
const focusedText = (page: Page) => page.evaluate(() => (globalThis as unknown as PageGlobals).document.activeElement?.textContent ?? null);
const storedToken = (page: Page) => page.evaluate(() => (globalThis as unknown as PageGlobals).sessionStorage.getItem('rotor.adminToken'));

/** A new tab (its script errors are collected: every test ends with none). */
async function newPage(): Promise<Page> {
  const page = await browser.context.newPage();
  page.on('pageerror', (err) => pageErrors.push(err.message));
  return page;
}

/** Closes the tab; fails when the page threw. */
async function done(page: Page): Promise<void> {
  await page.close();
  assert.deepEqual(pageErrors.splice(0), [], 'no script errors in the page');
}

/** A new tab, logged in, on `route` (#/users …). */
async function loggedIn(route = 'overview'): Promise<Page> {
  const page = await newPage();
  await page.goto(`${gw.adminUrl}/ui/`);
  await page.getByLabel('Admin token').fill(TOKEN);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
  if (route !== 'overview') await page.goto(`${gw.adminUrl}/ui/#/${route}`);
  return page;
}

/** Clicks the confirmation dialog's button named `name` (Confirm / Cancel …) once the dialog is open. */
async function answerDialog(page: Page, name: string): Promise<void> {
  const dialog = page.getByRole('dialog');
  await dialog.waitFor();
  await dialog.getByRole('button', { name, exact: true }).click();
  await dialog.waitFor({ state: 'hidden' });
}

/** The bytes shown in a user's "used" cell, back in bytes. */
async function shownUsedBytes(page: Page, user: string): Promise<number> {
  const text = (await page.locator(`tr[data-user="${user}"] [data-testid=used]`).textContent()) ?? '';
  const m = /^([\d.]+) (B|KiB|MiB|GiB)$/.exec(text.trim());
  assert.ok(m, `a byte count in the used cell, got ${JSON.stringify(text)}`);
  return Number(m[1]) * 1024 ** ['B', 'KiB', 'MiB', 'GiB'].indexOf(m[2]!);
}

/** Holds a CONNECT tunnel open through the HTTP listener (resolves once the proxy answered 200). */
function openTunnel(user: string, pass: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: gw.ports.http });
    const auth = Buffer.from(`${user}:${pass}`).toString('base64');
    let head = '';
    socket.once('error', reject);
    socket.on('data', function onData(chunk: Buffer) {
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      socket.off('data', onData);
      if (/^HTTP\/1\.[01] 200/.test(head)) resolve(socket);
      else reject(new Error(`CONNECT refused: ${head.split('\r\n')[0]}`));
    });
    socket.write(
      `CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nHost: 127.0.0.1:${target.port}\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`,
    );
  });
}

describe('dashboard in Chromium', () => {
  test("the page and its assets load without a token; the data needs it; a wrong token is refused with the API's message", async () => {
    const page = await newPage();
    const failed: string[] = [];
    const offsite: string[] = [];
    page.on('requestfailed', (r) => failed.push(r.url()));
    page.on('request', (r) => {
      if (!r.url().startsWith(`${gw.adminUrl}/`)) offsite.push(r.url());
    });
    await page.goto(`${gw.adminUrl}/ui/`);
    await page.getByLabel('Admin token').waitFor();
    // A first visit is asked to log in, not shown the 401 of the page's own check without a token.
    assert.equal(
      await page.getByRole('alert').count(),
      0,
      `an error before any login: ${await page.locator('[role=alert]').allTextContents()}`,
    );
    await page.getByLabel('Admin token').fill('not-the-token');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('alert').filter({ hasText: '401 UNAUTHORIZED' }).waitFor();
    assert.match((await page.getByRole('alert').textContent()) ?? '', /401 UNAUTHORIZED: bad token/);
    assert.equal(await storedToken(page), null, 'a refused token is not kept');
    await page.getByLabel('Admin token').fill(TOKEN);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
    assert.equal(await storedToken(page), TOKEN);
    // The balance the balance watcher read shows on the overview.
    await page.locator('table[aria-label], [aria-label=balances] td').filter({ hasText: 'shop1' }).first().waitFor();
    assert.deepEqual(failed, []);
    assert.deepEqual(offsite, [], 'every request stays on the admin origin (no CDN)');
    await done(page);
  });

  test('a page asked for as soon as the login draws the shell is the page shown (the hash change before the route listener)', async () => {
    const page = await newPage();
    await page.goto(`${gw.adminUrl}/ui/`);
    // The moment the shell's first heading is in the document (a microtask after the render, before the app's
    // effects run), the hash moves to the users page, as a link followed at once would.
    // (A string: the test's TypeScript has no DOM types.)
    await page.evaluate(`{
      const seen = new MutationObserver(() => {
        if (document.querySelector('h1')?.textContent === 'Overview') {
          seen.disconnect();
          location.hash = '#/users';
        }
      });
      seen.observe(document.body, { childList: true, subtree: true, characterData: true });
    }`);
    await page.getByLabel('Admin token').fill(TOKEN);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Users', level: 1 }).waitFor({ timeout: 10_000 });
    await page.locator('tr[data-user="alice"]').waitFor({ timeout: 10_000 });
    await done(page);
  });

  test("traffic through the proxy moves a user's bytes on the users page", async () => {
    const page = await loggedIn('users');
    await page.locator('tr[data-user="alice"]').waitFor();
    const before = await shownUsedBytes(page, 'alice');
    const r = await curl([...viaHttp(gw.ports.http, 'alice', 'alice-pass'), target.url(2 * MIB), '-o', '/dev/null']);
    assert.equal(r.exitCode, 0, r.stderr);
    await page.waitForFunction(
      ({ min }) => {
        const text =
          (globalThis as unknown as PageGlobals).document.querySelector('tr[data-user="alice"] [data-testid=used]')?.textContent ?? '';
        const m = /^([\d.]+) (B|KiB|MiB|GiB)$/.exec(text.trim());
        return m !== null && Number(m[1]) * 1024 ** ['B', 'KiB', 'MiB', 'GiB'].indexOf(m[2]!) >= min;
      },
      { min: before + 2 * MIB * 0.99 },
    );
    assert.ok((await shownUsedBytes(page, 'alice')) >= before + 2 * MIB * 0.99);
    await done(page);
  });

  test('create a user, then its traffic shows on the users page', async () => {
    const page = await loggedIn('users');
    await page.getByRole('button', { name: 'New user' }).click();
    const form = page.getByRole('form', { name: 'new user' });
    await form.getByLabel('Name', { exact: true }).fill('cust1');
    await form.getByLabel('Main account').fill('shop1');
    await form.getByLabel('Password').fill('cust1-pass');
    await form.getByLabel('Quota, MiB').fill('50');
    await form.getByRole('button', { name: 'Create user' }).click();
    // The creation's answer, not the row: the page's periodic listing shows a user still being created (its
    // platform step under way), and the proxy answers 407 for it until it is ready.
    await page
      .getByText(/(Saved|Created) cust1\b/)
      .first()
      .waitFor();
    await page.locator('tr[data-user="cust1"]').waitFor();
    const r = await curl([...viaHttp(gw.ports.http, 'cust1', 'cust1-pass'), target.url(MIB), '-o', '/dev/null']);
    assert.equal(r.exitCode, 0, r.stderr);
    assert.equal(r.status, 200);
    await page.locator('tr[data-user="cust1"] [data-testid=used]').filter({ hasText: /MiB$/ }).waitFor();
    assert.ok((await shownUsedBytes(page, 'cust1')) >= MIB * 0.99);
    await done(page);
  });

  test('a user is edited, disabled, given a new password and deleted, each after a confirmation', async () => {
    const created = await gw.admin('/v1/users', { body: { name: 'cust2', mainAccount: 'shop1', password: 'cust2-pass' } });
    assert.equal(created.status, 201);
    const page = await loggedIn('users');
    const row = page.locator('tr[data-user="cust2"]');
    await row.waitFor();

    // Edit: a 5 MiB monthly quota and 3 connections at most.
    await row.getByRole('button', { name: 'Edit' }).click();
    await page.getByLabel('Quota, MiB').fill('5');
    await page.getByLabel('Quota period').selectOption('month');
    await page.getByLabel('Max connections').fill('3');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved cust2.' }).waitFor();
    const edited = await gw.admin<{ quota: { bytes: number; period: string }; maxConnections: number }>('/v1/users/cust2');
    assert.deepEqual(edited.body.quota, { bytes: 5 * MIB, period: 'month' });
    assert.equal(edited.body.maxConnections, 3);
    await row.locator('progress').waitFor();

    // Disable: refused at the proxy afterwards.
    await row.getByRole('button', { name: 'Disable' }).click();
    await answerDialog(page, 'Disable');
    await row.getByText('disabled', { exact: true }).waitFor();
    const refused = await curl([...viaHttp(gw.ports.http, 'cust2', 'cust2-pass'), target.url(16), '-o', '/dev/null']);
    assert.equal(refused.status, 403);

    // New password: shown once; the old one stops working.
    await row.getByRole('button', { name: 'New password' }).click();
    await answerDialog(page, 'Generate');
    const password = (await page.getByTestId('new-password').textContent()) ?? '';
    assert.ok(password.length >= 8, 'a generated password is shown');
    await row.getByRole('button', { name: 'Enable' }).click();
    await answerDialog(page, 'Enable');
    await row.getByText('enabled', { exact: true }).waitFor();
    assert.equal((await curl([...viaHttp(gw.ports.http, 'cust2', password), target.url(16), '-o', '/dev/null'])).status, 200);
    assert.equal((await curl([...viaHttp(gw.ports.http, 'cust2', 'cust2-pass'), target.url(16), '-o', '/dev/null'])).status, 407);

    // Delete.
    await row.getByRole('button', { name: 'Delete' }).click();
    await answerDialog(page, 'Delete');
    await row.waitFor({ state: 'detached' });
    assert.equal((await gw.admin('/v1/users/cust2')).status, 404);
    await done(page);
  });

  test("an open order placed from the page reaches success without a reload; its instance's password is reset, its proxy changed, then it is released", async () => {
    const page = await loggedIn('orders');
    const form = page.getByRole('form', { name: 'open an order' });
    await form.getByLabel('Product').selectOption(SIM_PRODUCTS.staticUsSocks);
    await form.getByRole('button', { name: 'Open…' }).click();
    await answerDialog(page, 'Place order');
    const status = page.locator('[data-order] [data-testid=order-status]');
    await status.filter({ hasText: 'succeeded' }).waitFor({ timeout: 20_000 });
    const no = await page.locator('[data-order]').getAttribute('data-order');
    const order = await gw.admin<{ status: number; instances?: { instanceNo: string }[] }>(`/v1/orders/${no}`);
    assert.equal(order.body.status, 3, 'the platform says succeeded too');
    // The new instance appears in the instances list without a reload.
    const instanceNo = order.body.instances?.[0]?.instanceNo;
    assert.ok(instanceNo);
    const row = page.locator(`tr[data-instance="${instanceNo}"]`);
    await row.waitFor();

    // Reset its password: confirmed, then said done; the platform changed it.
    const platformPassword = async () =>
      (await gw.admin<{ data: { pwd?: string }[] }>('/v1/platform/GetInstance', { body: { instances: [instanceNo] } })).body.data[0]?.pwd;
    const before = await platformPassword();
    assert.ok(before, 'the platform reports the instance password');
    await row.getByRole('button', { name: 'Reset password' }).click();
    await answerDialog(page, 'Reset');
    await page
      .getByRole('status')
      .filter({ hasText: `Password of ${instanceNo} reset` })
      .waitFor();
    assert.notEqual(await platformPassword(), before);

    // Change its proxy: a change order, followed on the page to success.
    await row.getByRole('button', { name: 'Change' }).click();
    await answerDialog(page, 'Change');
    await page
      .locator('[data-order]')
      .filter({ hasText: 'change' })
      .locator('[data-testid=order-status]')
      .filter({ hasText: 'succeeded' })
      .waitFor({ timeout: 20_000 });

    // The open order's details.
    await page
      .getByRole('region', { name: 'orders' })
      .locator('tr')
      .filter({ hasText: no! })
      .getByRole('button', { name: 'Details' })
      .click();
    const details = page.getByRole('article', { name: 'order details' });
    await details.getByText('succeeded').waitFor();
    assert.match((await details.textContent()) ?? '', new RegExp(instanceNo));

    // Release it: selected, confirmed, the release order followed to success, the instance shown released.
    await row.getByRole('checkbox').check();
    await page.getByRole('button', { name: 'Release selected' }).click();
    await answerDialog(page, 'Release');
    await page
      .locator('[data-order]')
      .filter({ hasText: 'release' })
      .locator('[data-testid=order-status]')
      .filter({ hasText: 'succeeded' })
      .waitFor({ timeout: 20_000 });
    await row.filter({ hasText: 'released' }).waitFor({ timeout: 20_000 });
    await done(page);
  });

  test('a sticky session is force-rotated from the pools page (Cancel first: nothing happens)', async () => {
    const r = await curl([...viaHttp(gw.ports.http, 'alice-session-s1', 'alice-pass'), target.url(1024), '-o', '/dev/null']);
    assert.equal(r.exitCode, 0, r.stderr);
    const page = await loggedIn('pools');
    const row = page.locator('tr[data-session="s1"]');
    await row.waitFor();
    await row.getByRole('button', { name: 'Rotate' }).click();
    await answerDialog(page, 'Cancel');
    const still = await gw.admin<{ sessionId: string }[]>('/v1/sessions');
    assert.ok(
      still.body.some((s) => s.sessionId === 's1'),
      'cancelled: the session is still there',
    );
    const manualBefore = await gw.metric('rotor_session_rotations_total', { reason: 'manual' });

    await row.getByRole('button', { name: 'Rotate' }).click();
    await answerDialog(page, 'Rotate');
    await page.getByRole('status').filter({ hasText: 'Session s1 of alice rotated.' }).waitFor();
    await row.waitFor({ state: 'detached' });
    const now = await gw.admin<{ sessionId: string }[]>('/v1/sessions');
    assert.ok(!now.body.some((s) => s.sessionId === 's1'));
    assert.equal(await gw.metric('rotor_session_rotations_total', { reason: 'manual' }), manualBefore + 1);
    await done(page);
  });

  test('a live connection is closed from the connections page', async () => {
    const socket = await openTunnel('alice', 'alice-pass');
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    const page = await loggedIn('connections');
    const row = page.locator('tr[data-connection]').filter({ hasText: 'alice' }).first();
    await row.waitFor();
    await row.getByRole('button', { name: 'Close' }).click();
    await answerDialog(page, 'Close');
    await page.getByRole('status').filter({ hasText: 'closed' }).waitFor();
    await closed;
    assert.ok(socket.destroyed);
    await done(page);
  });

  test("a form being edited survives the list's refreshes: every field typed, two refreshes waited for, saved, read back", async () => {
    assert.equal((await gw.admin('/v1/users', { body: { name: 'form1', mainAccount: 'shop1', password: 'form1-pass' } })).status, 201);
    const page = await loggedIn('users');
    const row = page.locator('tr[data-user="form1"]');
    await row.waitFor();
    await row.getByRole('button', { name: 'Edit' }).click();
    const form = page.getByRole('form', { name: 'edit form1' });
    await form.getByLabel('Product').fill(SIM_PRODUCTS.dynamicTraffic);
    await form.getByLabel('Quota, MiB').fill('100');
    await form.getByLabel('Quota period').selectOption('day');
    await form.getByLabel('Rate limit, KiB/s').fill('512');
    await form.getByLabel('Max connections').fill('7');
    await form.getByLabel('Expires on').fill('2031-05-17');
    await form.getByLabel('Price per GB').fill('2.5');
    await form.getByLabel('Dedicated port').fill('0');
    await form.getByLabel('Port allow list').fill('127.0.0.9, 127.0.1.0/24');
    await form.getByLabel('Denied hosts').fill('*.blocked.example');
    await form.getByLabel('Denied ports').fill('25, 465');
    await form.getByLabel('Allowed hosts only').fill('');
    await form.getByLabel('Allowed ports only').fill('');
    await form.getByLabel('Enabled').uncheck();
    // Refreshes of the list answer while the form holds what was typed (waited for, not slept): the third is
    // only asked for once the second's answer was set and rendered (usePoll arms its timer after that).
    for (let i = 0; i < 3; i++)
      await page.waitForResponse((r) => new URL(r.url()).pathname === '/v1/users' && r.request().method() === 'GET' && r.status() === 200);
    assert.equal(await form.getByLabel('Quota, MiB').inputValue(), '100', 'the quota is as typed after two refreshes');
    assert.equal(await form.getByLabel('Rate limit, KiB/s').inputValue(), '512');
    assert.equal(await form.getByLabel('Max connections').inputValue(), '7');
    assert.equal(await form.getByLabel('Quota period').inputValue(), 'day');
    assert.equal(await form.getByLabel('Enabled').isChecked(), false);
    await form.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved form1.' }).waitFor();
    const saved = await gw.admin<{
      product: string;
      quota: { bytes: number; period: string };
      rateBytesPerSec: number;
      maxConnections: number;
      expiresAt: string;
      pricePerGb: number;
      listen: { port: number; allowIps: string[] };
      rules: { denyHosts: string[]; denyPorts: number[]; allowHosts: string[]; allowPorts: number[] };
      enabled: boolean;
    }>('/v1/users/form1');
    assert.equal(saved.body.product, SIM_PRODUCTS.dynamicTraffic);
    assert.deepEqual(saved.body.quota, { bytes: 100 * MIB, period: 'day' });
    assert.equal(saved.body.rateBytesPerSec, 512 * 1024);
    assert.equal(saved.body.maxConnections, 7);
    assert.equal(Date.parse(saved.body.expiresAt), Date.parse('2031-05-17T23:59:59Z'));
    assert.equal(saved.body.pricePerGb, 2.5);
    assert.equal(saved.body.listen.port, 0);
    assert.deepEqual(saved.body.listen.allowIps, ['127.0.0.9', '127.0.1.0/24']);
    assert.deepEqual(saved.body.rules.denyHosts, ['*.blocked.example']);
    assert.deepEqual(saved.body.rules.denyPorts, [25, 465]);
    assert.equal(saved.body.enabled, false);
    // The list shows the refusal as it is: a disabled customer, not "enabled" with a normal bar.
    await row.locator('[data-state=disabled]').waitFor();
    await done(page);
  });

  test('the users page reads one page of 100 at a time, searched on the server by name prefix', async () => {
    const rows = Array.from({ length: 105 }, (_, i) => ({ name: `pg${String(i).padStart(3, '0')}`, mainAccount: 'shop1' }));
    const batch = await gw.admin<{ created: number }>('/v1/users/batch', { body: { users: rows } });
    assert.equal(batch.status, 200, JSON.stringify(batch.body));
    assert.equal(batch.body.created, 105);
    const page = await loggedIn('users');
    const asked: string[] = [];
    page.on('request', (r) => {
      const u = new URL(r.url());
      if (u.pathname === '/v1/users') asked.push(u.search);
    });
    await page.getByRole('search', { name: 'find users' }).getByLabel('Name starts with').fill('pg');
    await page.getByRole('search', { name: 'find users' }).getByRole('button', { name: 'Find' }).click();
    await page.locator('tr[data-user="pg099"]').waitFor();
    assert.equal(await page.locator('tr[data-user]').count(), 100, 'one page of 100');
    assert.equal(await page.locator('tr[data-user="alice"]').count(), 0, 'only names starting with pg');
    assert.ok(
      asked.some((q) => /(^|[?&])prefix=pg(&|$)/.test(q) && /limit=100/.test(q)),
      `the search went to the server: ${asked.join(' ')}`,
    );
    await page.getByRole('navigation', { name: 'pages of users' }).getByRole('button', { name: 'Next' }).click();
    await page.locator('tr[data-user="pg104"]').waitFor();
    assert.equal(await page.locator('tr[data-user]').count(), 5);
    assert.equal(
      (await page.getByTestId('page').textContent())?.replace(/\s+/g, ' ').trim(),
      'page 2: pg100 – pg104 of 105 users',
      'the pager names the page, its first and last user and the count',
    );
    assert.ok(
      asked.some((q) => /after=pg099/.test(q)),
      'the next page asked after the last name',
    );
    await page.getByRole('navigation', { name: 'pages of users' }).getByRole('button', { name: 'Previous' }).click();
    await page.locator('tr[data-user="pg000"]').waitFor();
    await done(page);
  });

  test('keyboard: log in with Enter, move between pages with Tab, Escape cancels a confirmation', async () => {
    const page = await newPage();
    await page.goto(`${gw.adminUrl}/ui/`);
    await page.getByLabel('Admin token').waitFor();
    // The token field has the focus on load (waited for: the page focuses it after it renders).
    await page.waitForFunction(
      () => (globalThis as unknown as PageGlobals).document.activeElement?.getAttribute('name') === 'token',
      undefined,
      { timeout: 5000 },
    );
    await page.keyboard.type(TOKEN);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
    // Tab to the "Pools & sessions" link and follow it.
    let reached = false;
    for (let i = 0; i < 12 && !reached; i++) {
      await page.keyboard.press('Tab');
      reached = (await focusedText(page)) === 'Pools & sessions';
    }
    assert.ok(reached, 'the navigation is reachable by Tab');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Pools & sessions', level: 1 }).waitFor();
    await curl([...viaHttp(gw.ports.http, 'alice-session-k1', 'alice-pass'), target.url(16), '-o', '/dev/null']);
    const rotate = page.locator('tr[data-session="k1"]').getByRole('button', { name: 'Rotate' });
    await rotate.focus();
    await page.keyboard.press('Enter');
    await page.getByRole('dialog').waitFor();
    assert.equal(await focusedText(page), 'Cancel', 'focus starts on Cancel');
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'hidden' });
    const sessions = await gw.admin<{ sessionId: string }[]>('/v1/sessions');
    assert.ok(
      sessions.body.some((s) => s.sessionId === 'k1'),
      'Escape rotated nothing',
    );
    await done(page);
  });

  test('a daemon without an admin token opens on the overview, with no login', async () => {
    const open = await startGateway({ config: { admin: { token: '' } } });
    try {
      const page = await newPage();
      await page.goto(`${open.adminUrl}/ui/`);
      await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
      await page.getByText('no admin token set').waitFor();
      assert.equal(await page.getByLabel('Admin token').count(), 0);
      await done(page);
    } finally {
      await open.close();
    }
  });

  test("the API's errors are shown as it wrote them (a refused whitelist entry)", async () => {
    const page = await loggedIn('platform');
    await page.getByRole('button', { name: 'Whitelist' }).first().click();
    const form = page.getByRole('form', { name: /add an IP/ });
    await form.getByLabel('IP').fill('not-an-ip');
    await form.getByRole('button', { name: 'Add' }).click();
    const alert = page.getByRole('alert').filter({ hasText: '400 INVALID_INPUT' });
    await alert.waitFor();
    const api = await gw.admin<{ error: { message: string } }>('/v1/whitelist', {
      body: { account: 'shop1', productNo: SIM_PRODUCTS.dynamicTraffic, ip: 'not-an-ip' },
    });
    assert.match((await alert.textContent()) ?? '', new RegExp(api.body.error.message.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));

    await done(page);
  });
});
