// Seed part 4: "Method is POST for every operation whose method is stated here; the method of the dictionary,
// product, order and instance lookups: not shown (the envelope is used for them too)." A platform serving those
// lookups on GET only (the envelope's fields in the query string) answers a POST there with HTTP 405; the daemon
// starts on it and serves its customer. And a start does not fail on one lookup a platform busy for a moment does
// not answer (GetProductStock HTTP 503 during the start: every configured user names its product).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { nodeConnectGet } from './harness.ts';
import { eventually } from '../support/wait.ts';
import {
  poolError,
  startVariantRig,
  VARIANT_MAIN,
  VARIANT_PASS,
  VARIANT_USER,
  type VariantHooks,
  type VariantRig,
} from '../support/platform-variants.ts';

const LOOKUPS = new Set([
  'GetArea',
  'GetCityList',
  'GetProjectList',
  'GetProductStock',
  'GetProductInfo',
  'ProductAreaList',
  'GetOrder',
  'GetInstance',
]);

const VARIANTS: Array<[string, VariantHooks]> = [
  [
    'lookups served on GET only (HTTP 405 for a POST)',
    {
      before: (op, _params, reqId, method) =>
        LOOKUPS.has(op) && method !== 'GET'
          ? { status: 405, body: JSON.stringify({ reqId, code: 405, msg: 'method not allowed' }) }
          : undefined,
    },
  ],
  [
    'GetProductStock answering HTTP 503 during the start',
    { before: (op) => (op === 'GetProductStock' ? { status: 503, body: 'upstream busy' } : undefined) },
  ],
];

for (const [variant, hooks] of VARIANTS) {
  describe(`the daemon on a platform with ${variant}`, () => {
    let rig: VariantRig | undefined;
    let startError: unknown;
    before(async () => {
      rig = await startVariantRig({ hooks }).catch((err: unknown) => {
        startError = err;
        return undefined;
      });
    });
    after(async () => rig?.close());

    test("the daemon starts and a customer's CONNECT is served", async () => {
      assert.equal(startError, undefined, `the daemon did not start: ${String(startError)}`);
      const r = await nodeConnectGet(rig!.gw.ports.http, VARIANT_USER, VARIANT_PASS, rig!.target.port, '/hello', 20_000);
      assert.equal(r.status, 200, `CONNECT answered ${r.status}; the pool says ${await poolError(rig!)}`);
      if (variant.includes('GET only')) {
        const methods = [...rig!.platform.methods].filter(([k]) => LOOKUPS.has(k.split(' ')[0]!));
        assert.ok(
          methods.some(([k]) => k.endsWith(' GET')),
          JSON.stringify(methods),
        );
        // A lookup is POSTed until the platform's first 405, then sent as GET (a few may race the first answer).
        for (const [k, n] of methods) if (k.endsWith(' POST')) assert.ok(n <= 3, JSON.stringify(methods));
      }
    });
  });
}

// The listing a start could not read is read again in the background: a customer made without a product of its own
// once the platform answers again draws from the merchant's first dynamic product.
describe('the daemon started while GetProductStock answered 503, the platform answering again afterwards', () => {
  let rig: VariantRig;
  let busy = true;
  before(async () => {
    rig = await startVariantRig({
      hooks: { before: (op) => (busy && op === 'GetProductStock' ? { status: 503, body: 'upstream busy' } : undefined) },
    });
  });
  after(async () => rig?.close());

  test('a customer made without a product draws from the first dynamic product', async () => {
    busy = false;
    let n = 0;
    let last = '';
    const served = await eventually(
      async () => {
        const name = `vdefault${++n}`;
        const made = await rig.gw.admin('/v1/users', { body: { name, password: `${name}-pass`, mainAccount: VARIANT_MAIN } });
        if (made.status !== 201 && made.status !== 202)
          return ((last = `POST /v1/users ${made.status} ${JSON.stringify(made.body)}`), false);
        const r = await nodeConnectGet(rig.gw.ports.http, name, `${name}-pass`, rig.target.port, '/hello', 10_000);
        last = `CONNECT ${r.status}; the pool says ${await poolError(rig, name)}`;
        return r.status === 200;
      },
      15_000,
      250,
    );
    assert.ok(served, `${n} customers made; the last: ${last}`);
  });
});
