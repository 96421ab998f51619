// A user's `products` are checked against the catalogue on input (src/users/product-check.ts) also on a platform
// that does not answer GetProductInfo (its path unknown: HTTP 404), where one product is read through the product
// query (src/platform/product-reader.ts): a product the query does not list is refused 422 UNKNOWN_PRODUCT naming
// the field, as on the sandbox, not taken as "the catalogue could not be read". The real daemon on such a platform
// (test/support/platform-variants.ts), the admin API over HTTP.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { startVariantRig, VARIANT_MAIN, type VariantRig } from '../support/platform-variants.ts';

let rig: VariantRig;
before(async () => {
  rig = await startVariantRig({
    hooks: { before: (op) => (op === 'GetProductInfo' ? { status: 404, body: '404 page not found' } : undefined) },
  });
});
after(async () => rig?.close());

test('no GetProductInfo on the platform: an unlisted product is refused 422 naming products.<i>; a listed one is taken', async () => {
  const refused = await rig.gw.admin<{ error: { code: string; message: string } }>('/v1/users', {
    body: { name: 'vpia', mainAccount: VARIANT_MAIN, password: 'vpia-pass', products: [SIM_PRODUCTS.dynamicIpCount, 'NOPE-V1'] },
  });
  assert.equal(refused.status, 422, JSON.stringify(refused.body));
  assert.equal(refused.body.error.code, 'UNKNOWN_PRODUCT');
  assert.match(refused.body.error.message, /^products\.1: unknown product 'NOPE-V1'/);
  const made = await rig.gw.admin('/v1/users', {
    body: { name: 'vpia', mainAccount: VARIANT_MAIN, password: 'vpia-pass', products: [SIM_PRODUCTS.dynamicIpCount] },
  });
  assert.equal(made.status, 201, JSON.stringify(made.body));
});
