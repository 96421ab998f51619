// The flow-use log's `startTime`/`endTime` (seed 4.19: `YYYY-MM-DD HH:MM:SS`, no zone; `usedTime` in the answer is
// epoch seconds). A mainland platform reads them on China time (UTC+8). Rotor wrote them in UTC with no way to say
// otherwise, so GET /v1/usage?compare=platform asked such a platform for a window 8 hours off and showed it counting
// nothing for the hour it logged (review15 #11). Now `platform.timeZone` names the platform's zone. The daemon in
// remote mode on the sandbox behind test/support/platform-variants.ts: the China-time platform is the sandbox (which
// reads UTC) with each request's times written back in UTC, as such a platform means them.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { startVariantRig, VARIANT_MAIN, VARIANT_PASS, VARIANT_USER, type VariantRig } from '../support/platform-variants.ts';
import { nodeConnectGet, waitFor } from './harness.ts';

const PRODUCT = SIM_PRODUCTS.dynamicTraffic;
const HOUR = 3_600_000;
const CST = 8 * HOUR;

/** What a platform on China time means by a `YYYY-MM-DD HH:MM:SS`, written in UTC for the sandbox (which reads UTC). */
const chinaToUtc = (text: unknown): unknown =>
  typeof text === 'string' ? new Date(Date.parse(`${text.replace(' ', 'T')}Z`) - CST).toISOString().slice(0, 19).replace('T', ' ') : text;
const utc = (ms: number): string => new Date(ms).toISOString().slice(0, 19).replace('T', ' ');

type Row = { account: string; productNo: string; period: string; rotorBytes: number; platformBytes: number | null };

const VARIANTS = [
  { name: 'a platform on China time, platform.timeZone Asia/Shanghai', china: true, timeZone: 'Asia/Shanghai' },
  { name: 'a platform on China time, platform.timeZone +08:00', china: true, timeZone: '+08:00' },
  { name: 'a platform on UTC (the sandbox), platform.timeZone left at UTC (control)', china: false, timeZone: undefined },
];

for (const v of VARIANTS)
  describe(`the flow-use log of ${v.name}`, () => {
    let rig: VariantRig;
    const asked: Array<{ startTime: unknown; endTime: unknown }> = [];
    before(async () => {
      rig = await startVariantRig({
        platform: v.timeZone ? { timeZone: v.timeZone } : {},
        hooks: {
          request: (op, p) => {
            if (op !== 'ProxyFlowUseLog') return undefined;
            asked.push({ startTime: p.startTime, endTime: p.endTime });
            return v.china ? { ...p, startTime: chinaToUtc(p.startTime), endTime: chinaToUtc(p.endTime) } : undefined;
          },
        },
      });
    });
    after(async () => rig?.close());

    test('compare=platform shows the platform counting the hour Rotor relayed', async () => {
      for (let i = 0; i < 3; i++) {
        const r = await nodeConnectGet(rig.gw.ports.http, VARIANT_USER, VARIANT_PASS, rig.target.port, '/bytes/200000', 20_000);
        assert.equal(r.status, 200);
      }
      const from = Math.floor(Date.now() / HOUR) * HOUR;
      const to = from + HOUR;
      const q = `/v1/usage?compare=platform&granularity=hour&from=${new Date(from).toISOString()}&to=${new Date(to).toISOString()}`;
      const rows = await waitFor("Rotor's bytes of this hour in the rollups", async () => {
        const r = await rig.gw.admin<Row[]>(q);
        const row = r.body.find?.((x) => x.account === VARIANT_MAIN && x.productNo === PRODUCT);
        return row && row.rotorBytes >= 600_000 ? r.body : undefined;
      });
      // The sandbox's own log of the hour, read straight in UTC: what the platform counted.
      const direct = await rig.direct.call('ProxyFlowUseLog', {
        appUsername: VARIANT_MAIN,
        productNo: PRODUCT,
        startTime: utc(from),
        endTime: utc(to - 1000),
        pageSize: 100,
      });
      const counted = (direct.list ?? []).reduce((s, e) => s + e.used, 0);
      const row = rows.find((x) => x.account === VARIANT_MAIN && x.productNo === PRODUCT)!;
      assert.ok(counted > 0, `the platform logged ${counted} B this hour`);
      assert.equal(
        row.platformBytes,
        counted,
        `compare=platform: ${JSON.stringify(row)}; the platform's log of the hour holds ${counted} B`,
      );
      // The window was written on the platform's clock.
      const shift = v.china ? CST : 0;
      assert.ok(
        asked.some((a) => a.startTime === utc(from + shift) && a.endTime === utc(to - 1000 + shift)),
        `asked: ${JSON.stringify(asked)}`,
      );
    });
  });
