// Every /v1 route through fastify inject(), over real components on the sandbox platform: the success path,
// a 400 that names the field, and 401 without or with a wrong token.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { InjectOptions } from 'fastify';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { AUTH, FLOW, US, startHarness, waitFor, type Harness } from './harness.ts';

let h: Harness;
before(async () => {
  h = await startHarness();
});
after(async () => {
  await h.close();
});

type Req = { method: InjectOptions['method']; url: string; payload?: unknown };
async function call(req: Req, headers: Record<string, string> = AUTH) {
  const res = await h.app.inject({
    method: req.method,
    url: req.url,
    headers,
    ...(req.payload !== undefined ? { payload: req.payload as object } : {}),
  });
  let body: unknown;
  try {
    body = res.json();
  } catch {
    body = res.body;
  }
  return {
    status: res.statusCode,
    body: body as Record<string, unknown> & { error?: { code: string; message: string; platformCode?: number } },
    headers: res.headers,
  };
}
const ok = async <T = Record<string, unknown>>(req: Req, status = 200): Promise<T> => {
  const r = await call(req);
  assert.equal(r.status, status, `${req.method} ${req.url}: ${JSON.stringify(r.body)}`);
  return r.body as T;
};
/** A 400 whose message names `field`. */
const bad = async (req: Req, field: string) => {
  const r = await call(req);
  assert.equal(r.status, 400, `${req.method} ${req.url}: ${JSON.stringify(r.body)}`);
  assert.equal(r.body.error?.code, 'INVALID_INPUT');
  assert.ok(r.body.error?.message.includes(field), `message ${JSON.stringify(r.body.error?.message)} names ${field}`);
};

const finalOrder = (no: string) =>
  waitFor(
    async () => {
      const o = await call({ method: 'GET', url: `/v1/orders/${no}` });
      return o.status === 200 && (o.body.status as number) >= 3 ? o.body : undefined;
    },
    8000,
    `order ${no} final`,
  );

// One valid request per route (for the 401 sweep); the success tests below use their own.
const EVERY_ROUTE: Req[] = [
  { method: 'GET', url: '/v1/app' },
  { method: 'GET', url: '/v1/areas' },
  { method: 'GET', url: '/v1/cities' },
  { method: 'GET', url: '/v1/projects' },
  { method: 'GET', url: '/v1/products?proxyType=101' },
  { method: 'GET', url: `/v1/products/${US}` },
  { method: 'GET', url: `/v1/products/${FLOW}/areas` },
  { method: 'POST', url: '/v1/orders/open', payload: { productNo: US } },
  { method: 'POST', url: '/v1/orders/renew', payload: { instances: [{ instanceNo: 'x' }] } },
  { method: 'POST', url: '/v1/orders/release', payload: { instances: ['x'] } },
  { method: 'POST', url: '/v1/orders/aftersale', payload: { instances: ['x'] } },
  { method: 'POST', url: '/v1/orders/assign-ip', payload: { productNo: US, cycleTimes: 1, assignIp: '198.51.100.9' } },
  { method: 'GET', url: '/v1/orders' },
  { method: 'GET', url: '/v1/orders/x' },
  { method: 'GET', url: '/v1/instances' },
  { method: 'GET', url: '/v1/instances/x' },
  { method: 'POST', url: '/v1/instances/x/change', payload: {} },
  { method: 'POST', url: '/v1/instances/reset-password', payload: { instanceNoList: ['x'] } },
  { method: 'GET', url: '/v1/assign-ip/198.51.100.9' },
  { method: 'POST', url: '/v1/accounts', payload: { status: 1 } },
  { method: 'POST', url: '/v1/accounts/shop1/auth', payload: { authType: 2 } },
  { method: 'GET', url: `/v1/accounts/shop1/balance?productNo=${FLOW}` },
  { method: 'GET', url: `/v1/accounts/shop1/flow-log?productNo=${FLOW}` },
  { method: 'POST', url: '/v1/accounts/shop1/return', payload: { productNo: FLOW, flowNum: 1 } },
  { method: 'POST', url: '/v1/sub-accounts', payload: { limitFlow: 1, status: 1, appMainUsername: 'shop1' } },
  { method: 'GET', url: `/v1/sub-accounts/alice?productNo=${FLOW}` },
  { method: 'PUT', url: '/v1/sub-accounts/alice/limit', payload: { productNo: FLOW, limitFlow: -1 } },
  { method: 'GET', url: `/v1/whitelist?account=shop1&productNo=${FLOW}` },
  { method: 'POST', url: '/v1/whitelist', payload: { account: 'shop1', productNo: FLOW, ip: '127.0.0.9' } },
  { method: 'DELETE', url: '/v1/whitelist', payload: { account: 'shop1', productNo: FLOW, ip: '127.0.0.9' } },
  { method: 'GET', url: '/v1/users' },
  { method: 'PUT', url: '/v1/users/alice/limit', payload: { limitBytes: 1 } },
  { method: 'GET', url: '/v1/pools' },
  { method: 'GET', url: '/v1/sessions' },
  { method: 'DELETE', url: '/v1/sessions/alice/s1' },
  { method: 'POST', url: '/v1/platform/GetAppInfo', payload: {} },
];

