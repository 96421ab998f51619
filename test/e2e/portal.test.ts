// The customer portal and the reseller's new pages in a real browser (Debian's Chromium through
// playwright-core) against the real daemon on the embedded sandbox: a customer signs in with the proxy
// credentials, generates sticky endpoints, and a curl through one of the lines on the page works; a wrong
// password is refused with the portal's words; a customer refused at 100 % of the quota is shown as spent, not
// "enabled"; every admin page, the customer page, billing and the portal render at 1280×800 and 390×844 with
// real data, without script errors and without the page itself scrolling sideways.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { curl, startGateway, viaHttp, type Gateway } from './harness.ts';
import { startTarget, type BytesTarget } from './limits-harness.ts';
import { VIEWPORTS, launchChromium, type Browser } from '../support/browser.ts';

const TOKEN = 'portal-ui-token-3Jw';
const MIB = 1024 * 1024;
const CUSTOMER = { user: 'shopper', password: 'shopper-pass-2468' };
const SPENT = { user: 'spender', password: 'spender-pass-1357' };

let gw: Gateway;
let target: BytesTarget;
let portalUrl: string;

interface PageGlobals {
  document: { documentElement: { scrollWidth: number } };
  innerWidth: number;
}

before(async () => {
  gw = await startGateway({ config: { admin: { token: TOKEN } } });
  target = await startTarget();
  portalUrl = `${gw.adminUrl}${gw.config.portal.path}`;
  assert.equal(
    (
      await gw.admin('/v1/users', {
        body: {
          name: CUSTOMER.user,
          mainAccount: 'shop1',
          password: CUSTOMER.password,
          quota: { bytes: 256 * MIB, period: 'month' },
          pricePerGb: 3,
        },
      })
    ).status,
    201,
  );
  assert.equal(
    (
      await gw.admin('/v1/users', {
        body: { name: SPENT.user, mainAccount: 'shop1', password: SPENT.password, quota: { bytes: 64 * 1024, period: 'day' } },
      })
    ).status,
    201,
  );
  // Real data: traffic for the customer, and a customer who spent the whole quota (refused after it).
  assert.equal(
    (await curl([...viaHttp(gw.ports.http, CUSTOMER.user, CUSTOMER.password), target.url(2 * MIB), '-o', '/dev/null'])).status,
    200,
  );
  await curl([...viaHttp(gw.ports.http, SPENT.user, SPENT.password), target.url(256 * 1024), '-o', '/dev/null']);
  const refused = await curl([...viaHttp(gw.ports.http, SPENT.user, SPENT.password), target.url(16), '-o', '/dev/null']);
  assert.equal(refused.status, 403, 'the spent customer is refused at the proxy');
});

after(async () => {
  await target?.close();
  await gw?.close();
});

async function withPage(viewport: { width: number; height: number }, run: (page: Page, errors: string[]) => Promise<void>): Promise<void> {
  const browser: Browser = await launchChromium(viewport);
  const errors: string[] = [];
  try {
    const page = await browser.context.newPage();
    page.on('pageerror', (err) => errors.push(err.message));
    await run(page, errors);
    assert.deepEqual(errors, [], 'no script errors in the page');
  } finally {
    await browser.close();
  }
}

