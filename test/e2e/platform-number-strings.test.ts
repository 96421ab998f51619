// Seed 2.11: ProxyInfo's `used` and `balance` are "string, MB"; how a number is written in them is not said. A
// platform in Go filling them with fmt.Sprint / %v writes 1,000,000 MB (a 1 TB package) as "1e+06"; one with
// nothing used yet may write `used` as "". The daemon on such a platform reads the balance and makes a traffic
// return (which reads the balance around it).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { startVariantRig, VARIANT_MAIN, type VariantRig } from '../support/platform-variants.ts';

const PRODUCT = SIM_PRODUCTS.dynamicTraffic;

/** Go's strconv.FormatFloat(x, 'g', -1, 64) for the whole numbers used here (what fmt's %v writes for a float64). */
function goG(x: number): string {
  if (Math.abs(x) < 1e6) return String(x);
  const [m, e] = x.toExponential().split('e') as [string, string];
  const n = Number(e);
  return `${m}e${n < 0 ? '-' : '+'}${String(Math.abs(n)).padStart(2, '0')}`;
}

type Entry = Record<string, unknown>;
const rewrite =
  (f: (e: Entry) => Entry) =>
  (op: string, data: unknown): unknown =>
    op === 'ProxyInfo' ? { ...(data as object), list: ((data as { list?: Entry[] }).list ?? []).map(f) } : data;

describe('the daemon on a platform writing ProxyInfo MB strings as Go does ("1e+06") and nothing used as ""', () => {
  let rig: VariantRig;
  before(async () => {
    rig = await startVariantRig({
      flowMb: 1_000_000,
      hooksAfterStart: {
        data: rewrite((e) => ({ ...e, used: Number(e.used) === 0 ? '' : goG(Number(e.used)), balance: goG(Number(e.balance)) })),
      },
    });
  });
  after(async () => rig?.close());

  test("the writing is Go's", () => {
    assert.equal(goG(1_000_000), '1e+06');
    assert.equal(goG(1_048_576), '1.048576e+06');
    assert.equal(goG(1024), '1024');
  });

  test('GET /v1/accounts/:name/balance reads the 1 TB balance', async () => {
    const b = await rig.gw.admin<{ balanceMb?: number }>(`/v1/accounts/${VARIANT_MAIN}/balance?productNo=${PRODUCT}`);
    assert.equal(b.status, 200, JSON.stringify(b.body));
    assert.equal(b.body.balanceMb, 1_000_000);
  });

  test('a traffic return of 100 MB is made (the balance is read around it)', async () => {
    const r = await rig.gw.admin<Record<string, unknown>>(`/v1/accounts/${VARIANT_MAIN}/return`, {
      body: { productNo: PRODUCT, flowNum: 100 },
    });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const b = await rig.gw.admin<{ balanceMb?: number }>(`/v1/accounts/${VARIANT_MAIN}/balance?productNo=${PRODUCT}`);
    assert.equal(b.body.balanceMb, 999_900, JSON.stringify(b.body));
  });
});
