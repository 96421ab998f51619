// A user's `products`: the productNos it may name with `-product-` besides its default `product` (a reseller
// sells a customer one product, not every product the merchant holds). Absent or null, every product of the
// merchant, as before; a list, only those and the default; [] the default only. A product outside the list is
// refused 403 (HTTP) / SOCKS5 0x02 before any pool or platform call; a PATCH takes effect on the next connection.
// Real daemon on the embedded sandbox, raw CONNECTs and curl through both listeners.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { curl, startGateway, startTarget, viaHttp, viaSocks5h, type Gateway, type Target } from './harness.ts';
import { connectHead } from '../support/connect-head.ts';

const DEFAULT = SIM_PRODUCTS.dynamicTraffic; // DYN-104-FLOW: the merchant's first dynamic product, every user's default here
const OTHER = SIM_PRODUCTS.dynamicIpCount; // DYN-104-IP
const DASHED = SIM_PRODUCTS.dynamicTrafficCn; // DYN-105-FLOW

let gw: Gateway;
let target: Target;
before(async () => {
  gw = await startGateway({
    config: {
      users: [
        { name: 'alice', password: 'alice-pass', mainAccount: 'shop1', product: '', draw: 'pwd', sessTime: 5, limitBytes: -1 },
        // A config user with the field: its default only.
        { name: 'cara', password: 'cara-pass', mainAccount: 'shop1', product: '', products: [] },
      ],
    },
  });
  target = await startTarget();
});
after(async () => {
  await target?.close();
  await gw?.close();
});

const head = (user: string, pass: string) => connectHead(gw.ports.http, target.port, user, pass);
const platformCalls = (): number => Object.values(gw.daemon.sim!.inspect.calls()).reduce((n, c) => n + (c ?? 0), 0);
const FORBIDDEN = /^HTTP\/1\.1 403[^]*may not use product/;

async function socksExit(user: string, pass: string): Promise<number> {
  return (await curl([...viaSocks5h(gw.ports.socks5, user, pass), target.url('/p')])).exitCode;
}

test('a product outside the list is refused 403 / SOCKS5 0x02 with no platform call; the default product and listed ones pass', async () => {
  const made = await gw.admin('/v1/users', {
    body: { name: 'pat', mainAccount: 'shop1', password: 'pat-pass', products: [OTHER] },
  });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  const view = await gw.admin<{ products: string[] | null }>('/v1/users/pat');
  assert.deepEqual(view.body.products, [OTHER]);
  // Warm the user's login and default pool first: what follows should cost nothing on the platform.
  assert.match(await head('pat', 'pat-pass'), /^HTTP\/1\.1 200/);
  const before = platformCalls();
  for (let i = 0; i < 20; i++) {
    const answer = await head(`pat-session-s${i}-product-${DASHED}`, 'pat-pass');
    assert.match(answer, FORBIDDEN, answer);
  }
  assert.equal(await socksExit(`pat-product-${DASHED}`, 'pat-pass'), 97, 'SOCKS5: 0x02 (curl exit 97)');
  const calls = platformCalls() - before;
  assert.equal(calls, 0, `21 refused connections cost ${calls} platform calls`);
  assert.ok(!gw.daemon.pools.list().some((p) => p.key.productNo === DASHED), 'no pool made for a refused product');
  // The default product, named or not, and the listed one are not refused for the right.
  assert.match(await head(`pat-product-${DEFAULT}`, 'pat-pass'), /^HTTP\/1\.1 200/);
  assert.doesNotMatch(await head(`pat-product-${OTHER}`, 'pat-pass'), /may not use product/);
  const http = await curl([...viaHttp(gw.ports.http, `pat-product-${DEFAULT}`, 'pat-pass'), target.url('/p')]);
  assert.equal(http.status, 200, http.body);
  // Without the field (alice): every product, as before (judged by the catalogue and the balance only).
  assert.doesNotMatch(await head(`alice-product-${DASHED}`, 'alice-pass'), /may not use product/);
  // A config user with [] : its default only.
  assert.match(await head(`cara-product-${OTHER}`, 'cara-pass'), FORBIDDEN);
  assert.match(await head(`cara-product-${DEFAULT}`, 'cara-pass'), /^HTTP\/1\.1 200/);
});

test('PATCH takes effect on the next connection: [] leaves the default only, a list adds, null gives every product', async () => {
  const made = await gw.admin('/v1/users', { body: { name: 'quin', mainAccount: 'shop1', password: 'quin-pass' } });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  assert.doesNotMatch(await head(`quin-product-${OTHER}`, 'quin-pass'), /may not use product/);
  assert.equal((await gw.admin('/v1/users/quin', { method: 'PATCH', body: { products: [] } })).status, 200);
  assert.match(await head(`quin-product-${OTHER}`, 'quin-pass'), FORBIDDEN);
  assert.match(await head('quin', 'quin-pass'), /^HTTP\/1\.1 200/, 'the default product stays');
  assert.equal((await gw.admin('/v1/users/quin', { method: 'PATCH', body: { products: [OTHER, DASHED] } })).status, 200);
  assert.doesNotMatch(await head(`quin-product-${OTHER}`, 'quin-pass'), /may not use product/);
  assert.doesNotMatch(await head(`quin-product-${DASHED}`, 'quin-pass'), /may not use product/);
  assert.equal((await gw.admin('/v1/users/quin', { method: 'PATCH', body: { products: [DASHED] } })).status, 200);
  assert.match(await head(`quin-product-${OTHER}`, 'quin-pass'), FORBIDDEN);
  assert.equal((await gw.admin('/v1/users/quin', { method: 'PATCH', body: { products: null } })).status, 200);
  assert.doesNotMatch(await head(`quin-product-${OTHER}`, 'quin-pass'), /may not use product/);
  assert.equal((await gw.admin<{ products: unknown }>('/v1/users/quin')).body.products, null);
});

test('products that are not productNos, repeat one or are too many are refused 400 naming the field', async () => {
  const many = Array.from({ length: 101 }, (_, i) => `P${i}`);
  for (const products of [['not a product!'], ['DYN-'], ['-DYN'], [''], [OTHER, OTHER], OTHER, many, ['x'.repeat(65)]]) {
    const r = await gw.admin<{ error: { code: string; message: string } }>('/v1/users', {
      body: { name: 'rex', mainAccount: 'shop1', password: 'rex-pass', products },
    });
    assert.equal(r.status, 400, `${JSON.stringify(products).slice(0, 60)}: ${JSON.stringify(r.body)}`);
    assert.match(r.body.error.message, /products/);
    const p = await gw.admin<{ error: { message: string } }>('/v1/users/quin', { method: 'PATCH', body: { products } });
    assert.equal(p.status, 400, JSON.stringify(p.body));
    assert.match(p.body.error.message, /products/);
  }
});