async function portalSignIn(page: Page, who: { user: string; password: string }): Promise<void> {
  await page.goto(portalUrl);
  await page.getByLabel('User name').fill(who.user);
  await page.getByLabel('Password').fill(who.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByTestId('me').filter({ hasText: who.user }).waitFor();
}

const noSidewaysScroll = async (page: Page, where: string) => {
  const { scroll, width } = await page.evaluate(() => {
    const g = globalThis as unknown as PageGlobals;
    return { scroll: g.document.documentElement.scrollWidth, width: g.innerWidth };
  });
  assert.ok(scroll <= width + 1, `${where}: the page is ${scroll} px wide in a ${width} px window`);
};

describe('customer portal and the reseller pages in Chromium', () => {
  test('a customer signs in, generates sticky endpoints, and a curl through one of the lines works', async () => {
    await withPage(VIEWPORTS.desktop, async (page) => {
      await page.goto(portalUrl);
      await page.getByLabel('User name').fill(CUSTOMER.user);
      await page.getByLabel('Password').fill('not-the-password');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('alert').filter({ hasText: '401 BAD_CREDENTIALS' }).waitFor();
      await portalSignIn(page, CUSTOMER);
      assert.match((await page.getByTestId('used').textContent()) ?? '', /MiB$/);
      const access = page.getByRole('region', { name: 'access' });
      await access.getByLabel('Sticky sessions').fill('3');
      await access.getByLabel('Sticky sessions').press('Tab');
      const lines = access.getByTestId('endpoints');
      await lines.filter({ hasText: /-session-[0-9a-f]{12}-sesstime-10/ }).waitFor();
      await page.waitForFunction(
        () =>
          (
            (globalThis as unknown as { document: { querySelector(s: string): { textContent: string } | null } }).document.querySelector(
              '[data-testid=endpoints]',
            )?.textContent ?? ''
          )
            .trim()
            .split('\n').length === 3,
      );
      const urls = ((await lines.textContent()) ?? '').trim().split('\n');
      assert.equal(urls.length, 3);
      assert.match(
        urls[0]!,
        new RegExp(`^http://${CUSTOMER.user}-session-[0-9a-f]{12}-sesstime-10:${CUSTOMER.password}@127\\.0\\.0\\.1:${gw.ports.http}$`),
      );
      const r = await curl(['-x', urls[0]!, target.url(4096), '-o', '/dev/null']);
      assert.equal(r.exitCode, 0, r.stderr);
      assert.equal(r.status, 200);
      // The host:port:user:pass format, as pasted into tools.
      await access.getByLabel('Format').selectOption('hostport');
      await lines.filter({ hasText: new RegExp(`^127\\.0\\.0\\.1:${gw.ports.http}:${CUSTOMER.user}-session-`) }).waitFor();
      // Sign out: back to the sign-in form, the session gone.
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByRole('button', { name: 'Sign in' }).waitFor();
      const me = await page.evaluate(async () => (await fetch('api/me')).status);
      assert.equal(me, 401);
    });
  });

  test('a customer refused at 100 % of the quota shows as spent, in the portal and on the users page, never as enabled', async () => {
    await withPage(VIEWPORTS.desktop, async (page) => {
      await portalSignIn(page, SPENT);
      await page.getByRole('region', { name: 'account' }).locator('[data-state=spent]').waitFor();
      assert.equal(await page.getByRole('region', { name: 'account' }).locator('[data-state=enabled]').count(), 0);
      await page.goto(`${gw.adminUrl}/ui/`);
      await page.getByLabel('Admin token').fill(TOKEN);
      await page.getByRole('button', { name: 'Log in' }).click();
      await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
      await page.goto(`${gw.adminUrl}/ui/#/users`);
      const row = page.locator(`tr[data-user="${SPENT.user}"]`);
      await row.locator('[data-state=spent]').waitFor();
      assert.equal(await row.locator('.quota.full').count(), 1, 'a full bar');
      const color = await row
        .locator('.quota.full progress')
        .evaluate((el) =>
          (globalThis as unknown as { getComputedStyle(e: unknown): { getPropertyValue(n: string): string } })
            .getComputedStyle(el)
            .getPropertyValue('--pico-progress-color')
            .trim(),
        );
      assert.equal(color, '#c62828', 'drawn red');
    });
  });

  for (const [size, viewport] of Object.entries(VIEWPORTS)) {
    test(`every page renders with real data at ${size} size (${viewport.width}×${viewport.height})`, async () => {
      await withPage(viewport, async (page) => {
        await page.goto(`${gw.adminUrl}/ui/`);
        await page.getByLabel('Admin token').fill(TOKEN);
        await page.getByRole('button', { name: 'Log in' }).click();
        await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
        const pages: [string, string][] = [
          ['overview', '[aria-label=balances] td'],
          ['users', `tr[data-user="${CUSTOMER.user}"]`],
          ['pools', 'h2'],
          ['connections', 'tr[data-connection], h2'],
          ['orders', 'h2'],
          ['billing', `tr[data-billing-user="${CUSTOMER.user}"]`],
          ['platform', '.cards article'],
          [`users/${CUSTOMER.user}`, '[data-testid=endpoints]'],
        ];
        for (const [route, ready] of pages) {
          await page.goto(`${gw.adminUrl}/ui/#/${route}`);
          await page.locator(ready).first().waitFor();
          await noSidewaysScroll(page, route);
        }
        // The customer page has the real figures: the bytes used and a chart.
        assert.match((await page.getByTestId('used').textContent()) ?? '', /MiB$/);
        await page.locator('.uplot').first().waitFor();
        await portalSignIn(page, CUSTOMER);
        await page.locator('.uplot').first().waitFor();
        await noSidewaysScroll(page, 'portal');
      });
    });
  }
});
