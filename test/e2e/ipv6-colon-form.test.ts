// A password gateway on an IPv6 address written in the colon form: the sandbox, put on ::1, answers DYN-105-FLOW's
// DrawByPwd with `::1:<port>:<user>:<pass>` (the fields joined with ':', no brackets: the form has none). Rotor
// once dropped every such line as unparsable and the customer got 503 (review15 #14). The daemon in remote mode on
// the sandbox (test/support/platform-variants.ts); the control is the same gateway with the address bracketed.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { nodeConnectGet } from './harness.ts';
import { poolError, startVariantRig, VARIANT_MAIN, VARIANT_PASS, VARIANT_USER, type VariantRig } from '../support/platform-variants.ts';

const PRODUCT = SIM_PRODUCTS.dynamicTrafficCn;
const USERS = [
  { name: VARIANT_USER, password: VARIANT_PASS, mainAccount: VARIANT_MAIN, product: PRODUCT, draw: 'pwd', sessTime: 5, limitBytes: -1 },
];
type Drawn = { list: Array<{ proxyUrl?: string; list?: string[] }> };
const lines = (data: unknown): string[] => (data as Drawn).list.flatMap((i) => [...(i.proxyUrl ? [i.proxyUrl] : []), ...(i.list ?? [])]);

for (const bracketed of [false, true]) {
  describe(`a password gateway on ::1 written ${bracketed ? '[::1]:port:user:pass (control)' : '::1:port:user:pass'}`, () => {
    let rig: VariantRig;
    const seen: string[] = [];
    before(async () => {
      const bracket = (s: string): string => s.replace(/^::1:/, '[::1]:');
      rig = await startVariantRig({
        product: PRODUCT,
        sim: { host: '::1' },
        users: USERS,
        hooks: {
          data: (op, data) => {
            if (op !== 'DrawByPwd') return data;
            seen.push(...lines(data));
            if (!bracketed) return data;
            const d = data as Drawn;
            return {
              list: d.list.map((i) => ({
                ...i,
                ...(i.proxyUrl ? { proxyUrl: bracket(i.proxyUrl) } : {}),
                list: (i.list ?? []).map(bracket),
              })),
            };
          },
        },
      });
    });
    after(async () => rig?.close());

    test("a customer's CONNECT is served", async () => {
      const r = await nodeConnectGet(rig.gw.ports.http, VARIANT_USER, VARIANT_PASS, rig.target.port, '/hello', 20_000);
      assert.equal(r.status, 200, `CONNECT answered ${r.status}; the pool says ${await poolError(rig)}`);
      // The reading under test: the platform did write the bare form.
      assert.ok(seen.length > 0 && seen.every((l) => l.startsWith('::1:')), `drawn: ${seen.length} lines`);
    });
  });
}
