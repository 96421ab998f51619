// Seed 4.2: "[GetProductInfo] real-time single product | /api/open/app/product/info/v2 | not shown | not shown". The
// one product read the seed specifies is the product query with `productNo` ("only that product is returned", an
// array of records). The daemon draws for its customer on a platform answering GetProductInfo (a) as the product
// query does, an array of the one record, or (b) not at all: its path unknown (HTTP 404).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { nodeConnectGet } from './harness.ts';
import {
  poolError,
  startVariantRig,
  VARIANT_PASS,
  VARIANT_USER,
  type VariantHooks,
  type VariantRig,
} from '../support/platform-variants.ts';

const VARIANTS: Array<[string, VariantHooks]> = [
  ['an array of one product (as the product query answers)', { data: (op, data) => (op === 'GetProductInfo' ? [data] : data) }],
  [
    'not at all (path unknown: HTTP 404)',
    { before: (op) => (op === 'GetProductInfo' ? { status: 404, body: '404 page not found' } : undefined) },
  ],
];

for (const [variant, hooks] of VARIANTS) {
  describe(`the daemon on a platform answering GetProductInfo with ${variant}`, () => {
    let rig: VariantRig;
    before(async () => {
      rig = await startVariantRig({ hooks });
    });
    after(async () => rig?.close());

    test("a customer's CONNECT is served", async () => {
      const r = await nodeConnectGet(rig.gw.ports.http, VARIANT_USER, VARIANT_PASS, rig.target.port, '/hello', 20_000);
      assert.equal(r.status, 200, `CONNECT answered ${r.status}; the pool says ${await poolError(rig)}`);
      assert.equal(r.body, 'hello from target');
    });

    test('GET /v1/products/:no reads the product', async () => {
      const p = await rig.gw.admin<{ productNo?: string }>('/v1/products/DYN-104-FLOW');
      assert.equal(p.status, 200, JSON.stringify(p.body));
      assert.equal(p.body.productNo, 'DYN-104-FLOW');
    });
  });
}
