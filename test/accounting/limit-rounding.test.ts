// The platform-side backstop limit (src/accounting/platform-sync.ts) on a platform that keeps sub-account limits in
// whole MB (seed 4.13 creates them in MB; 4.18 sets and 2.9 reads them in bytes): it reads back the bytes of the MB
// it kept. Rotor compared byte for byte and set the same limit again at every sync pass, for every user (review15
// #17: 10 more SetProxyUserFlowLimit in 10 passes for one user). Now a read within one MB at the product's base is
// the limit held; a change of the local limit is still sent. The daemon in remote mode on the sandbox behind
// test/support/platform-variants.ts, each way of rounding (down, up, nearest), limitSyncMs 200.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { limitHeld } from '../../src/accounting/platform-sync.ts';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { startVariantRig, VARIANT_MAIN, VARIANT_PASS, VARIANT_USER, type VariantRig } from '../support/platform-variants.ts';
import { eventually } from '../support/wait.ts';

const MIB = 1_048_576; // DYN-104-FLOW's MB (flowConversionBase 1024)
const ROUNDINGS = { down: Math.floor, up: Math.ceil, nearest: Math.round, 'not at all (bytes kept: control)': undefined } as const;

test('limitHeld: -1 exactly, bytes within one MB at the base', () => {
  assert.equal(limitHeld(-1, -1, 1024), true);
  assert.equal(limitHeld(50_331_648, -1, 1024), false);
  assert.equal(limitHeld(-1, 51_048_576, 1024), false);
  assert.equal(limitHeld(50_331_648, 51_048_576, 1024), true);
  assert.equal(limitHeld(51_380_224, 51_048_576, 1024), true);
  assert.equal(limitHeld(52_428_800, 51_048_576, 1024), false, 'a whole MB off is another limit');
  assert.equal(limitHeld(50_000_000, 51_048_576, 1000), false);
  assert.equal(limitHeld('51000000', 51_048_576, 1000), true);
  assert.equal(limitHeld(undefined, 51_048_576, 1024), false);
  assert.equal(limitHeld(null, -1, 1024), false);
});

for (const [name, round] of Object.entries(ROUNDINGS))
  describe(`a platform that rounds sub-account limits to whole MB ${name}`, () => {
    let rig: VariantRig;
    before(async () => {
      rig = await startVariantRig({
        users: [
          {
            name: VARIANT_USER,
            password: VARIANT_PASS,
            mainAccount: VARIANT_MAIN,
            product: SIM_PRODUCTS.dynamicTraffic,
            draw: 'pwd',
            sessTime: 5,
            limitBytes: 50_000_000,
          },
        ],
        config: { accounts: { limitSyncMs: 200 } },
        hooks: {
          data: (op, data) => {
            if (!round || op !== 'GetProxyUserInfo') return data;
            const d = data as { limitFlow?: number };
            return typeof d.limitFlow === 'number' && d.limitFlow > 0 ? { ...d, limitFlow: round(d.limitFlow / MIB) * MIB } : data;
          },
        },
      });
    });
    after(async () => rig?.close());

    const sets = (): number => rig.platform.calls.get('SetProxyUserFlowLimit') ?? 0;
    const reads = (): number => rig.platform.calls.get('GetProxyUserInfo') ?? 0;
    const tenPasses = async (): Promise<void> => {
      const from = reads();
      await eventually(() => reads() >= from + 10, 20_000, 50);
    };

    test('the limit is set once, not again at every sync pass; a new local limit is sent', async () => {
      await tenPasses();
      const first = sets();
      await tenPasses();
      assert.equal(
        sets() - first,
        0,
        `SetProxyUserFlowLimit sent ${sets() - first} more times in 10 sync passes for one user whose limit never changed`,
      );
      // The operator raises the quota by 20 MB: the platform's backstop follows.
      const put = await rig.gw.admin(`/v1/users/${VARIANT_USER}/limit`, { method: 'PUT', body: { limitBytes: 70_000_000 } });
      assert.equal(put.status < 300, true, JSON.stringify(put.body));
      await eventually(
        () => {
          const sub = rig.platform.sim.inspect
            .accounts()
            .flatMap((a) => a.subs)
            .find((s) => s.appUsername === VARIANT_USER);
          return Number(sub?.limits[SIM_PRODUCTS.dynamicTraffic]) > 70_000_000;
        },
        20_000,
        50,
      );
    });
  });
