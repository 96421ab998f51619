// A platform written in Go fills the fields an order listing leaves out with zero values. Read again (GET
// /v1/orders/:no, the dashboard's order page), `"pwd": ""` blanked the static instance's stored password (every
// tunnel through it refused upstream) and `"userExpired": 0` its expiry (read as "no expiry": auto-renew never
// renewed it and it lapsed). Zero values in an instance's connection data and expiry now keep what Rotor knew.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { curl, openStaticInstance, viaSocks5h } from './harness.ts';
import { eventually } from '../support/wait.ts';
import { startVariantRig, VARIANT_PASS, VARIANT_USER, type VariantRig } from '../support/platform-variants.ts';

const zeroed =
  (fields: Record<string, unknown>) =>
  (op: string, data: unknown): unknown => {
    if (op !== 'GetOrder') return data;
    const o = data as { instances?: Array<Record<string, unknown>> | null };
    return { ...o, instances: o.instances?.map((i) => ({ ...i, ...fields })) ?? o.instances };
  };

async function readEveryOrder(rig: VariantRig): Promise<void> {
  const orders = await rig.gw.admin<Array<{ appOrderNo: string }>>('/v1/orders');
  for (const o of orders.body) assert.equal((await rig.gw.admin(`/v1/orders/${o.appOrderNo}`)).status, 200);
}

describe('order listings with "pwd": ""', () => {
  let rig: VariantRig;
  before(async () => {
    rig = await startVariantRig({ hooks: { data: zeroed({ pwd: '' }) }, config: { pool: { warm: { perNode: 0 } } } });
  });
  after(async () => rig?.close());

  test('the static instance is still served after its order was read again', async () => {
    const instanceNo = await openStaticInstance(rig.gw);
    const name = `${VARIANT_USER}-instance-${instanceNo}`;
    const through = async (): Promise<number> =>
      (await curl([...viaSocks5h(rig.gw.ports.socks5, name, VARIANT_PASS), rig.target.url('/hello')])).status;
    let first = 0;
    assert.ok(await eventually(async () => (first = await through()) === 200, 10_000, 250), `first: HTTP ${first}`);
    await readEveryOrder(rig);
    const stored = await rig.gw.daemon.orders.getInstance(instanceNo, { reveal: true });
    assert.ok(typeof stored.pwd === 'string' && stored.pwd.length > 0, `stored password ${JSON.stringify(stored.pwd)}`);
    assert.equal(await through(), 200);
  });
});

describe('order listings with "userExpired": 0', () => {
  let rig: VariantRig;
  before(async () => {
    // A month-long instance is within hoursBefore at once with 40 days.
    rig = await startVariantRig({
      hooks: { data: zeroed({ userExpired: 0 }) },
      config: { orders: { autoRenew: { enabled: true, hoursBefore: 960 } } },
    });
  });
  after(async () => rig?.close());

  test('the expiry watch still renews the instance after its order was read again', async () => {
    const instanceNo = await openStaticInstance(rig.gw);
    await readEveryOrder(rig);
    const stored = await rig.gw.admin<{ userExpired: number | null }>(`/v1/instances/${instanceNo}`);
    assert.ok((stored.body.userExpired ?? 0) > 0, `stored expiry ${stored.body.userExpired}`);
    await rig.gw.daemon.orders.tracker.checkExpiry();
    const renewals = rig.platform.sim.inspect.charges().filter((c) => c.operation === 'InstanceRenew');
    assert.equal(renewals.length, 1, `renewals placed: ${renewals.length}`);
  });
});
