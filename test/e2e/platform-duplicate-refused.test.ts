// Seed part 5: "on a retry after failure or timeout, keep the same value (and the same business order number)";
// part 7: "a duplicate order number is not processed twice (idempotency)" — not that the duplicate is answered with
// the first answer. The error table has 10013 "renew failed, the same merchant order cannot be renewed twice". A
// platform written from the seed may therefore do the first send (and charge it) and answer the resent number
// with a refusal: 10013 for a renewal, a parameter refusal (10004) for an open. Here the first send's answer is
// lost (connection reset) or comes after platform.timeoutMs; the client's own retry (same reqId, same number)
// meets the refusal. Order callbacks are off: tracking must not depend on them.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { CODE } from '../../src/platform/codes.ts';
import { openStaticInstance } from './harness.ts';
import { eventually } from '../support/wait.ts';
import { startVariantRig, type VariantHooks, type VariantRig } from '../support/platform-variants.ts';

/** The first send of a number is done and its answer lost (or `slowMs` late); a resend of it is refused. */
function duplicateRefusal(op: 'InstanceRenew' | 'InstanceOpen', code: number, msg: string, slowMs = 0): VariantHooks {
  const seen = new Set<string>();
  return {
    before: (o, params, reqId) => {
      if (o !== op || !seen.has(String(params.appOrderNo))) return undefined;
      return { status: 200, body: JSON.stringify({ reqId, code, msg }) };
    },
    reply: (o, params) => {
      if (o !== op || seen.has(String(params.appOrderNo))) return undefined;
      seen.add(String(params.appOrderNo));
      if (slowMs === 0) return { drop: true };
      return new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), slowMs));
    },
  };
}

const expiryOf = async (rig: VariantRig, instanceNo: string): Promise<number> =>
  (await rig.gw.admin<{ userExpired: number }>(`/v1/instances/${instanceNo}`)).body.userExpired;

describe('a platform refusing a resent renewal (10013) after the first was done and its answer lost', () => {
  let rig: VariantRig;
  let instanceNo: string;
  before(async () => {
    rig = await startVariantRig({ callbacks: false });
    instanceNo = await openStaticInstance(rig.gw);
    Object.assign(
      rig.platform.hooks,
      duplicateRefusal('InstanceRenew', CODE.RENEW_TWICE, 'the same merchant order cannot be renewed twice'),
    );
  });
  after(async () => rig?.close());

  test("the renewal is answered as placed and Rotor learns it (the instance's expiry moves)", async () => {
    const was = await expiryOf(rig, instanceNo);
    const placed = await rig.gw.admin<Record<string, unknown>>('/v1/orders/renew', {
      body: { appOrderNo: 'vrenew1', instances: [{ instanceNo, cycleTimes: 1 }] },
    });
    const charged = rig.platform.sim.inspect.charges('vrenew1');
    assert.equal(charged.length, 1, `the platform charged ${JSON.stringify(charged)}`);
    assert.equal(placed.status, 202, JSON.stringify(placed.body));
    let seen = was;
    const moved = await eventually(async () => (seen = await expiryOf(rig, instanceNo)) !== was, 10_000, 250);
    assert.ok(moved, `the platform charged ${charged[0]!.amount} (${charged[0]!.orderNo}); Rotor's instance still expires at ${seen}`);
  });
});

