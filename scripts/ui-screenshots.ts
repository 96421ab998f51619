// `npm run ui:screenshots`: the dashboard's pages and the customer portal's at 1280×800 and 390×844, written to
// docs/ui/<page>-<size>.png.
// It runs the real daemon on the embedded sandbox with an admin token, gives every page something to show
// (traffic as two users, a sticky session, an order placed and finished, a tunnel held open, a refused login,
// customers created through the API: one with traffic and a price, one refused at its quota, one near it), lets the stats sampler take a few points, then drives
// Debian's Chromium (test/support/browser.ts) through each page.
import { mkdirSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { SIM_PRODUCTS } from '../src/sim/index.ts';
import { REPO_ROOT, curl, startGateway, viaHttp, viaSocks5h, waitFor } from '../test/e2e/harness.ts';
import { startTarget } from '../test/e2e/limits-harness.ts';
import { VIEWPORTS, launchChromium } from '../test/support/browser.ts';

const TOKEN = 'screenshot-token';
const OUT = join(REPO_ROOT, 'docs/ui');
const MIB = 1024 * 1024;

const PAGES: { route: string; ready: string; file?: string }[] = [
  { route: 'overview', ready: '[aria-label=balances] td' },
  { route: 'users', ready: 'tr[data-user]' },
  { route: 'pools', ready: 'details' },
  { route: 'connections', ready: 'h2' },
  { route: 'orders', ready: 'tr[data-instance]' },
  { route: 'billing', ready: 'tr[data-billing-user]' },
  { route: 'platform', ready: '.cards article' },
  { route: 'users/cust1', ready: '.uplot', file: 'user' },
];

const gw = await startGateway({ config: { admin: { token: TOKEN } }, orderDelayMs: 300 });
const target = await startTarget();
const held: Socket[] = [];
try {
  await gw.admin('/v1/users', {
    body: {
      name: 'cust1',
      mainAccount: 'shop1',
      password: 'cust1-pass',
      quota: { bytes: 512 * MIB, period: 'month' },
      maxConnections: 10,
      pricePerGb: 2.5,
    },
  });
  // A customer who spent the day's quota (refused at the proxy), and one near the limit.
  await gw.admin('/v1/users', {
    body: { name: 'cust2', mainAccount: 'shop1', password: 'cust2-pass', quota: { bytes: 2 * MIB, period: 'day' } },
  });
  await gw.admin('/v1/users', {
    body: {
      name: 'cust3',
      mainAccount: 'shop1',
      password: 'cust3-pass',
      quota: { bytes: 10 * MIB, period: 'week' },
      expiresAt: new Date(Date.now() + 30 * 86_400_000).toISOString(),
    },
  });
  await curl([...viaHttp(gw.ports.http, 'cust2', 'cust2-pass'), target.url(3 * MIB), '-o', '/dev/null']);
  await curl([...viaHttp(gw.ports.http, 'cust3', 'cust3-pass'), target.url(9 * MIB), '-o', '/dev/null']);
  const order = await gw.admin<{ appOrderNo: string }>('/v1/orders/open', {
    body: { productNo: SIM_PRODUCTS.staticUsSocks, count: 2, cycleTimes: 1 },
  });
  await waitFor(
    'the order to succeed',
    async () => ((await gw.admin<{ status: number }>(`/v1/orders/${order.body.appOrderNo}`)).body.status === 3 ? true : undefined),
    30_000,
  );
  await curl(['-x', `http://alice:wrong@127.0.0.1:${gw.ports.http}`, target.url(16), '-o', '/dev/null']);

  // About 25 s of traffic so the charts have a few of the sampler's 5 s points.
  const until = Date.now() + 25_000;
  while (Date.now() < until) {
    await Promise.all([
      curl([...viaHttp(gw.ports.http, 'alice', 'alice-pass'), target.url(3 * MIB), '-o', '/dev/null']),
      curl([...viaSocks5h(gw.ports.socks5, 'alice-session-demo', 'alice-pass'), target.url(MIB), '-o', '/dev/null']),
      curl([...viaHttp(gw.ports.http, 'bob', 'bob-pass'), target.url(MIB / 2), '-o', '/dev/null']),
      curl([...viaHttp(gw.ports.http, 'cust1', 'cust1-pass'), target.url(MIB), '-o', '/dev/null']),
    ]);
  }
  // A tunnel held open for the live list.
  held.push(
    await new Promise<Socket>((resolve, reject) => {
      const s = connect({ host: '127.0.0.1', port: gw.ports.http }, () =>
        s.write(
          `CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nHost: 127.0.0.1:${target.port}\r\nProxy-Authorization: Basic ${Buffer.from('alice:alice-pass').toString('base64')}\r\n\r\n`,
        ),
      );
      s.once('data', () => resolve(s));
      s.once('error', reject);
    }),
  );

  mkdirSync(OUT, { recursive: true });
  for (const [size, viewport] of Object.entries(VIEWPORTS)) {
    const browser = await launchChromium(viewport);
    const page: Page = await browser.context.newPage();
    await page.goto(`${gw.adminUrl}/ui/`);
    await page.getByLabel('Admin token').waitFor();
    await page.screenshot({ path: join(OUT, `login-${size}.png`) });
    await page.getByLabel('Admin token').fill(TOKEN);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
    for (const { route, ready, file = route } of PAGES) {
      await page.goto(`${gw.adminUrl}/ui/#/${route}`);
      await page.locator(ready).first().waitFor();
      await page.waitForLoadState('networkidle');
      await page.screenshot({ path: join(OUT, `${file}-${size}.png`), fullPage: true });
      console.log(`docs/ui/${file}-${size}.png`);
    }
    // The customer portal, as cust1 sees it.
    await page.goto(`${gw.adminUrl}${gw.config.portal.path}`);
    await page.getByLabel('User name').waitFor();
    await page.screenshot({ path: join(OUT, `portal-login-${size}.png`) });
    await page.getByLabel('User name').fill('cust1');
    await page.getByLabel('Password').fill('cust1-pass');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('.uplot').first().waitFor();
    await page.getByRole('region', { name: 'access' }).getByTestId('endpoints').filter({ hasText: '-session-' }).waitFor();
    await page.waitForLoadState('networkidle');
    await page.screenshot({ path: join(OUT, `portal-${size}.png`), fullPage: true });
    console.log(`docs/ui/portal-${size}.png`);
    await browser.close();
  }
} finally {
  for (const s of held) s.destroy();
  await target.close();
  await gw.close();
}