describe('authentication', () => {
  test('every /v1 route answers 401 without a token and with a wrong one, and nothing reaches the platform', async () => {
    const before = (await h.metrics.platformRequests.get()).values.reduce((n, v) => n + v.value, 0);
    for (const req of EVERY_ROUTE) {
      for (const headers of <Record<string, string>[]>[
        {},
        { authorization: 'Bearer wrong-token' },
        { authorization: 'admin-test-token-5f2c' },
        { authorization: 'Basic YTpi' },
      ]) {
        const r = await call(req, headers);
        assert.equal(r.status, 401, `${req.method} ${req.url} with ${JSON.stringify(headers)}`);
        assert.equal(r.body.error?.code, 'UNAUTHORIZED');
        assert.equal(r.headers['www-authenticate'], 'Bearer');
      }
    }
    const afterCount = (await h.metrics.platformRequests.get()).values.reduce((n, v) => n + v.value, 0);
    assert.equal(afterCount, before);
    // Unknown /v1 paths are guarded too; the probes are not.
    assert.equal((await call({ method: 'GET', url: '/v1/nothing-here' }, {})).status, 401);
    assert.equal((await call({ method: 'GET', url: '/v1/nothing-here' })).status, 404);
    assert.equal((await call({ method: 'GET', url: '/healthz' }, {})).status, 200);
  });
});

describe('app, dictionaries, catalog', () => {
  test('GET /v1/app', async () => {
    const app = await ok({ method: 'GET', url: '/v1/app' });
    assert.equal(typeof app.appName, 'string');
    assert.equal(typeof app.coin, 'string');
    await bad({ method: 'GET', url: '/v1/app?verbose=1' }, 'query.verbose');
  });

  test('GET /v1/areas, /v1/cities, /v1/projects with and without codes', async () => {
    const areas: { code: string; children?: unknown[] }[] = await ok({ method: 'GET', url: '/v1/areas' });
    assert.ok(areas.length > 0 && areas.every((a) => typeof a.code === 'string'));
    assert.ok(
      areas.some((a) => Array.isArray(a.children) && a.children.length > 0),
      'the tree keeps its children',
    );
    const cities: { cityCode: string; countryCode: string }[] = await ok({ method: 'GET', url: '/v1/cities' });
    assert.ok(cities.length > 0);
    const one: unknown[] = await ok({ method: 'GET', url: `/v1/cities?codes=${cities[0]!.cityCode}` });
    assert.ok(one.length >= 1 && one.length < cities.length);
    const projects: { code: string }[] = await ok({ method: 'GET', url: '/v1/projects' });
    assert.ok(projects.some((p) => p.code === 'tiktok'));
    await bad({ method: 'GET', url: '/v1/areas?code=USA' }, 'query.code');
    await bad({ method: 'GET', url: '/v1/cities?cities=1' }, 'query.cities');
    await bad({ method: 'GET', url: '/v1/projects?x=1' }, 'query.x');
  });

  test('GET /v1/products, /v1/products/:productNo, /v1/products/:productNo/areas', async () => {
    const statics: { productNo: string; proxyType: number }[] = await ok({ method: 'GET', url: '/v1/products?proxyType=101,103' });
    assert.ok(statics.some((p) => p.productNo === US));
    assert.ok(statics.every((p) => p.proxyType === 101 || p.proxyType === 103));
    const all: { productNo: string }[] = await ok({ method: 'GET', url: '/v1/products' });
    assert.ok(all.some((p) => p.productNo === FLOW));
    const us: { productNo: string; cidrBlocks: { cidr: string }[] } = await ok({ method: 'GET', url: `/v1/products/${US}?fresh=true` });
    assert.equal(us.productNo, US);
    assert.ok(us.cidrBlocks.some((b) => b.cidr === '198.51.100.0/24'));
    const notMine = await call({ method: 'GET', url: `/v1/products/${SIM_PRODUCTS.unauthorized}` });
    assert.equal(notMine.status, 404);
    assert.equal(notMine.body.error?.code, 'NOT_FOUND');
    const areas: { countryCode: string }[] = await ok({ method: 'GET', url: `/v1/products/${FLOW}/areas` });
    assert.ok(areas.some((a) => a.countryCode === 'USA'));
    const typed: unknown[] = await ok({ method: 'GET', url: `/v1/products/${SIM_PRODUCTS.dynamicTrafficCn}/areas?proxyType=105` });
    assert.ok(typed.length > 0);
    const staticAreas = await call({ method: 'GET', url: `/v1/products/${US}/areas` });
    assert.equal(staticAreas.status, 409);
    assert.equal(staticAreas.body.error?.code, 'PRODUCT_NOT_DYNAMIC');
    await bad({ method: 'GET', url: '/v1/products?proxyType=abc' }, 'query.proxyType');
    await bad({ method: 'GET', url: `/v1/products/${US}?fresh=maybe` }, 'query.fresh');
    await bad({ method: 'GET', url: `/v1/products/${FLOW}/areas?proxyType=101` }, 'query.proxyType');
  });
});

