// A user's sub account under a main account the platform does not have yet, against a real sandbox over HTTP:
// CreateProxyUser answers 10061 (one code for "the name exists", "the main account is missing" and "… disabled"),
// the sub account is read (missing), the main account looked up and made, and the creation tried again. When
// many creations run at once (a batch, a resume), another creation may make the main account between this one's
// 10061 and its look-up: the main account is then found, and the user must still be made, not refused as if
// the main account were disabled. A disabled main account still refuses the user.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ProductCatalog } from '../../src/accounting/products.ts';
import { PlatformClient } from '../../src/platform/client.ts';
import { PlatformError } from '../../src/platform/errors.ts';
import { startSimulator, SIM_PRODUCTS, type Simulator } from '../../src/sim/index.ts';
import { SubAccounts } from '../../src/users/sub-account.ts';
import { poll } from '../support/wait.ts';

const quota = { bytes: -1, period: 'total' as const };
let sim: Simulator;
let client: PlatformClient;
before(async () => {
  // Every call acts once its 200 ms are over: the test's own call lands between two of the creation's steps.
  sim = await startSimulator({ latencyMs: 200, upstreams: false });
  client = new PlatformClient({ baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret, retries: 0 });
});
after(async () => {
  client?.close();
  await sim?.close();
});

const subs = (main: string): string[] =>
  sim.inspect
    .accounts()
    .find((m) => m.appUsername === main)
    ?.subs.map((s) => s.appUsername) ?? [];

test('the main account made by another creation between the 10061 and the look-up: the user is made', async () => {
  const accounts = new SubAccounts(client, new ProductCatalog({ client }));
  const reads = (): number => sim.inspect.calls().GetProxyUserInfo ?? 0;
  const readsBefore = reads();
  const making = accounts.ensure(
    { name: 'raceuser', mainAccount: 'racemain', product: SIM_PRODUCTS.dynamicTraffic, quota },
    { fresh: true },
  );
  // Its CreateProxyUser answered 10061 (no main account) and its read of the sub account is under way: another
  // creation makes the main account now, which lands before this one's look-up (sent after the read's answer).
  await poll(() => reads() > readsBefore, { what: "the creation's read of its sub account", timeoutMs: 10_000, everyMs: 2 });
  await client.call('CreateUser', { appUsername: 'racemain', status: 1 });
  await making;
  assert.deepEqual(subs('racemain').sort(), ['racemain', 'raceuser']);
});

test('the main account and the sub account made by another daemon meanwhile: the sub account is taken as made', async () => {
  const accounts = new SubAccounts(client, new ProductCatalog({ client }));
  const reads = (): number => sim.inspect.calls().GetProxyUserInfo ?? 0;
  const readsBefore = reads();
  const making = accounts.ensure(
    { name: 'twinuser', mainAccount: 'twinmain', product: SIM_PRODUCTS.dynamicTraffic, quota },
    { fresh: true },
  );
  // Another daemon of a fleet finishing the same creation: it makes the main account, then the sub account,
  // each landing before this creation's next step (its look-up, then its second try).
  await poll(() => reads() > readsBefore, { what: "the creation's read of its sub account", timeoutMs: 10_000, everyMs: 2 });
  await client.call('CreateUser', { appUsername: 'twinmain', status: 1 });
  await client.call('CreateProxyUser', { appUsername: 'twinuser', appMainUsername: 'twinmain', limitFlow: -1, status: 1 });
  await making;
  assert.deepEqual(subs('twinmain').sort(), ['twinmain', 'twinuser']);
});

test('a disabled main account still refuses the user with 10061', async () => {
  await client.call('CreateUser', { appUsername: 'offmain', status: 2 });
  const accounts = new SubAccounts(client, new ProductCatalog({ client }));
  await assert.rejects(
    accounts.ensure({ name: 'offuser', mainAccount: 'offmain', product: SIM_PRODUCTS.dynamicTraffic, quota }, { fresh: true }),
    (err: unknown) => err instanceof PlatformError && err.platformCode === 10061,
  );
  assert.ok(!subs('offmain').includes('offuser'));
});