describe('a platform refusing a resent open (10004) after the first was done and its answer lost', () => {
  let rig: VariantRig;
  before(async () => {
    rig = await startVariantRig({ callbacks: false });
    Object.assign(rig.platform.hooks, duplicateRefusal('InstanceOpen', CODE.INVALID_PARAMS, 'appOrderNo already exists'));
  });
  after(async () => rig?.close());

  test('the open is answered as placed and Rotor learns the instance the platform opened and charged', async () => {
    const placed = await rig.gw.admin<Record<string, unknown>>('/v1/orders/open', {
      body: { appOrderNo: 'vopen1', productNo: 'STC-101-USA-SOCKS', count: 1, cycleTimes: 1 },
    });
    const charged = rig.platform.sim.inspect.charges('vopen1');
    assert.equal(charged.length, 1, `the platform charged ${JSON.stringify(charged)}`);
    assert.equal(placed.status, 202, JSON.stringify(placed.body));
    let list: Array<{ instanceNo: string; orderNo: string | null }> = [];
    const known = await eventually(
      async () => (list = (await rig.gw.admin<typeof list>('/v1/instances')).body).some((i) => i.orderNo === charged[0]!.orderNo),
      10_000,
      250,
    );
    assert.ok(known, `the platform charged ${charged[0]!.amount} (${charged[0]!.orderNo}); Rotor's instances: ${JSON.stringify(list)}`);
  });

  test('when the question "is there an order under this number" gets no answer either, the outcome is unknown, not refused', async () => {
    const hooks = duplicateRefusal('InstanceOpen', CODE.INVALID_PARAMS, 'appOrderNo already exists');
    rig.platform.hooks.reply = hooks.reply;
    rig.platform.hooks.before = (o, params, reqId, method) =>
      o === 'GetOrder' && params.appOrderNo === 'vopen3' ? { status: 503, body: 'busy' } : hooks.before!(o, params, reqId, method);
    const placed = await rig.gw.admin<{ error?: { code?: string } }>('/v1/orders/open', {
      body: { appOrderNo: 'vopen3', productNo: 'STC-101-USA-SOCKS', count: 1, cycleTimes: 1 },
    });
    assert.equal(rig.platform.sim.inspect.charges('vopen3').length, 1);
    assert.equal(placed.status, 503, JSON.stringify(placed.body));
    assert.equal(placed.body.error?.code, 'ORDER_OUTCOME_UNKNOWN', JSON.stringify(placed.body));
  });

  test('control: a refusal after a retry where nothing was done is still a refusal (the platform holds no such order)', async () => {
    const sent = rig.platform.calls.get('InstanceOpen') ?? 0;
    let first = true;
    rig.platform.hooks.before = (o, _params, reqId) => {
      if (o !== 'InstanceOpen') return undefined;
      if (first) {
        first = false;
        return { status: 503, body: 'busy' };
      }
      return { status: 200, body: JSON.stringify({ reqId, code: CODE.INVALID_PARAMS, msg: 'count out of range' }) };
    };
    const placed = await rig.gw.admin<{ error?: { platformCode?: number } }>('/v1/orders/open', {
      body: { appOrderNo: 'vopen2', productNo: 'STC-101-USA-SOCKS', count: 1, cycleTimes: 1 },
    });
    assert.equal(placed.status, 502, JSON.stringify(placed.body));
    assert.equal((rig.platform.calls.get('InstanceOpen') ?? 0) - sent, 2, 'the first send, its retry, nothing more');
    assert.deepEqual(rig.platform.sim.inspect.charges('vopen2'), []);
  });
});

describe('auto-renew on a platform refusing a resent renewal (10013)', () => {
  let rig: VariantRig;
  let instanceNo: string;
  before(async () => {
    // A month-long instance is "within hoursBefore" at once with 40 days.
    rig = await startVariantRig({ callbacks: false, config: { orders: { autoRenew: { enabled: true, hoursBefore: 960 } } } });
    instanceNo = await openStaticInstance(rig.gw);
    Object.assign(
      rig.platform.hooks,
      duplicateRefusal('InstanceRenew', CODE.RENEW_TWICE, 'the same merchant order cannot be renewed twice'),
    );
  });
  after(async () => rig?.close());

  test('one expiry is renewed (and charged) once over two checks', async () => {
    const renewals = () => rig.platform.sim.inspect.charges().filter((c) => c.operation !== 'open' && c.merchantNo.startsWith('RA'));
    await rig.gw.daemon.orders.tracker.checkExpiry();
    assert.equal(renewals().length, 1, JSON.stringify(rig.platform.sim.inspect.charges()));
    await rig.gw.daemon.orders.tracker.idle();
    await rig.gw.daemon.orders.tracker.checkExpiry();
    await rig.gw.daemon.orders.tracker.idle();
    assert.equal(renewals().length, 1, `renewals charged for ${instanceNo}: ${JSON.stringify(renewals())}`);
  });
});

describe('a renewal answered after platform.timeoutMs (a slow platform), its retry refused as a duplicate (10013)', () => {
  let rig: VariantRig;
  let instanceNo: string;
  before(async () => {
    rig = await startVariantRig({ callbacks: false, platform: { timeoutMs: 1500 } });
    instanceNo = await openStaticInstance(rig.gw);
    Object.assign(
      rig.platform.hooks,
      duplicateRefusal('InstanceRenew', CODE.RENEW_TWICE, 'the same merchant order cannot be renewed twice', 2500),
    );
  });
  after(async () => rig?.close());

  test('the renewal the platform made and charged is not answered as refused', async () => {
    const placed = await rig.gw.admin<{ error?: { platformCode?: number } }>('/v1/orders/renew', {
      body: { appOrderNo: 'vslow1', instances: [{ instanceNo, cycleTimes: 1 }] },
    });
    const charged = rig.platform.sim.inspect.charges('vslow1');
    assert.equal(charged.length, 1, `the platform charged ${JSON.stringify(charged)}`);
    assert.equal(placed.status, 202, `POST /v1/orders/renew answered ${placed.status} ${JSON.stringify(placed.body)}`);
  });
});
