// DrawByApi's `proxyUrl` (seed 4.16: "an address the merchant then requests to obtain the proxies"; its form is not
// said). A platform that serves the extraction itself may answer a path on its own host (`/extract/…`). Rotor
// fetched the string as given: ERR_INVALID_URL, every API draw failed, CONNECT 503 (review15 #19). Now a proxyUrl
// without a scheme is resolved against platform.baseUrl. The daemon in remote mode on the sandbox behind
// test/support/platform-variants.ts (which passes the extraction path through to the sandbox); a `draw: api` user.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { extractionUrl } from '../../src/pool/drawer.ts';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { poolError, startVariantRig, VARIANT_MAIN, VARIANT_PASS, VARIANT_USER, type VariantRig } from '../support/platform-variants.ts';
import { nodeConnectGet } from './harness.ts';

const PRODUCT = SIM_PRODUCTS.dynamicTraffic;

test('extractionUrl: absolute as given; a path resolved against the platform address', () => {
  assert.equal(extractionUrl('http://127.0.0.1:9/x?k=1', 'http://127.0.0.1:5/api'), 'http://127.0.0.1:9/x?k=1');
  assert.equal(extractionUrl('/extract/t1?num=5', 'http://127.0.0.1:5/api'), 'http://127.0.0.1:5/extract/t1?num=5');
  assert.equal(extractionUrl('//127.0.0.2:7/x', 'https://127.0.0.1:5'), 'https://127.0.0.2:7/x');
  assert.equal(extractionUrl('/extract/t1', undefined), '/extract/t1');
});

for (const relative of [true, false]) {
  describe(`DrawByApi's proxyUrl as ${relative ? 'a path on the platform host' : 'an absolute URL (control)'}`, () => {
    let rig: VariantRig;
    let answered: string[] = [];
    before(async () => {
      rig = await startVariantRig({
        users: [
          {
            name: VARIANT_USER,
            password: VARIANT_PASS,
            mainAccount: VARIANT_MAIN,
            product: PRODUCT,
            draw: 'api',
            sessTime: 5,
            limitBytes: -1,
          },
        ],
        hooks: {
          data: (op, data) => {
            if (op !== 'DrawByApi') return data;
            const d = data as { list: Array<{ proxyUrl: string }> };
            const list = relative ? d.list.map((i) => ({ proxyUrl: new URL(i.proxyUrl).pathname + new URL(i.proxyUrl).search })) : d.list;
            answered = list.map((i) => (i.proxyUrl.startsWith('/') ? 'path' : 'absolute'));
            return { list };
          },
        },
      });
    });
    after(async () => rig?.close());

    test("a customer's CONNECT is served", async () => {
      const r = await nodeConnectGet(rig.gw.ports.http, VARIANT_USER, VARIANT_PASS, rig.target.port, '/hello', 20_000);
      assert.equal(r.status, 200, `CONNECT answered ${r.status}; the pool says ${await poolError(rig)}`);
      assert.ok(answered.length > 0 && answered.every((a) => a === (relative ? 'path' : 'absolute')), JSON.stringify(answered));
    });
  });
}
