// Static orders on the sandbox: lifecycle and callbacks, idempotency and charging once, dropped replies,
// renew by calendar month, change, release, partial and failed outcomes, stock and balance refusals, reset.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createClock, SIM_PRODUCTS, startSimulator, type Simulator } from '../../src/sim/index.ts';
import type { PlatformClient } from '../../src/platform/client.ts';
import { orderFinal } from '../support/orders.ts';
import { callbackListener, clientFor, codeOf, rawCall, waitFor, type CallbackListener } from './helpers.ts';

const US = SIM_PRODUCTS.staticUsSocks;

describe('sandbox static orders', () => {
  let sim: Simulator;
  let client: PlatformClient;
  let cb: CallbackListener;
  // Platform time starts on 31 January so a month's renewal must clamp to the month's end.
  const clock = createClock({ start: Date.UTC(2027, 0, 31, 12, 0, 0) });
  before(async () => {
    cb = await callbackListener();
    sim = await startSimulator({ orderDelayMs: 120, upstreams: false, clock, callbackUrl: cb.url, callbackBackoffMs: 20 });
    client = clientFor(sim);
  });
  after(async () => {
    client.close();
    await sim.close();
    clock.stop();
    await cb.close();
  });

  test('open goes 1 → 3, instances run, callback arrives and is retried until success', async () => {
    cb.failures.order = 2;
    // Platform time all but stands still until the early state is read (on a loaded machine the 120 ms of
    // the order's delay can pass between the two calls); then it runs at its normal speed again.
    clock.setSpeed(1e-6);
    const accepted = await client.call('InstanceOpen', { appOrderNo: 'life-1', params: [{ productNo: US, count: 2, cycleTimes: 1 }] });
    assert.equal(accepted.amount, '10.00');
    const early = await client.call('GetOrder', { orderNo: accepted.orderNo });
    clock.setSpeed(1);
    assert.ok(Number(early.status) <= 2, 'not final at once');
    assert.ok(early.instances?.every((i) => Number(i.status) < 3));
    const order = await orderFinal(client, accepted.orderNo);
    assert.equal(order.status, 3);
    assert.equal(order.type, 1);
    assert.equal(order.total, 2);
    for (const i of order.instances ?? []) {
      assert.equal(i.status, 3);
      assert.ok(i.username && i.pwd);
      assert.match(String(i.openAt), /^2027-01-31T12:00:\d\dZ$/);
    }
    const rec = await waitFor(() => sim.inspect.callbacks({ type: 'order', no: accepted.orderNo }).find((r) => r.state === 'delivered'));
    assert.equal(rec.attempts.length, 3, 'two failures then success');
    assert.ok(cb.received.some((r) => r.type === 'order' && r.no === accepted.orderNo && r.op === '1'));
    await waitFor(() => cb.received.filter((r) => r.type === 'instance').length >= 2);
    assert.ok(cb.received.filter((r) => r.type === 'instance').every((r) => r.op === ''));
  });

  test('same merchant number: first answer again, charged once; other business → 10004', async () => {
    const first = await client.call('InstanceOpen', { appOrderNo: 'idem-1', params: [{ productNo: US, count: 1 }] });
    const again = await client.call('InstanceOpen', { appOrderNo: 'idem-1', params: [{ productNo: US, count: 5 }] });
    assert.deepEqual(again, first);
    assert.equal(sim.inspect.charges('idem-1').length, 1);
    const order = await orderFinal(client, first.orderNo);
    const instanceNo = order.instances![0]!.instanceNo;
    assert.equal(await codeOf(client.call('InstanceRelease', { orderNo: 'idem-1', instances: [instanceNo] })), 10004);
    assert.equal(await codeOf(client.call('InstanceRenew', { appOrderNo: 'idem-1', instances: [{ instanceNo }] })), 10004);
  });

  test('dropped reply, retried with the same merchant number, charges once', async () => {
    const coinBefore = Number(sim.inspect.merchant().coin);
    const params = { appOrderNo: 'drop-1', params: [{ productNo: US, count: 1 }] };
    sim.faults.dropNext(1, 'InstanceOpen');
    await assert.rejects(rawCall(sim, 'InstanceOpen', params));
    const created = sim.inspect.orders().find((o) => o.appOrderNo === 'drop-1');
    assert.ok(created, 'the dropped call was processed');
    const again = await client.call('InstanceOpen', params);
    assert.equal(again.orderNo, created.orderNo);
    assert.equal(sim.inspect.charges('drop-1').length, 1);
    assert.equal(Number(sim.inspect.merchant().coin), coinBefore - 5);
    // the real client's own retry after a dropped reply lands on the same order too
    sim.faults.dropNext(1, 'InstanceOpen');
    const retrying = clientFor(sim, 2);
    const viaRetry = await retrying.call('InstanceOpen', { appOrderNo: 'drop-2', params: [{ productNo: US, count: 1 }] });
    retrying.close();
    assert.equal(sim.inspect.orders().filter((o) => o.appOrderNo === 'drop-2').length, 1);
    assert.equal(sim.inspect.charges('drop-2').length, 1);
    assert.equal(Number(sim.inspect.merchant().coin), coinBefore - 10);
    await orderFinal(client, viaRetry.orderNo);
  });

  test('renew extends userExpired by calendar months; renew twice with other instances → 10013', async () => {
    const opened = await client.call('InstanceOpen', { appOrderNo: 'renew-open', params: [{ productNo: US, count: 1 }] });
    const inst = (await orderFinal(client, opened.orderNo)).instances![0]!;
    const start = new Date(Number(inst.userExpired) * 1000);
    assert.equal(start.toISOString().slice(0, 10), '2027-02-28', 'Jan 31 + 1 month clamps to Feb 28');
    const renew = await client.call('InstanceRenew', {
      appOrderNo: 'renew-1',
      instances: [{ instanceNo: inst.instanceNo, cycleTimes: 2 }],
    });
    assert.equal(renew.amount, '10.00');
    const done = await orderFinal(client, renew.orderNo);
    assert.equal(done.type, 2);
    const [after] = await client.call('GetInstance', { instances: [inst.instanceNo] });
    assert.equal(new Date(Number(after!.userExpired) * 1000).toISOString().slice(0, 10), '2027-04-28');
    assert.notEqual(after!.renewAt, '0001-01-01T00:00:00Z');
    assert.equal(await codeOf(client.call('InstanceRenew', { appOrderNo: 'renew-1', instances: [{ instanceNo: 'INS-other' }] })), 10013);
    assert.equal(await codeOf(client.call('InstanceRenew', { appOrderNo: 'renew-2', instances: [{ instanceNo: 'INS-none' }] })), 10011);
  });

  test('change keeps instanceNo with new details (type 5, amount 0, count 1); one at a time', async () => {
    const opened = await client.call('InstanceOpen', { appOrderNo: 'chg-open', params: [{ productNo: US, count: 1 }] });
    const before = (await orderFinal(client, opened.orderNo)).instances![0]!;
    const change = await client.call('ChangeProxy', { instanceNo: before.instanceNo, appOrderNo: 'chg-' + 'x'.repeat(40) });
    assert.equal(change.instanceNo, before.instanceNo);
    assert.equal(await codeOf(client.call('ChangeProxy', { instanceNo: before.instanceNo, appOrderNo: 'chg-2' })), 10004);
    const order = await orderFinal(client, change.orderNo);
    assert.equal(order.type, 5);
    assert.equal(order.amount, '0.00');
    assert.equal(order.count, 1);
    const now = order.instances![0]!;
    assert.equal(now.instanceNo, before.instanceNo);
    assert.notEqual(now.username, before.username);
    assert.notEqual(now.pwd, before.pwd);
    assert.notEqual(now.extendIp, before.extendIp);
    const repeat = await client.call('ChangeProxy', { instanceNo: before.instanceNo, appOrderNo: 'chg-' + 'x'.repeat(40) });
    assert.equal(repeat.orderNo, change.orderNo);
    assert.equal(repeat.status, 3);
    assert.ok(
      cb.received.some((r) => r.no === change.orderNo && r.op === '5') ||
        (await waitFor(() => cb.received.some((r) => r.no === change.orderNo && r.op === '5'))),
    );
    // a product without changeProxy refuses
    const sg = await client.call('InstanceOpen', { appOrderNo: 'chg-sg', params: [{ productNo: SIM_PRODUCTS.staticSgDay }] });
    const sgInst = (await orderFinal(client, sg.orderNo)).instances![0]!;
    assert.equal(await codeOf(client.call('ChangeProxy', { instanceNo: sgInst.instanceNo, appOrderNo: 'chg-sg-1' })), 10004);
  });

  test('release → 11 with releaseAt; releasing again → 10021', async () => {
    const opened = await client.call('InstanceOpen', { appOrderNo: 'rel-open', params: [{ productNo: US, count: 1 }] });
    const inst = (await orderFinal(client, opened.orderNo)).instances![0]!;
    const rel = await client.call('InstanceRelease', { orderNo: 'rel-1', instances: [inst.instanceNo] });
    const order = await orderFinal(client, rel.orderNo);
    assert.equal(order.type, 3);
    assert.equal(order.status, 3);
    const [after] = await client.call('GetInstance', { instances: [inst.instanceNo] });
    assert.equal(after!.status, 11);
    assert.notEqual(after!.releaseAt, '0001-01-01T00:00:00Z');
    assert.equal(await codeOf(client.call('InstanceRelease', { orderNo: 'rel-2', instances: [inst.instanceNo] })), 10021);
  });

  test('forced partial → 5 with some running and the rest refunded; forced fail → 4 fully refunded', async () => {
    sim.faults.orderOutcome('partial');
    const p = await client.call('InstanceOpen', { appOrderNo: 'part-1', params: [{ productNo: US, count: 4 }] });
    const order = await orderFinal(client, p.orderNo);
    assert.equal(order.status, 5);
    assert.equal(order.refund, 1);
    const statuses = order.instances!.map((i) => Number(i.status)).sort();
    assert.deepEqual(statuses, [10, 10, 3, 3].sort());
    const net = sim.inspect.charges('part-1').reduce((s, c) => s + Number(c.amount), 0);
    assert.equal(net, 10);
    sim.faults.orderOutcome('fail');
    const f = await client.call('InstanceOpen', { appOrderNo: 'fail-1', params: [{ productNo: US, count: 1 }] });
    assert.equal((await orderFinal(client, f.orderNo)).status, 4);
    assert.equal(
      sim.inspect.charges('fail-1').reduce((s, c) => s + Number(c.amount), 0),
      0,
    );
  });

  test('stock, offline, shared-project and balance refusals create nothing', async () => {
    const before = sim.inspect.orders().length;
    assert.equal(
      await codeOf(client.call('InstanceOpen', { appOrderNo: 'stock-1', params: [{ productNo: SIM_PRODUCTS.staticSoldOut }] })),
      10003,
    );
    assert.equal(
      await codeOf(client.call('InstanceOpen', { appOrderNo: 'off-1', params: [{ productNo: SIM_PRODUCTS.staticOffline }] })),
      10004,
    );
    assert.equal(
      await codeOf(client.call('InstanceOpen', { appOrderNo: 'shared-1', params: [{ productNo: SIM_PRODUCTS.staticCnShared }] })),
      10004,
    );
    assert.equal(
      await codeOf(
        client.call('InstanceOpen', { appOrderNo: 'shared-2', params: [{ productNo: SIM_PRODUCTS.staticCnShared, projectId: 'amazon' }] }),
      ),
      10003,
    );
    assert.equal(
      await codeOf(
        client.call('InstanceOpen', {
          appOrderNo: 'seg-1',
          params: [{ productNo: US, count: 2, cidrBlocks: [{ cidr: '198.51.100.0/24', count: 1 }] }],
        }),
      ),
      10004,
    );
    assert.equal(
      await codeOf(
        client.call('InstanceOpen', {
          appOrderNo: 'rich-1',
          params: [{ productNo: SIM_PRODUCTS.staticDeYear, count: 100, cycleTimes: 10 }],
        }),
      ),
      10003,
    );
    sim.faults.setMerchant({ coin: '1.00', credit: '0' });
    assert.equal(await codeOf(client.call('InstanceOpen', { appOrderNo: 'poor-1', params: [{ productNo: US }] })), 10002);
    assert.equal(sim.inspect.orders().length, before);
    assert.equal(sim.inspect.charges('poor-1').length, 0);
    sim.faults.setMerchant({ coin: '10000', credit: '500' });
    const shared = await client.call('InstanceOpen', {
      appOrderNo: 'shared-3',
      params: [{ productNo: SIM_PRODUCTS.staticCnShared, projectId: 'tiktok', count: 2 }],
    });
    const order = await orderFinal(client, shared.orderNo);
    assert.ok(order.instances!.every((i) => i.projectId === 'tiktok'));
  });

  test('reset password: same resetNo + same list → first result; other list → 10004', async () => {
    const opened = await client.call('InstanceOpen', { appOrderNo: 'reset-open', params: [{ productNo: US, count: 2 }] });
    const [a, b] = (await orderFinal(client, opened.orderNo)).instances!.map((i) => i.instanceNo) as [string, string];
    const first = await client.call('ResetProxyPassword', { resetNo: 'reset_1', instanceNoList: [a, b] });
    assert.equal(first.list?.length, 2);
    const [inst] = await client.call('GetInstance', { instances: [a] });
    assert.equal(inst!.pwd, first.list!.find((x) => x.instanceNo === a)!.newPassword);
    assert.deepEqual(await client.call('ResetProxyPassword', { resetNo: 'reset_1', instanceNoList: [b, a] }), first);
    assert.equal(await codeOf(client.call('ResetProxyPassword', { resetNo: 'reset_1', instanceNoList: [a] })), 10004);
  });

  test('specified IP: available, bought, then taken', async () => {
    const ip = '203.0.113.9';
    assert.equal((await client.call('GetAssignIpInfo', { ip })).canBuyStatus, true);
    const o = await client.call('InstanceOpenAssignIp', { appOrderNo: 'assign-1', productNo: US, cycleTimes: 1, assignIp: ip });
    const order = await orderFinal(client, o.orderNo);
    assert.equal(order.instances![0]!.extendIp, ip);
    assert.equal((await client.call('GetAssignIpInfo', { ip })).canBuyStatus, false);
    assert.equal(
      await codeOf(client.call('InstanceOpenAssignIp', { appOrderNo: 'assign-2', productNo: US, cycleTimes: 1, assignIp: ip })),
      10003,
    );
    assert.equal(await codeOf(client.call('GetOrder', { orderNo: 'SO-none' })), 10031);
    assert.equal(await codeOf(client.call('GetInstance', { instances: ['INS-none'] })), 10041);
  });

  test('product and instance callbacks from the knobs carry no op', async () => {
    sim.faults.updateProduct(US, { inventory: 400 });
    await waitFor(() => cb.received.find((r) => r.type === 'product' && r.no === US));
    assert.equal(cb.received.find((r) => r.type === 'product')!.op, '');
  });

  test('expiry: running → stopped (6) with a callback; renewable in the grace period; closed (10) after it', async () => {
    const o = await client.call('InstanceOpen', { appOrderNo: 'exp-open', params: [{ productNo: SIM_PRODUCTS.staticSgDay }] });
    const inst = (await orderFinal(client, o.orderNo)).instances![0]!;
    const status = async () => Number((await client.call('GetInstance', { instances: [inst.instanceNo] }))[0]!.status);
    sim.faults.advanceClock(86_400_000 + 1000);
    assert.equal(await status(), 6);
    await waitFor(() => cb.received.some((r) => r.type === 'instance' && r.no === inst.instanceNo));
    assert.equal(await codeOf(client.call('InstanceRelease', { orderNo: 'exp-rel', instances: [inst.instanceNo] })), 10022);
    const renew = await client.call('InstanceRenew', {
      appOrderNo: 'exp-renew',
      instances: [{ instanceNo: inst.instanceNo, cycleTimes: 3 }],
    });
    assert.equal((await orderFinal(client, renew.orderNo)).status, 3);
    assert.equal(await status(), 3);
    sim.faults.advanceClock(3 * 86_400_000);
    assert.equal(await status(), 6);
    sim.faults.advanceClock(8 * 86_400_000);
    assert.equal(await status(), 10);
    assert.equal(
      await codeOf(client.call('InstanceRenew', { appOrderNo: 'exp-renew-2', instances: [{ instanceNo: inst.instanceNo }] })),
      10011,
    );
  });
});
