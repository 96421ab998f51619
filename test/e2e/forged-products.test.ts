// `-product-<productNo>` in the proxy user name is judged by the merchant's catalogue already loaded (src/proxy/
// product-names.ts, the router's admit), as `-region-` codes are by the dictionaries (test/e2e/security.test.ts):
// a product nobody sells is refused 403 "unknown product" before any pool or platform call. Before, each distinct
// forged name cost a catalogue look-up on the platform (GetProductInfo), was answered 503 and made a pool: a
// customer cycling names spent the reseller's app key's platform calls at its connection rate. Real daemon on the
// embedded sandbox, raw CONNECTs.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startGateway, startTarget, type Gateway, type Target } from './harness.ts';
import { connectHead, connectStatus } from '../support/connect-head.ts';

let gw: Gateway;
let target: Target;
before(async () => {
  gw = await startGateway();
  target = await startTarget();
});
after(async () => {
  await target?.close();
  await gw?.close();
});

const status = (user: string, pass: string) => connectStatus(gw.ports.http, target.port, user, pass);
const head = (user: string, pass: string) => connectHead(gw.ports.http, target.port, user, pass);

test('-product- names the catalogue does not hold are refused before any pool or platform draw', async () => {
  const calls = (): number => Object.values(gw.daemon.sim!.inspect.calls()).reduce((n, c) => n + (c ?? 0), 0);
  const before = calls();
  const ops0 = { ...gw.daemon.sim!.inspect.calls() } as Record<string, number | undefined>;
  const statuses: number[] = [];
  for (let i = 0; i < 50; i++) statuses.push(await status(`alice-product-FORGED${i}`, 'alice-pass'));
  const made = calls() - before;
  const ops1 = gw.daemon.sim!.inspect.calls() as Record<string, number | undefined>;
  const byOp = Object.entries(ops1)
    .map(([k, v]) => [k, (v ?? 0) - (ops0[k] ?? 0)] as const)
    .filter(([, n]) => n > 0);
  assert.ok(
    made < 5,
    `50 CONNECTs with forged -product- names cost ${made} platform calls (${JSON.stringify(Object.fromEntries(byOp))}; answers: ${[...new Set(statuses)].join(', ')})`,
  );
  assert.deepEqual([...new Set(statuses)], [403], 'each refused as forbidden, not as a platform failure (503)');
  const pools = gw.daemon.pools.list().map((p) => p.key.productNo);
  assert.ok(!pools.some((p) => p.startsWith('FORGED')), `no pool made for a forged product: ${JSON.stringify(pools)}`);
  const answer = await head('alice-product-FORGED99', 'alice-pass');
  assert.match(answer, /unknown product 'FORGED99'/, answer);
  // A wrong password with a forged product: still the one credential refusal (the product is judged after it).
  assert.equal(await status('alice-product-FORGED1', 'wrong'), 407);
});

test('-product- with a productNo that holds dashes (as the platform writes them) is read whole and judged as that product', async () => {
  const ask = (user: string) => head(user, 'alice-pass');
  const drawn = await ask('alice-session-p1-product-DYN-104-FLOW');
  assert.match(drawn, /^HTTP\/1\.1 200/, drawn);
  // Another product of the catalogue, with options on both sides: judged as DYN-105-FLOW (its balance), not as a
  // malformed name.
  const other = await ask('alice-session-p2-product-DYN-105-FLOW-sesstime-10');
  assert.match(other, /^HTTP\/1\.1 403[^]*DYN-105-FLOW/, other);
  assert.doesNotMatch(other, /unknown product|bad value/);
});
