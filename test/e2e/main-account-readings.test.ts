// A new merchant's daemon makes its main account at the start whatever ProxyInfo answers for a name never made:
// the sandbox's 10052 (control), an empty list, or 10004 (seed 4.14 is a list query; part 7's 10052 names no
// operation). Rotor once waited for a 10052: on the other readings CreateUser was never called and the user was
// refused for good (review15 #4). The real daemon in remote mode on the sandbox behind
// test/support/platform-variants.ts; the main account is not made beforehand; traffic is bought once it exists. The
// same for a user POSTed under a new main account (src/users/sub-account.ts ensureMain).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { CODE } from '../../src/platform/codes.ts';
import { PlatformClient } from '../../src/platform/client.ts';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { buyTraffic } from '../support/orders.ts';
import { startVariantPlatform, type VariantPlatform } from '../support/platform-variants.ts';
import { nodeConnectGet, startGateway, startTarget, waitFor, type Gateway, type Target } from './harness.ts';

const FLOW = SIM_PRODUCTS.dynamicTraffic;
const USER = {
  name: 'freshuser',
  password: 'freshuser-pass',
  mainAccount: 'freshshop',
  product: FLOW,
  draw: 'pwd',
  sessTime: 5,
  limitBytes: -1,
};

for (const reading of ['an empty list', 'code 10004', 'code 10052 (control)'] as const) {
  describe(`a new merchant on a platform whose ProxyInfo answers an unknown account with ${reading}`, () => {
    let platform: VariantPlatform;
    let direct: PlatformClient;
    let gw: Gateway;
    let target: Target;
    before(async () => {
      platform = await startVariantPlatform({
        reply: (op, _params, up) => {
          if (op !== 'ProxyInfo' || up.code !== CODE.USER_NOT_FOUND || reading.endsWith('(control)')) return undefined;
          if (reading === 'an empty list') return { status: 200, body: platform.ok(up.reqId, { list: [] }) };
          return { status: 200, body: JSON.stringify({ reqId: up.reqId, code: CODE.INVALID_PARAMS, msg: 'appUsername invalid' }) };
        },
      });
      direct = new PlatformClient({ baseUrl: platform.sim.baseUrl, appKey: platform.appKey, appSecret: platform.appSecret, retries: 0 });
      target = await startTarget();
      gw = await startGateway({
        config: {
          platform: {
            mode: 'remote',
            baseUrl: platform.url,
            appKey: platform.appKey,
            appSecret: platform.appSecret,
            timeoutMs: 5000,
            retries: 1,
          },
          accounts: { balancePollMs: 200 },
          users: [USER],
        },
      });
    });
    after(async () => {
      await gw?.close(0);
      await target?.close();
      direct?.close();
      await platform?.close();
    });

    test('the main account is made at the start, and its user is served once it has traffic', async () => {
      const main = platform.sim.inspect.accounts().find((a) => a.appUsername === USER.mainAccount);
      assert.ok(
        main,
        `CreateUser calls: ${platform.calls.get('CreateUser') ?? 0}; main accounts: ${JSON.stringify(platform.sim.inspect.accounts())}`,
      );
      assert.ok(
        main.subs.some((s) => s.appUsername === USER.name),
        JSON.stringify(main),
      );
      await buyTraffic(direct, USER.mainAccount, FLOW, 128);
      const served = await waitFor('the user served', async () => {
        const r = await nodeConnectGet(gw.ports.http, USER.name, USER.password, target.port, '/hello', 10_000);
        return r.status === 200 ? r : undefined;
      });
      assert.equal(served.status, 200);
    });

    test('a user made through the admin API under a main account never made: the main account is made, the user created', async () => {
      const made = await gw.admin<{ state?: string }>('/v1/users', {
        body: { name: 'apiuser', password: 'apiuser-pass', mainAccount: 'apishop', product: FLOW },
      });
      const main = platform.sim.inspect.accounts().find((a) => a.appUsername === 'apishop');
      assert.equal(
        made.status,
        201,
        `POST /v1/users answered ${made.status} ${JSON.stringify(made.body)}; main: ${JSON.stringify(main ?? null)}`,
      );
      assert.ok(
        main?.subs.some((s) => s.appUsername === 'apiuser'),
        JSON.stringify(main ?? null),
      );
    });
  });
}