describe('orders and instances (static)', () => {
  let instanceNo = '';

  test('POST /v1/orders/open: one item at the top level, 202 with a generated merchant number; then final with instances', async () => {
    const placed: { appOrderNo: string; orderNo: string; type: number; status: number; amount: string } = await ok(
      { method: 'POST', url: '/v1/orders/open', payload: { productNo: US, count: 2, cycleTimes: 1 } },
      202,
    );
    assert.match(placed.appOrderNo, /^R[a-z0-9]+$/);
    assert.ok(placed.orderNo);
    assert.equal(placed.type, 1);
    assert.equal(placed.amount, '10.00');
    assert.ok(!('request' in placed), 'the journaled request is not echoed');
    const done = await finalOrder(placed.appOrderNo);
    assert.equal(done.status, 3);
    const instances = done.instances as { instanceNo: string; pwd?: string }[];
    assert.equal(instances.length, 2);
    assert.ok(
      instances.every((i) => !('pwd' in i)),
      'no passwords in answers',
    );
    instanceNo = instances[0]!.instanceNo;
  });

  test('POST /v1/orders/open with {"params":[…]} and my own merchant number; a second use of it is not a second order', async () => {
    const body = { appOrderNo: 'adminTestOpen1', params: [{ productNo: SIM_PRODUCTS.staticSgDay, count: 1, cycleTimes: 1 }] };
    const placed: { appOrderNo: string; orderNo: string } = await ok({ method: 'POST', url: '/v1/orders/open', payload: body }, 202);
    assert.equal(placed.appOrderNo, 'adminTestOpen1');
    const again = await call({ method: 'POST', url: '/v1/orders/open', payload: body });
    assert.ok(again.status === 202 || again.status === 409, JSON.stringify(again.body));
    if (again.status === 202) assert.equal(again.body.orderNo, placed.orderNo);
  });

  test('POST /v1/orders/open: 400s name the field; a refusal of the platform or of Rotor keeps its code', async () => {
    await bad({ method: 'POST', url: '/v1/orders/open', payload: { productNo: US, count: 101 } }, 'body.count');
    await bad({ method: 'POST', url: '/v1/orders/open', payload: { productNo: US, colour: 'red' } }, 'body.colour');
    await bad(
      { method: 'POST', url: '/v1/orders/open', payload: { params: [{ productNo: US, cycleTimes: 0 }] } },
      'body.params.0.cycleTimes',
    );
    await bad({ method: 'POST', url: '/v1/orders/open', payload: { params: [] } }, 'body.params');
    await bad({ method: 'POST', url: '/v1/orders/open', payload: { productNo: US, appOrderNo: 'x'.repeat(33) } }, 'body.appOrderNo');
    const badJson = await h.app.inject({
      method: 'POST',
      url: '/v1/orders/open',
      headers: { ...AUTH, 'content-type': 'application/json' },
      payload: '{"productNo":',
    });
    assert.equal(badJson.statusCode, 400);
    assert.equal(badJson.json().error.code, 'INVALID_JSON');
    const soldOut = await call({ method: 'POST', url: '/v1/orders/open', payload: { productNo: SIM_PRODUCTS.staticSoldOut } });
    assert.equal(soldOut.status, 409, JSON.stringify(soldOut.body));
    assert.equal(soldOut.body.error?.code, 'PRODUCT_NOT_PURCHASABLE');
  });

  test('GET /v1/orders and /v1/orders/:no', async () => {
    const list: { appOrderNo: string; type: number; status: number }[] = await ok({ method: 'GET', url: '/v1/orders?type=1&limit=50' });
    assert.ok(list.length >= 2 && list.every((o) => o.type === 1));
    const finals: { status: number }[] = await ok({ method: 'GET', url: '/v1/orders?status=3,4,5' });
    assert.ok(finals.every((o) => [3, 4, 5].includes(o.status)));
    const byMerchant = await ok({ method: 'GET', url: `/v1/orders/${list[0]!.appOrderNo}` });
    assert.equal((byMerchant as { appOrderNo: string }).appOrderNo, list[0]!.appOrderNo);
    const missing = await call({ method: 'GET', url: '/v1/orders/NOSUCHORDER123' });
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error?.code, 'ORDER_NOT_FOUND');
    await bad({ method: 'GET', url: '/v1/orders?limit=0' }, 'query.limit');
    await bad({ method: 'GET', url: '/v1/orders?open=perhaps' }, 'query.open');
    await bad({ method: 'GET', url: `/v1/orders/${'x'.repeat(200)}` }, 'path.no');
    const badUrl = await call({ method: 'GET', url: '/v1/orders/%E0%A4%A' });
    assert.equal(badUrl.status, 400);
    assert.equal(typeof badUrl.body.error?.code, 'string');
  });

  test('GET /v1/instances and /v1/instances/:instanceNo', async () => {
    const list: { instanceNo: string; status: number }[] = await ok({ method: 'GET', url: '/v1/instances?status=3' });
    assert.ok(list.some((i) => i.instanceNo === instanceNo));
    assert.ok(list.every((i) => i.status === 3));
    const one: { instanceNo: string; ip: string; port: number } = await ok({
      method: 'GET',
      url: `/v1/instances/${instanceNo}?refresh=true`,
    });
    assert.equal(one.instanceNo, instanceNo);
    assert.ok(one.ip && one.port > 0);
    assert.ok(!('pwd' in one));
    const missing = await call({ method: 'GET', url: '/v1/instances/NOPE' });
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error?.code, 'INSTANCE_NOT_FOUND');
    await bad({ method: 'GET', url: '/v1/instances?status=running' }, 'query.status');
    await bad({ method: 'GET', url: `/v1/instances/${instanceNo}?refresh=yes` }, 'query.refresh');
  });

  test('POST /v1/instances/:instanceNo/change → 202 change order (type 5) that completes', async () => {
    const placed: { appOrderNo: string; type: number } = await ok(
      { method: 'POST', url: `/v1/instances/${instanceNo}/change`, payload: { reason: 'admin test' } },
      202,
    );
    assert.equal(placed.type, 5);
    const done = await finalOrder(placed.appOrderNo);
    assert.equal(done.status, 3);
    await bad({ method: 'POST', url: `/v1/instances/${instanceNo}/change`, payload: { reason: 'r'.repeat(65) } }, 'body.reason');
    await bad({ method: 'POST', url: `/v1/instances/${instanceNo}/change`, payload: { instanceNo: 'other' } }, 'body.instanceNo');
  });

  test('POST /v1/instances/reset-password → 202 with the outcome, no password in it', async () => {
    const out: { resetNo: string; status: number; list: { instanceNo: string }[] } = await ok(
      { method: 'POST', url: '/v1/instances/reset-password', payload: { instanceNoList: [instanceNo] } },
      202,
    );
    assert.match(out.resetNo, /^[A-Za-z0-9_]+$/);
    assert.ok(out.list.some((i) => i.instanceNo === instanceNo));
    assert.ok(!JSON.stringify(out).includes('newPassword'));
    await bad(
      { method: 'POST', url: '/v1/instances/reset-password', payload: { instanceNoList: [instanceNo, instanceNo] } },
      'body.instanceNoList.1',
    );
    await bad(
      { method: 'POST', url: '/v1/instances/reset-password', payload: { instanceNoList: [instanceNo], resetNo: 'bad-chars!' } },
      'body.resetNo',
    );
  });

  test('POST /v1/orders/renew → 202 renew order', async () => {
    const placed: { type: number; appOrderNo: string } = await ok(
      { method: 'POST', url: '/v1/orders/renew', payload: { instances: [{ instanceNo, cycleTimes: 1 }] } },
      202,
    );
    assert.equal(placed.type, 2);
    assert.equal((await finalOrder(placed.appOrderNo)).status, 3);
    await bad({ method: 'POST', url: '/v1/orders/renew', payload: { instances: [] } }, 'body.instances');
    await bad(
      { method: 'POST', url: '/v1/orders/renew', payload: { instances: [{ instanceNo, cycleTimes: 'one' }] } },
      'body.instances.0.cycleTimes',
    );
    const unknown = await call({ method: 'POST', url: '/v1/orders/renew', payload: { instances: [{ instanceNo: 'NO-SUCH-INSTANCE' }] } });
    assert.equal(unknown.status, 502, JSON.stringify(unknown.body));
    assert.equal(unknown.body.error?.code, 'PLATFORM_ERROR');
    assert.equal(unknown.body.error?.platformCode, 10011);
  });

  test('POST /v1/orders/assign-ip and GET /v1/assign-ip/:ip', async () => {
    const check: { ip: string; canBuyStatus: boolean } = await ok({ method: 'GET', url: '/v1/assign-ip/198.51.100.77' });
    assert.deepEqual(check, { ip: '198.51.100.77', canBuyStatus: true });
    const outside: { canBuyStatus: boolean } = await ok({ method: 'GET', url: '/v1/assign-ip/127.0.0.1' });
    assert.equal(outside.canBuyStatus, false);
    await bad({ method: 'GET', url: '/v1/assign-ip/not-an-ip' }, 'path.ip');
    const placed: { type: number; appOrderNo: string } = await ok(
      { method: 'POST', url: '/v1/orders/assign-ip', payload: { productNo: US, cycleTimes: 1, assignIp: '198.51.100.77' } },
      202,
    );
    assert.equal(placed.type, 1);
    assert.equal((await finalOrder(placed.appOrderNo)).status, 3);
    await bad({ method: 'POST', url: '/v1/orders/assign-ip', payload: { productNo: US, cycleTimes: 1 } }, 'body.assignIp');
  });

  test('POST /v1/orders/release and /v1/orders/aftersale → 202 release orders', async () => {
    const list: { instanceNo: string }[] = await ok({ method: 'GET', url: '/v1/instances?status=3' });
    const others = list.map((i) => i.instanceNo).filter((n) => n !== instanceNo);
    assert.ok(others.length >= 2, 'two more running instances');
    const released: { type: number; appOrderNo: string } = await ok(
      { method: 'POST', url: '/v1/orders/release', payload: { instances: [others[0]] } },
      202,
    );
    assert.equal(released.type, 3);
    assert.equal((await finalOrder(released.appOrderNo)).status, 3);
    await bad({ method: 'POST', url: '/v1/orders/release', payload: { instances: ['a', 'a'] } }, 'body.instances.1');
    h.sim.faults.setMerchant({ afterSale: true });
    const after: { type: number; appOrderNo: string } = await ok(
      { method: 'POST', url: '/v1/orders/aftersale', payload: { instances: [others[1]], reason: 'network down' } },
      202,
    );
    assert.equal(after.type, 3);
    await bad({ method: 'POST', url: '/v1/orders/aftersale', payload: { instances: [others[1]], remark: 'r'.repeat(256) } }, 'body.remark');
  });
});

