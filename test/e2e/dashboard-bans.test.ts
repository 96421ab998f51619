// The dashboard's request rules and bans in a real browser (Debian's Chromium through playwright-core) against
// the real daemon on the embedded sandbox: a customer whose rule bans the exit when the page's body shows its
// exit address gets a ban through a real curl; the customer page lists the rule in words and the ban; the
// pools page lists every ban with its user; Lift (after Cancel once: nothing happens) lifts it through
// DELETE /v1/bans/:id, and the API agrees.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { launchChromium, type Browser } from '../support/browser.ts';
import { curl, startGateway, startTarget, viaHttp, type Gateway, type Target } from './harness.ts';

const TOKEN = 'bans-admin-token-4Kp9';

interface BanView {
  id: string;
  user: string;
  exit: string;
  rule: string;
}

describe('dashboard: request rules and bans in force', () => {
  let gw: Gateway;
  let target: Target;
  let browser: Browser;
  const pageErrors: string[] = [];

  before(async () => {
    gw = await startGateway({
      config: {
        admin: { token: TOKEN },
        users: [
          {
            name: 'scraper',
            password: 'scraper-pass',
            mainAccount: 'shop1',
            // The target answers with the address the request came from: the body rule fires on every page.
            requestRules: [{ name: 'exit-seen', body: '127\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}', action: 'ban', banSeconds: 600 }],
          },
        ],
      },
    });
    target = await startTarget();
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await target?.close();
    await gw?.close();
  });

  async function loggedIn(route: string): Promise<Page> {
    const page = await browser.context.newPage();
    page.on('pageerror', (err) => pageErrors.push(err.message));
    await page.goto(`${gw.adminUrl}/ui/`);
    await page.getByLabel('Admin token').fill(TOKEN);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
    await page.goto(`${gw.adminUrl}/ui/#/${route}`);
    return page;
  }

  async function answerDialog(page: Page, name: string): Promise<void> {
    const dialog = page.getByRole('dialog');
    await dialog.waitFor();
    await dialog.getByRole('button', { name, exact: true }).click();
    await dialog.waitFor({ state: 'hidden' });
  }

  const bans = async (): Promise<BanView[]> => (await gw.admin<BanView[]>('/v1/bans')).body;

  test('a ban made by a body rule is shown on the customer page and the pools page, and lifted from the page', async () => {
    const r = await curl([...viaHttp(gw.ports.http, 'scraper', 'scraper-pass'), target.url('/who')]);
    assert.equal(r.exitCode, 0, r.stderr);
    assert.equal(r.status, 200, 'action ban only: the answer passes');
    const made = await bans();
    assert.equal(made.length, 1);
    assert.equal(made[0]!.user, 'scraper');
    assert.equal(made[0]!.rule, 'exit-seen');
    assert.equal(made[0]!.exit.startsWith('127.'), true);
    const id = made[0]!.id;

    const page = await loggedIn('users/scraper');
    const rule = page.locator('tr[data-rule="exit-seen"]');
    await rule.waitFor();
    assert.match((await rule.textContent()) ?? '', /body \/127.*first 8192 bytes/);
    assert.match((await rule.textContent()) ?? '', /ban the exit/);
    const row = page.locator(`tr[data-ban="${id}"]`);
    await row.waitFor();
    assert.match((await row.textContent()) ?? '', new RegExp(made[0]!.exit.replace(/\./g, '\\.')));

    // The pools page lists every ban with its user.
    const pools = await loggedIn('pools');
    await pools.getByRole('heading', { name: 'Bans in force' }).waitFor();
    const poolRow = pools.locator(`tr[data-ban="${id}"]`);
    await poolRow.waitFor();
    assert.match((await poolRow.textContent()) ?? '', /scraper/);
    await pools.close();

    // Cancel first: nothing is lifted.
    await page.locator(`button[data-lift="${id}"]`).click();
    await answerDialog(page, 'Cancel');
    assert.equal((await bans()).length, 1, 'Cancel lifts nothing');
    await page.locator(`button[data-lift="${id}"]`).click();
    await answerDialog(page, 'Lift');
    await page.getByText(`Ban ${id} lifted.`).waitFor();
    await row.waitFor({ state: 'detached' });
    assert.deepEqual(await bans(), []);
    await page.getByText('No bans in force.').waitFor();
    await page.close();
    assert.deepEqual(pageErrors, [], 'no script errors in the page');
  });
});
