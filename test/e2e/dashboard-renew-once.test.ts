// The dashboard's "Renew selected" after an unknown outcome: the platform renewed but its reply was lost, so the
// API answered 503 ORDER_OUTCOME_UNKNOWN; the operator's second click resends the renewal under the same merchant
// number, which the platform answers once. Before, each click made a new number: charged twice.
// In-process daemon on the embedded sandbox over HTTP (one reply dropped), Debian's Chromium on the dashboard.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { openStaticInstance, startGateway, type Gateway } from './harness.ts';
import { launchChromium, type Browser } from '../support/browser.ts';
import { waitFor } from '../support/wait.ts';

const TOKEN = 'renew-once-token-4Tq9';
let gw: Gateway;
let browser: Browser;
before(async () => {
  gw = await startGateway({ config: { admin: { token: TOKEN }, platform: { retries: 0 }, orders: { sweepMs: 500 } } });
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
  await gw?.close();
});

async function answerDialog(page: Page, name: string): Promise<void> {
  const dialog = page.getByRole('dialog');
  await dialog.waitFor();
  await dialog.getByRole('button', { name, exact: true }).click();
  await dialog.waitFor({ state: 'hidden' });
}

test('an operator renewing again from the dashboard after an unknown outcome is charged once', async (t) => {
  const instanceNo = await openStaticInstance(gw);
  const sim = gw.daemon.sim!;
  const renewals = () => sim.inspect.orders().filter((o) => o.kind === 'renew' && o.instances.includes(instanceNo));
  const page = await browser.context.newPage();
  await page.goto(`${gw.adminUrl}/ui/`);
  await page.getByLabel('Admin token').fill(TOKEN);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
  await page.goto(`${gw.adminUrl}/ui/#/orders`);
  const row = page.locator(`tr[data-instance="${instanceNo}"]`);
  await row.waitFor();
  await row.getByRole('checkbox').check();

  sim.faults.dropNext(1, 'InstanceRenew'); // the platform renews, its reply is lost
  await page.getByRole('button', { name: 'Renew selected' }).click();
  await answerDialog(page, 'Renew');
  const shown = await page.getByRole('alert').filter({ hasText: 'ORDER_OUTCOME_UNKNOWN' }).first().textContent({ timeout: 20_000 });
  // the operator tries again: the same renewal, resent under the number of the first try
  await page.getByRole('button', { name: 'Renew selected' }).click();
  await answerDialog(page, 'Renew');
  const placed = await page.locator('section[aria-label="placed orders"]').textContent({ timeout: 20_000 });
  // both tries and the sweep end on one final order on Rotor's side
  const finals = await waitFor(
    async () => {
      const res = await fetch(`${gw.adminUrl}/v1/orders?type=2&limit=50`, { headers: { authorization: `Bearer ${TOKEN}` } });
      const mine = (await res.json()) as { status: number }[];
      return mine.length > 0 && mine.every((o) => [3, 4, 5].includes(o.status)) ? mine : undefined;
    },
    20_000,
    "the renewal final on Rotor's side",
  );
  const story = `the page said ${JSON.stringify(shown)}, then ${JSON.stringify(placed)}; Rotor's renewal orders ${finals.length}; renewals the platform charged for ${instanceNo}: ${renewals().length} (${renewals()
    .map((o) => `${o.orderNo} ${o.amount}`)
    .join(', ')})`;
  t.diagnostic(story);
  await page.close();
  assert.equal(renewals().length, 1, story);
  assert.equal(finals.length, 1, story);
});