describe('accounts, sub accounts, whitelist (dynamic)', () => {
  test('POST /v1/accounts creates a main account; no password comes back', async () => {
    const acct: Record<string, unknown> = await ok({
      method: 'POST',
      url: '/v1/accounts',
      payload: { appUsername: 'shop1', password: 'Secret-pass-1', status: 1 },
    });
    assert.equal(acct.appUsername, 'shop1');
    assert.ok(!('password' in acct));
    await bad({ method: 'POST', url: '/v1/accounts', payload: { appUsername: 'shop2' } }, 'body.status');
    await bad({ method: 'POST', url: '/v1/accounts', payload: { status: 3 } }, 'body.status');
  });

  test('POST /v1/accounts/:name/auth', async () => {
    const a: { authStatus: number } = await ok({
      method: 'POST',
      url: '/v1/accounts/shop1/auth',
      payload: { authType: 2, authName: 'Test Person' },
    });
    assert.equal(a.authStatus, 2);
    await bad({ method: 'POST', url: '/v1/accounts/shop1/auth', payload: { authType: 9 } }, 'body.authType');
    const missing = await call({ method: 'POST', url: '/v1/accounts/nobody-here/auth', payload: { authType: 2 } });
    assert.equal(missing.status, 502);
    assert.equal(typeof missing.body.error?.platformCode, 'number');
  });

  test('buying traffic, then GET balance, GET flow-log, POST return', async () => {
    const placed: { appOrderNo: string } = await ok(
      { method: 'POST', url: '/v1/orders/open', payload: { productNo: FLOW, appUsername: 'shop1', flow: 300 } },
      202,
    );
    assert.equal((await finalOrder(placed.appOrderNo)).status, 3);
    const bal: { balanceMb: number; proxyType: number; hasBalance: boolean } = await ok({
      method: 'GET',
      url: `/v1/accounts/shop1/balance?productNo=${FLOW}&proxyType=104`,
    });
    assert.equal(bal.proxyType, 104);
    assert.equal(bal.balanceMb, 300);
    assert.equal(bal.hasBalance, true);
    await bad({ method: 'GET', url: '/v1/accounts/shop1/balance' }, 'query.productNo');
    await bad({ method: 'GET', url: `/v1/accounts/shop1/balance?productNo=${FLOW}&proxyType=101` }, 'query.proxyType');

    const log: { total: number; entries: unknown[]; page: number } = await ok({
      method: 'GET',
      url: `/v1/accounts/shop1/flow-log?productNo=${FLOW}&page=1&pageSize=5`,
    });
    assert.equal(log.page, 1);
    assert.ok(Array.isArray(log.entries));
    await bad({ method: 'GET', url: `/v1/accounts/shop1/flow-log?productNo=${FLOW}&pageSize=101` }, 'query.pageSize');
    await bad({ method: 'GET', url: `/v1/accounts/shop1/flow-log?productNo=${FLOW}&startTime=yesterday` }, 'query.startTime');

    const ret: { returnAmount: number } = await ok({
      method: 'POST',
      url: '/v1/accounts/shop1/return',
      payload: { productNo: FLOW, flowNum: 100 },
    });
    assert.ok(ret.returnAmount > 0);
    const after: { balanceMb: number } = await ok({ method: 'GET', url: `/v1/accounts/shop1/balance?productNo=${FLOW}` });
    assert.equal(after.balanceMb, 200);
    await bad({ method: 'POST', url: '/v1/accounts/shop1/return', payload: { productNo: FLOW, flowNum: 1.5 } }, 'body.flowNum');
  });

  test('POST /v1/sub-accounts, GET /v1/sub-accounts/:name, PUT /v1/sub-accounts/:name/limit', async () => {
    const sub: Record<string, unknown> = await ok({
      method: 'POST',
      url: '/v1/sub-accounts',
      payload: { appUsername: 'alice', password: 'alice-pass-9', limitFlow: 50, appMainUsername: 'shop1', status: 1 },
    });
    assert.equal(sub.appUsername, 'alice');
    assert.ok(!('password' in sub));
    await bad({ method: 'POST', url: '/v1/sub-accounts', payload: { limitFlow: 50, status: 1 } }, 'appMainUsername');
    await ok({ method: 'PUT', url: '/v1/sub-accounts/alice/limit', payload: { productNo: FLOW, limitFlow: 2_048_000 } });
    const info: { appUsername: string; limitFlow: number } = await ok({ method: 'GET', url: `/v1/sub-accounts/alice?productNo=${FLOW}` });
    assert.equal(info.appUsername, 'alice');
    assert.equal(info.limitFlow, 2_048_000);
    assert.ok(!('password' in info));
    await bad({ method: 'PUT', url: '/v1/sub-accounts/alice/limit', payload: { productNo: FLOW, limitFlow: 1000 } }, 'body.limitFlow');
    await bad({ method: 'GET', url: '/v1/sub-accounts/alice' }, 'query.productNo');
    const missing = await call({ method: 'GET', url: `/v1/sub-accounts/nobody?productNo=${FLOW}` });
    assert.equal(missing.status, 502);
    assert.equal(missing.body.error?.platformCode, 10062);
  });

  test('GET, POST, DELETE /v1/whitelist', async () => {
    const added: { ipWhiteList: string[] } = await ok({
      method: 'POST',
      url: '/v1/whitelist',
      payload: { account: 'shop1', productNo: FLOW, ip: '127.0.0.9' },
    });
    assert.ok(added.ipWhiteList.includes('127.0.0.9'));
    const listed: { account: string; ipWhiteList: string[] } = await ok({
      method: 'GET',
      url: `/v1/whitelist?account=shop1&productNo=${FLOW}`,
    });
    assert.equal(listed.account, 'shop1');
    assert.ok(listed.ipWhiteList.includes('127.0.0.9'));
    const removed: { ipWhiteList: string[] } = await ok({
      method: 'DELETE',
      url: '/v1/whitelist',
      payload: { account: 'shop1', productNo: FLOW, ip: '127.0.0.9' },
    });
    assert.ok(!removed.ipWhiteList.includes('127.0.0.9'));
    await bad({ method: 'POST', url: '/v1/whitelist', payload: { account: 'shop1', productNo: FLOW, ip: '999.1.1.1' } }, 'body.ip');
    await bad({ method: 'DELETE', url: '/v1/whitelist', payload: { account: 'shop1', ip: '127.0.0.9' } }, 'body.productNo');
    await bad({ method: 'GET', url: '/v1/whitelist?account=shop1' }, 'query.productNo');
  });
});

