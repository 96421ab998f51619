// Whether a main account exists, on platforms that read ProxyInfo for a name never made differently (seed 4.14:
// a list query; part 7's 10052 names no operation): the sandbox's 10052 (control), an empty list, or 10004. Rotor
// once made a main account only after a 10052: on the other two a new merchant's account was never made and every
// user was refused (review15 #4). Nor may it call CreateUser blindly: it "creates or modifies", and would re-enable
// an account the operator disabled. The real sandbox behind test/support/platform-variants.ts, the real client.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ProductCatalog } from '../../src/accounting/products.ts';
import { mainAccountPresence } from '../../src/accounts/main-account.ts';
import { AccountReconciler, type AccountUser } from '../../src/accounts/reconcile.ts';
import { CODE } from '../../src/platform/codes.ts';
import { PlatformClient } from '../../src/platform/client.ts';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { startVariantPlatform, type VariantPlatform } from '../support/platform-variants.ts';

const FLOW = SIM_PRODUCTS.dynamicTraffic;
const READINGS = ['code 10052 (the sandbox: control)', 'an empty list', 'code 10004'] as const;

for (const reading of READINGS) {
  describe(`ProxyInfo for a main account never made answers ${reading}`, () => {
    let platform: VariantPlatform;
    let client: PlatformClient;
    let direct: PlatformClient;
    let reconciler: AccountReconciler;
    before(async () => {
      platform = await startVariantPlatform({
        reply: (op, _params, up) => {
          if (op !== 'ProxyInfo' || up.code !== CODE.USER_NOT_FOUND || reading.endsWith('control)')) return undefined;
          if (reading === 'an empty list') return { status: 200, body: platform.ok(up.reqId, { list: [] }) };
          return { status: 200, body: JSON.stringify({ reqId: up.reqId, code: CODE.INVALID_PARAMS, msg: 'appUsername invalid' }) };
        },
      });
      const o = { appKey: platform.appKey, appSecret: platform.appSecret, retries: 0 };
      client = new PlatformClient({ baseUrl: platform.url, ...o });
      direct = new PlatformClient({ baseUrl: platform.sim.baseUrl, ...o });
      reconciler = new AccountReconciler({ client, products: new ProductCatalog({ client }) });
    });
    after(async () => {
      client?.close();
      direct?.close();
      await platform?.close();
    });

    test('a new main account is made (CreateUser), with its user under it', async () => {
      const user: AccountUser = { name: 'newuser', mainAccount: 'newshop', product: FLOW, draw: 'pwd', limitBytes: -1 };
      const report = await reconciler.reconcile([user]);
      const main = platform.sim.inspect.accounts().find((a) => a.appUsername === 'newshop');
      assert.ok(
        main,
        `main accounts on the platform: ${JSON.stringify(platform.sim.inspect.accounts())}; report ${JSON.stringify(report)}`,
      );
      assert.equal(main.status, 1);
      assert.ok(main.subs.some((s) => s.appUsername === 'newuser'));
      assert.deepEqual([report.mains[0]?.action, report.subs[0]?.action, report.refused], ['created', 'created', []]);
      // The next pass finds it there: nothing made twice.
      const again = await reconciler.reconcile([user]);
      assert.deepEqual([again.mains[0]?.action, again.subs[0]?.action], ['exists', 'exists']);
    });

    test('a main account the operator disabled is read as disabled, not re-enabled by CreateUser', async () => {
      await direct.call('CreateUser', { appUsername: 'offshop', status: 2 });
      const calls = platform.calls.get('CreateUser') ?? 0;
      const user: AccountUser = { name: 'offuser', mainAccount: 'offshop', product: FLOW, draw: 'pwd', limitBytes: -1 };
      const report = await reconciler.reconcile([user]);
      assert.equal(platform.sim.inspect.accounts().find((a) => a.appUsername === 'offshop')?.status, 2);
      assert.equal(platform.calls.get('CreateUser') ?? 0, calls, 'no CreateUser for an account that exists');
      assert.deepEqual(report.refused, [{ user: 'offuser', reason: 'main account offshop is disabled on the platform' }]);
    });

    test('mainAccountPresence: missing before CreateUser, present after', async () => {
      const product = { productNo: FLOW, proxyType: 104 };
      assert.equal(await mainAccountPresence(client, 'lateshop', product), 'missing');
      await direct.call('CreateUser', { appUsername: 'lateshop', status: 1 });
      assert.equal(await mainAccountPresence(client, 'lateshop', product), 'present');
    });
  });
}
