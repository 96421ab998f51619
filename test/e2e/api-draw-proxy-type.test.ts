// A `draw: api` user draws with its product's proxyType (seed 4.16 DrawByApi: proxyType "104 or 105", 2.1: 105 =
// dynamic domestic). Rotor once sent 104 for every product; the sandbox, like any platform that checks the pair,
// refuses a proxyType that does not match the product (10004), so every API-drawing user of a 105 product got 503
// (review15 #5). Both products have ipWhiteList 1 (the API draw is allowed); the 104 user is the control.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { nodeConnectGet, startGateway, startTarget, type Gateway, type Target } from './harness.ts';

const USERS = [
  {
    name: 'apicn',
    password: 'apicn-pass',
    mainAccount: 'shopcn',
    product: SIM_PRODUCTS.dynamicTrafficCn,
    draw: 'api',
    sessTime: 5,
    limitBytes: -1,
  },
  {
    name: 'apius',
    password: 'apius-pass',
    mainAccount: 'shopus',
    product: SIM_PRODUCTS.dynamicTraffic,
    draw: 'api',
    sessTime: 5,
    limitBytes: -1,
  },
];

interface PoolView {
  key: { user: string };
  drawError?: { message: string };
}

describe('API draws name the product proxyType', () => {
  let gw: Gateway;
  let target: Target;
  before(async () => {
    target = await startTarget();
    gw = await startGateway({ config: { users: USERS } });
  });
  after(async () => {
    await gw?.close();
    await target?.close();
  });

  for (const u of USERS) {
    test(`${u.name} (${u.product}, draw: api): a CONNECT is served`, async () => {
      const r = await nodeConnectGet(gw.ports.http, u.name, u.password, target.port, '/hello', 20_000);
      const pools = await gw.admin<PoolView[]>('/v1/pools');
      const pool = pools.body.find((p) => p.key.user === u.name);
      assert.equal(r.status, 200, `CONNECT answered ${r.status}; the pool says ${JSON.stringify(pool?.drawError ?? pool ?? null)}`);
    });
  }
});