describe('local users, pools, sessions', () => {
  test('GET /v1/users and PUT /v1/users/:name/limit', async () => {
    const users: { name: string; usedBytes: number; limitBytes: number; activeConnections: number }[] = await ok({
      method: 'GET',
      url: '/v1/users',
    });
    assert.deepEqual(
      users.map((u) => u.name),
      ['alice', 'bob'],
    );
    const { name, usedBytes, limitBytes, activeConnections } = users[1]!;
    assert.deepEqual(
      { name, usedBytes, limitBytes, activeConnections },
      { name: 'bob', usedBytes: 0, limitBytes: 5_000_000, activeConnections: 0 },
    );
    const set: { limitBytes: number } = await ok({ method: 'PUT', url: '/v1/users/bob/limit', payload: { limitBytes: 7_000 } });
    assert.equal(set.limitBytes, 7_000);
    assert.equal(h.accounting.limitOf('bob'), 7_000);
    assert.equal((await h.store.getUsage('bob'))?.limitBytes, 7_000, 'persisted');
    const unknown = await call({ method: 'PUT', url: '/v1/users/nobody/limit', payload: { limitBytes: 1 } });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.error?.code, 'UNKNOWN_USER');
    await bad({ method: 'PUT', url: '/v1/users/bob/limit', payload: { limitBytes: -2 } }, 'body.limitBytes');
    await bad({ method: 'PUT', url: '/v1/users/bob/limit', payload: {} }, 'body.limitBytes');
    await bad({ method: 'GET', url: '/v1/users?all=1' }, 'query.all');
  });

  test('GET /v1/pools shows a real pool after a draw, without passwords', async () => {
    const pool = h.pools.get({ user: 'alice', productNo: FLOW, region: '' });
    const node = await pool.acquire();
    pool.release(node);
    const pools: { id: string; ready: number; nodes: { id: string; host: string; port: number }[] }[] = await ok({
      method: 'GET',
      url: '/v1/pools',
    });
    const mine = pools.find((p) => p.id === `alice/${FLOW}/`);
    assert.ok(mine, JSON.stringify(pools));
    assert.ok(mine.ready >= 1 && mine.nodes.length >= 1);
    assert.ok(mine.nodes.some((n) => n.id === node.id));
    if (node.password) assert.ok(!JSON.stringify(pools).includes(node.password));
    await bad({ method: 'GET', url: '/v1/pools?user=alice' }, 'query.user');
  });

  test('GET /v1/sessions and DELETE /v1/sessions/:user/:id (manual rotation)', async () => {
    const pool = h.pools.get({ user: 'alice', productNo: FLOW, region: '' });
    const node = await pool.acquire();
    pool.release(node);
    h.sessions.bind('alice', 's1', node, 5);
    const list: { user: string; sessionId: string; nodeId: string }[] = await ok({ method: 'GET', url: '/v1/sessions' });
    assert.deepEqual(
      list.map((s) => [s.user, s.sessionId, s.nodeId]),
      [['alice', 's1', node.id]],
    );
    const before = (await h.metrics.sessionRotations.get()).values.find((v) => v.labels.reason === 'manual')?.value ?? 0;
    const del: { rotated: boolean } = await ok({ method: 'DELETE', url: '/v1/sessions/alice/s1' });
    assert.equal(del.rotated, true);
    assert.equal(h.sessions.get('alice', 's1'), undefined);
    const afterCount = (await h.metrics.sessionRotations.get()).values.find((v) => v.labels.reason === 'manual')?.value ?? 0;
    assert.equal(afterCount, before + 1);
    const again = await call({ method: 'DELETE', url: '/v1/sessions/alice/s1' });
    assert.equal(again.status, 404);
    await bad({ method: 'DELETE', url: '/v1/sessions/alice/bad-id' }, 'path.id');
    await bad({ method: 'GET', url: '/v1/sessions?user=a-b' }, 'query.user');
    await bad({ method: 'GET', url: '/v1/sessions?limit=0' }, 'query.limit');
    await bad({ method: 'GET', url: '/v1/sessions?sort=x' }, 'sort');
  });

  test('GET /v1/sessions is bounded: 1,000 by default, ?limit= and ?user=, x-total-count counts every match', async () => {
    const pool = h.pools.get({ user: 'alice', productNo: FLOW, region: '' });
    const node = await pool.acquire();
    pool.release(node);
    for (let i = 0; i < 1050; i++) h.sessions.bind('alice', `many${i}`, node, 5);
    for (let i = 0; i < 3; i++) h.sessions.bind('bob', `few${i}`, node, 5);
    const all = await call({ method: 'GET', url: '/v1/sessions' });
    assert.equal(all.status, 200);
    assert.equal((all.body as unknown as unknown[]).length, 1000);
    assert.equal(all.headers['x-total-count'], '1053');
    const five = await call({ method: 'GET', url: '/v1/sessions?limit=5' });
    assert.equal((five.body as unknown as unknown[]).length, 5);
    const bobs = await call({ method: 'GET', url: '/v1/sessions?user=bob' });
    assert.deepEqual((bobs.body as unknown as { user: string; sessionId: string }[]).map((s) => [s.user, s.sessionId]).sort(), [
      ['bob', 'few0'],
      ['bob', 'few1'],
      ['bob', 'few2'],
    ]);
    assert.equal(bobs.headers['x-total-count'], '3');
    for (let i = 0; i < 1050; i++) h.sessions.rotate('alice', `many${i}`, 'manual');
    for (let i = 0; i < 3; i++) h.sessions.rotate('bob', `few${i}`, 'manual');
  });
});

