// Seed 4.18 [SetProxyUserFlowLimit]: "On success the response is a plain success result without encrypted data";
// part 5 rule 5: "When a response has only a status code and no data, no encrypted part is returned." How "no data"
// is written is open: absent, null, "" — or {} (a Go service's shared response helper) or a word ("success"). A
// customer with a byte quota made through the admin API (its platform-side limit is set at creation) is ready on
// every such platform; the answer without data is the control.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { eventually } from '../support/wait.ts';
import { startVariantRig, VARIANT_MAIN, type VariantRig } from '../support/platform-variants.ts';

for (const data of [{}, 'success', undefined] as const) {
  describe(`the daemon on a platform answering SetProxyUserFlowLimit with ${data === undefined ? 'no data (control)' : `"data": ${JSON.stringify(data)}`}`, () => {
    let rig: VariantRig;
    before(async () => {
      rig = await startVariantRig({
        hooks: {
          reply: (op, _p, up) =>
            data !== undefined && op === 'SetProxyUserFlowLimit' && up.code === 200
              ? { status: 200, body: JSON.stringify({ reqId: up.reqId, code: 200, msg: 'success', data }) }
              : undefined,
        },
      });
    });
    after(async () => rig?.close());

    test('a user with a byte quota is made through the admin API', async () => {
      const r = await rig.gw.admin<Record<string, unknown>>('/v1/users', {
        body: {
          name: 'vquota',
          password: 'vquota-pass',
          mainAccount: VARIANT_MAIN,
          product: SIM_PRODUCTS.dynamicTraffic,
          quota: { bytes: 50_000_000, period: 'total' },
        },
      });
      let view: unknown;
      const ready =
        r.status === 201 ||
        (await eventually(
          async () => {
            view = (await rig.gw.admin('/v1/users/vquota')).body;
            return JSON.stringify(view).includes('"ready"');
          },
          8000,
          250,
        ));
      assert.ok(ready, `POST /v1/users answered ${r.status} ${JSON.stringify(r.body)}; later the user is ${JSON.stringify(view)}`);
      assert.ok((rig.platform.calls.get('SetProxyUserFlowLimit') ?? 0) > 0);
    });
  });
}
