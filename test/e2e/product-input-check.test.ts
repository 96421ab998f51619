// A user's `products` are checked against the merchant's catalogue when they come in (src/users/product-check.ts),
// not only when a connection names one: POST and PATCH /v1/users and a batch's rows answer 422 UNKNOWN_PRODUCT
// naming the field (`products.<i>`) and change nothing; a config user's unknown product is logged at start naming
// its key (a start never fails on the catalogue), and refuses a reload (SIGHUP) before anything changes. A catalogue that cannot be read (the platform answering
// GetProductInfo with system errors) does not stop a reseller's work: the products are taken, with a warning line.
// Real daemon on the embedded sandbox, the admin API over HTTP.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { captureLogger } from '../support/logger.ts';
import { startGateway, testConfig, type Gateway } from './harness.ts';

const OTHER = SIM_PRODUCTS.dynamicIpCount;
const DASHED = SIM_PRODUCTS.dynamicTrafficCn;
const log = captureLogger('info');

let gw: Gateway;
before(async () => {
  gw = await startGateway({
    config: {
      users: [
        { name: 'alice', password: 'alice-pass', mainAccount: 'shop1', product: '' },
        { name: 'cfg', password: 'cfg-pass', mainAccount: 'shop1', product: '', products: [OTHER, 'NOPE-CFG-1'] },
      ],
    },
    daemon: { logger: log.logger },
  });
});
after(async () => {
  await gw?.close();
});

type ErrorBody = { error: { code: string; message: string } };

async function waitForLog(pattern: RegExp): Promise<string> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const line = log
      .text()
      .split('\n')
      .find((l) => pattern.test(l));
    if (line !== undefined) return line;
    assert.ok(Date.now() < deadline, `no log line ${String(pattern)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('POST with an unknown product: 422 naming products.<i>, no user made; known products pass', async () => {
  const refused = await gw.admin<ErrorBody>('/v1/users', {
    body: { name: 'pia', mainAccount: 'shop1', password: 'pia-pass', products: [OTHER, 'NOPE-1'] },
  });
  assert.equal(refused.status, 422, JSON.stringify(refused.body));
  assert.equal(refused.body.error.code, 'UNKNOWN_PRODUCT');
  assert.match(refused.body.error.message, /^products\.1: unknown product 'NOPE-1'/);
  assert.equal((await gw.admin('/v1/users/pia')).status, 404, 'nothing made');
  const made = await gw.admin('/v1/users', {
    body: { name: 'pia', mainAccount: 'shop1', password: 'pia-pass', products: [OTHER, DASHED] },
  });
  assert.equal(made.status, 201, JSON.stringify(made.body));
});

test('PATCH with an unknown product: 422, the record unchanged', async () => {
  const made = await gw.admin('/v1/users', { body: { name: 'pol', mainAccount: 'shop1', password: 'pol-pass', products: [OTHER] } });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  const refused = await gw.admin<ErrorBody>('/v1/users/pol', { method: 'PATCH', body: { products: ['NOPE-2'], maxConnections: 5 } });
  assert.equal(refused.status, 422, JSON.stringify(refused.body));
  assert.match(refused.body.error.message, /^products\.0: unknown product 'NOPE-2'/);
  const view = await gw.admin<{ products: string[]; maxConnections: number }>('/v1/users/pol');
  assert.deepEqual(view.body.products, [OTHER]);
  assert.equal(view.body.maxConnections, 0);
});

test('a batch (rotor users import): the row with an unknown product fails alone, named; the others are made', async () => {
  const res = await gw.admin<{ created: number; errors: { index: number; name: string; code: string; message: string }[] }>(
    '/v1/users/batch',
    {
      body: {
        users: [
          { name: 'bat1', mainAccount: 'shop1', password: 'bat1-pass', products: [OTHER] },
          { name: 'bat2', mainAccount: 'shop1', password: 'bat2-pass', products: ['NOPE-3'] },
          { name: 'bat3', mainAccount: 'shop1', password: 'bat3-pass' },
        ],
      },
    },
  );
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.created, 2);
  assert.equal(res.body.errors.length, 1);
  assert.equal(res.body.errors[0]!.index, 1);
  assert.equal(res.body.errors[0]!.code, 'UNKNOWN_PRODUCT');
  assert.match(res.body.errors[0]!.message, /products\.0: unknown product 'NOPE-3'/);
  assert.equal((await gw.admin('/v1/users/bat2')).status, 404);
});

test("a config user's unknown product is logged at start naming its key; the daemon serves", async () => {
  const line = await waitForLog(/UNKNOWN_PRODUCT|unknown product 'NOPE-CFG-1'/);
  assert.match(line, /users\.1\.products\.1: unknown product 'NOPE-CFG-1'/);
  assert.equal((await gw.admin('/v1/users/cfg')).status, 200);
});

test('a reload whose config user names an unknown product is refused, naming users.<n>.products.<i>; nothing changes', async () => {
  const users = [
    { name: 'alice', password: 'alice-pass', mainAccount: 'shop1', product: '' },
    { name: 'cfg', password: 'cfg-pass', mainAccount: 'shop1', product: '', products: [OTHER] },
    { name: 'newcomer', password: 'newcomer-pass', mainAccount: 'shop1', product: '', products: [DASHED, 'NOPE-RELOAD'] },
  ];
  await assert.rejects(gw.daemon.reload(testConfig({ users })), (err: Error & { code?: string }) => {
    assert.equal(err.code, 'UNKNOWN_PRODUCT');
    assert.match(err.message, /^users\.2\.products\.1: unknown product 'NOPE-RELOAD'/);
    return true;
  });
  assert.equal((await gw.admin('/v1/users/newcomer')).status, 404, 'the refused file changed nothing');
  // The same file without the unknown product is taken.
  users[2]!.products = [DASHED];
  await gw.daemon.reload(testConfig({ users }));
  assert.equal((await gw.admin('/v1/users/newcomer')).status, 200);
});

test('a catalogue that cannot be read: the products are taken, with a warning line', async () => {
  gw.daemon.sim!.faults.set({ fail: { operation: 'GetProductInfo', count: Infinity } });
  try {
    const made = await gw.admin('/v1/users', { body: { name: 'una', mainAccount: 'shop1', password: 'una-pass', products: ['NOPE-4'] } });
    assert.equal(made.status, 201, JSON.stringify(made.body));
  } finally {
    gw.daemon.sim!.faults.set({ fail: null });
  }
  const line = await waitForLog(/products taken without a check/);
  assert.match(line, /NOPE-4/);
  assert.match(line, /"user":"una"/);
});