describe('platform escape hatch', () => {
  test('POST /v1/platform/:operation calls the table operation and answers its decrypted data', async () => {
    const app: { operation: string; data: { appName: string } } = await ok({ method: 'POST', url: '/v1/platform/GetAppInfo' });
    assert.equal(app.operation, 'GetAppInfo');
    assert.equal(typeof app.data.appName, 'string');
    const product: { data: { productNo: string } } = await ok({
      method: 'POST',
      url: '/v1/platform/GetProductInfo',
      payload: { productNo: US },
    });
    assert.equal(product.data.productNo, US);
    const unknown = await call({ method: 'POST', url: '/v1/platform/NoSuchOperation', payload: {} });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.error?.code, 'UNKNOWN_OPERATION');
    await bad({ method: 'POST', url: '/v1/platform/GetProductInfo', payload: {} }, 'body.productNo');
    await bad(
      { method: 'POST', url: '/v1/platform/SetProxyUserFlowLimit', payload: { appUsername: 'alice', productNo: FLOW, limitFlow: 5 } },
      'body.limitFlow',
    );
    const refused = await call({ method: 'POST', url: '/v1/platform/GetOrder', payload: { orderNo: 'NOSUCH' } });
    assert.equal(refused.status, 502);
    assert.deepEqual(Object.keys(refused.body.error ?? {}).sort(), ['code', 'message', 'platformCode']);
    assert.equal(refused.body.error?.platformCode, 10031);
  });
});
