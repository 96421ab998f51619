// Seed 4.11 [ResetProxyPassword]: "Response includes `status` (1=pending, 2=processing, 3=succeeded, 4=failed) and
// `newPassword` (empty = not yet generated or failed). The remaining response structure: not shown." The provider's
// SDK nests them per instance (`list: [{instanceNo, newPassword, status}]`, the control); a platform written from the
// seed answers them at the top, `{resetNo, status, newPassword}`; another answers only `{resetNo, status}` (the
// password to be read from the instance). The platform changes the password every time; the instance's customer,
// tunnelling through the SOCKS5 listener (a fresh upstream handshake each time, no warm connections), is served.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { curl, openStaticInstance, viaSocks5h } from './harness.ts';
import { eventually } from '../support/wait.ts';
import { startVariantRig, VARIANT_PASS, VARIANT_USER, type VariantHooks, type VariantRig } from '../support/platform-variants.ts';

type Sdk = { resetNo: string; list: Array<{ instanceNo: string; newPassword?: string; status: number }> };
const reshape =
  (f: (d: Sdk) => unknown): VariantHooks['data'] =>
  (op, data) =>
    op === 'ResetProxyPassword' ? f(data as Sdk) : data;

const VARIANTS: Array<[string, VariantHooks]> = [
  [
    'status and newPassword at the top (the seed)',
    { data: reshape((d) => ({ resetNo: d.resetNo, status: d.list[0]!.status, newPassword: d.list[0]!.newPassword ?? '' })) },
  ],
  ['status only, no password anywhere', { data: reshape((d) => ({ resetNo: d.resetNo, status: d.list[0]!.status })) }],
  ['a list per instance (the SDK; control)', {}],
];

for (const [variant, hooks] of VARIANTS) {
  describe(`a password reset answered with ${variant}`, () => {
    let rig: VariantRig;
    before(async () => {
      rig = await startVariantRig({ hooks, config: { pool: { warm: { perNode: 0 } } } });
    });
    after(async () => rig?.close());

    test("the instance's customer is served after the reset", async () => {
      const instanceNo = await openStaticInstance(rig.gw);
      const name = `${VARIANT_USER}-instance-${instanceNo}`;
      const through = async (): Promise<number> =>
        (await curl([...viaSocks5h(rig.gw.ports.socks5, name, VARIANT_PASS), rig.target.url('/hello')])).status;
      assert.ok(await eventually(async () => (await through()) === 200, 10_000, 250), 'served before the reset');
      const reset = await rig.gw.admin<{ status: number }>('/v1/instances/reset-password', { body: { instanceNoList: [instanceNo] } });
      assert.equal(reset.status, 202, JSON.stringify(reset.body));
      const platformPwd = (rig.platform.sim.inspect.instances() as unknown as Array<{ instanceNo: string; pwd: string }>).find(
        (i) => i.instanceNo === instanceNo,
      )?.pwd;
      let stored: string | null | undefined;
      const learned = await eventually(
        async () => (stored = (await rig.gw.daemon.orders.getInstance(instanceNo, { reveal: true })).pwd) === platformPwd,
        10_000,
        100,
      );
      assert.ok(learned, `answered ${JSON.stringify(reset.body)}; the platform's password now ${platformPwd}, Rotor's ${stored}`);
      let last = 0;
      const served = await eventually(async () => (last = await through()) === 200, 10_000, 250);
      assert.ok(served, `after the reset: HTTP ${last}`);
    });
  });
}
