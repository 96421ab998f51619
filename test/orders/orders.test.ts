// The static-order surface against the sandbox: placing, tracking by callback and by polling, instances,
// renew / change / release / reset, charging once under dropped replies and crashes, callback hygiene.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SIM_PRODUCTS, startSimulator, type Simulator } from '../../src/sim/index.ts';
import { OrderError, nodeOf } from '../../src/orders/index.ts';
import { finalOrder, harness, waitFor } from './helpers.ts';
import { runCurl } from '../support/curl.ts';
import { startHttpTarget, type HttpTarget } from '../support/target.ts';

interface SimInstance {
  instanceNo: string;
  orderNo: string;
  port: number;
  username: string;
  pwd: string;
  userExpired: number;
}
const US = SIM_PRODUCTS.staticUsSocks;
const SG = SIM_PRODUCTS.staticSgDay;

describe('orders on the sandbox', () => {
  let sim: Simulator;
  let dir: string;
  let target: HttpTarget;
  let n = 0;
  const db = () => join(dir, `o${++n}.db`);
  const simInstances = () => sim.inspect.instances() as unknown as SimInstance[];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rotor-orders-'));
    sim = await startSimulator({ orderDelayMs: 100, callbackBackoffMs: 20 });
    target = await startHttpTarget();
  });
  after(async () => {
    await target.close();
    await sim.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function curlThrough(node: {
    protocol: string;
    host: string;
    port: number;
    username?: string;
    password?: string;
  }): Promise<string> {
    const proxyArgs =
      node.protocol === 'socks5' ? ['--socks5-hostname', `${node.host}:${node.port}`] : ['-x', `http://${node.host}:${node.port}`];
    const r = await runCurl([...proxyArgs, '--proxy-user', `${node.username}:${node.password}`, target.url('/hello')], { maxTimeS: 5 });
    if (r.exitCode !== 0) throw new Error(`curl exited ${r.exitCode}: ${r.stderr}`);
    return r.stdout;
  }

  test('open → callback → order 3 → instances stored; instanceNode is the live endpoint', async () => {
    // Polling so slow that only the callback can finish the order in time.
    const h = await harness(sim, db(), { tracking: { pollInitialMs: 60_000, pollMaxMs: 60_000, sweepMs: 60_000 } });
    try {
      await h.orders.start();
      const placed = await h.orders.open({ productNo: US, count: 2, cycleTimes: 1 });
      assert.match(placed.appOrderNo, /^R[a-z0-9]+$/);
      assert.ok(placed.appOrderNo.length <= 32);
      assert.ok(placed.orderNo);
      assert.equal(placed.type, 1);
      assert.equal(placed.amount, '10.00');
      assert.ok(placed.status < 3);
      const done = await finalOrder(h, placed.orderNo!);
      assert.equal(done.status, 3);
      assert.equal(done.appOrderNo, placed.appOrderNo);
      await h.orders.tracker.idle();
      const cbs = await h.store.listCallbacks();
      assert.ok(cbs.some((c) => c.type === 'order' && c.no === placed.orderNo && c.op === '1' && c.processed));
      assert.ok(h.answers.every((a) => a.status === 200 && a.code === 'success'));
      const view = await h.orders.getOrder(placed.appOrderNo);
      assert.equal(view.instances?.length, 2);
      const ofOrder = simInstances().filter((i) => i.orderNo === placed.orderNo);
      for (const inst of view.instances!) {
        assert.equal(inst.status, 3);
        assert.equal('pwd' in inst, false, 'views carry no password');
        const stored = (await h.store.getInstance(inst.instanceNo))!;
        const real = ofOrder.find((i) => i.instanceNo === inst.instanceNo)!;
        assert.equal(stored.pwd, real.pwd);
        assert.equal(stored.port, real.port);
        assert.equal(stored.userExpired, real.userExpired);
      }
      const first = view.instances![0]!;
      const node = await h.orders.instanceNode(first.instanceNo);
      assert.ok(node);
      assert.equal(node.protocol, 'socks5');
      assert.equal(node.host, '127.0.0.1');
      assert.equal(node.port, first.port);
      assert.equal(node.source, 'instance');
      assert.equal(node.id.includes(node.password!), false, 'the id never holds the password');
      assert.equal(await curlThrough(node), 'hello from target');
      const gauge = await h.metrics.registry.getSingleMetricAsString('rotor_orders');
      assert.match(gauge, /rotor_orders\{type="1",status="3"\} 1/);
      assert.match(await h.metrics.registry.getSingleMetricAsString('rotor_instances'), /rotor_instances\{status="3"\} 2/);
      assert.match(await h.metrics.registry.getSingleMetricAsString('rotor_callbacks_total'), /type="order",result="accepted"/);
      // No password ever reached the log.
      for (const i of ofOrder)
        assert.equal(
          h.logs.some((l) => l.includes(i.pwd)),
          false,
        );
    } finally {
      await h.close();
    }
  });

  test('with callbacks switched off the order still completes by polling', async () => {
    const h = await harness(sim, db());
    sim.faults.callbacks(false);
    try {
      await h.orders.start();
      const placed = await h.orders.open({ params: [{ productNo: SG, count: 1, cycleTimes: 1 }] });
      const done = await finalOrder(h, placed.appOrderNo);
      assert.equal(done.status, 3);
      assert.deepEqual(await h.store.listCallbacks(), []);
      const instances = await h.store.listInstances({ orderNo: placed.orderNo! });
      assert.equal(instances.length, 1);
      assert.equal(instances[0]!.status, 3);
      await h.orders.tracker.idle();
      assert.deepEqual(h.orders.tracker.following(), []);
    } finally {
      sim.faults.callbacks(true);
      await h.close();
    }
  });

  test('a dropped reply is retried with the same number and reqId and charged once', async () => {
    const h = await harness(sim, db(), { retries: 2 });
    try {
      await h.orders.start();
      sim.faults.dropNext(1, 'InstanceOpen');
      const placed = await h.orders.open({ productNo: SG, count: 1 });
      assert.equal(sim.inspect.charges(placed.appOrderNo).length, 1);
      assert.equal(sim.inspect.orders().filter((o) => o.appOrderNo === placed.appOrderNo).length, 1);
      const j = await h.store.getJournal(placed.appOrderNo);
      assert.equal(j?.state, 'accepted');
      assert.equal(j?.orderNo, placed.orderNo);
      assert.equal((await finalOrder(h, placed.appOrderNo)).status, 3);
    } finally {
      await h.close();
    }
  });

  test('crash between sending and learning: a new Orders on the same file resumes and charges once', async () => {
    const path = db();
    const a = await harness(sim, path, { retries: 0, listen: false });
    const coinBefore = Number(sim.inspect.merchant().coin);
    let sentNo = '';
    sim.faults.dropNext(1, 'InstanceOpen');
    await assert.rejects(a.orders.open({ productNo: SG, count: 1 }), (e: unknown) => {
      assert.ok(e instanceof OrderError);
      assert.equal(e.code, 'ORDER_OUTCOME_UNKNOWN');
      sentNo = e.merchantNo!;
      return true;
    });
    assert.equal((await a.store.getJournal(sentNo))?.state, 'unknown');
    assert.equal(sim.inspect.orders().filter((o) => o.appOrderNo === sentNo).length, 1, 'the platform did process it');
    // A second intent that was journaled but never sent (killed right after writing it).
    const neverSent = 'Rneversent0001';
    await a.store.addIntent({
      merchantNo: neverSent,
      operation: 'InstanceOpen',
      request: { appOrderNo: neverSent, params: [{ productNo: SG, count: 1, cycleTimes: 1 }] },
      reqId: 'req-never-sent',
    });
    // The process dies: nothing is stopped cleanly, the file is all that remains.
    a.client.close();
    await a.store.close();

    const b = await harness(sim, path);
    try {
      await b.orders.start();
      for (const no of [sentNo, neverSent]) {
        const o = await finalOrder(b, no);
        assert.equal(o.status, 3);
        assert.equal(sim.inspect.charges(no).length, 1, `${no} charged once`);
        assert.equal(sim.inspect.orders().filter((x) => x.appOrderNo === no).length, 1);
        assert.equal((await b.store.getJournal(no))?.state, 'accepted');
        assert.equal((await b.store.listInstances({ orderNo: o.orderNo! })).length, 1);
      }
      assert.equal(Number(sim.inspect.merchant().coin), Math.round((coinBefore - 0.6) * 100) / 100);
      // Starting again changes nothing.
      assert.deepEqual(await b.orders.resumeIntents(), { resumed: 0, accepted: [], rejected: [], unknown: [] });
    } finally {
      await b.close();
    }
  });

  test('repeated, reordered and malformed callbacks leave the store correct', async () => {
    const h = await harness(sim, db(), { tracking: { pollInitialMs: 60_000, pollMaxMs: 60_000, sweepMs: 60_000 } });
    try {
      await h.orders.start();
      for (const bad of [
        {},
        { type: 'bogus', no: 'x' },
        { type: 'order' },
        { type: 'order', no: '' },
        { type: 'order', no: '../etc/passwd' },
        { type: 'order', no: 'x'.repeat(65) },
        { type: 'order', no: 'SO1', op: 'abc' },
        { type: ['order', 'order'], no: 'SO1' },
      ]) {
        const a = await h.orders.handleCallback(bad as Record<string, unknown>);
        assert.equal(a.status, 400, JSON.stringify(bad));
        assert.notEqual(a.body.code, 'success');
      }
      assert.equal((await h.orders.handleCallback(new URLSearchParams('type=order&no=a&no=b'))).status, 400);
      assert.deepEqual(await h.store.listCallbacks(), []);

      // An instance callback arriving before its order's callback, then the order callback three times.
      sim.faults.callbacks(false);
      const placed = await h.orders.open({ productNo: SG, count: 1 });
      await waitFor(() => sim.inspect.order(placed.orderNo!)?.status === 3 || undefined, 3000, 'platform order');
      const instanceNo = (sim.inspect.order(placed.orderNo!) as { instances: { instanceNo: string }[] }).instances[0]!.instanceNo;
      assert.equal((await h.orders.handleCallback({ type: 'instance', no: instanceNo })).body.code, 'success');
      await h.orders.tracker.idle();
      assert.equal((await h.store.getInstance(instanceNo))?.status, 3);
      for (let i = 0; i < 3; i++) {
        const a = await h.orders.handleCallback({ type: 'order', no: placed.orderNo!, op: '1' });
        assert.deepEqual(a, { status: 200, body: { code: 'success', msg: 'ok' } });
      }
      await h.orders.tracker.idle();
      const rows = (await h.store.listCallbacks()).filter((c) => c.type === 'order');
      assert.equal(rows.length, 1);
      assert.equal(rows[0]!.count, 3);
      assert.equal(rows[0]!.processed, true);
      assert.equal((await h.store.getOrder(placed.appOrderNo))?.status, 3);
      // The merchant number works as `no` too.
      assert.equal((await h.orders.handleCallback({ type: 'order', no: placed.appOrderNo, op: '1' })).body.code, 'success');
      // A callback for an order the platform does not know is recorded and answered, and stores nothing.
      assert.equal((await h.orders.handleCallback({ type: 'order', no: 'SO-nope-1', op: '1' })).status, 200);
      await h.orders.tracker.idle();
      assert.equal(await h.store.getOrder('SO-nope-1'), undefined);
      assert.equal((await h.store.listOrders()).length, 1);
      // A product callback refreshes the catalogue for a product it has seen; one never seen is answered and
      // ignored (issue 13: anyone can send callbacks; a new product appears in the next listing).
      assert.equal((await h.orders.handleCallback({ type: 'product', no: 'NEVER_SEEN' })).status, 200);
      await h.orders.tracker.idle();
      assert.equal(h.orders.catalog.isAuthorized('NEVER_SEEN'), undefined);
      await h.orders.catalog.product(US);
      assert.equal((await h.orders.handleCallback({ type: 'product', no: US })).status, 200);
      await h.orders.tracker.idle();
      assert.equal(h.orders.catalog.isAuthorized(US), true);
      assert.equal((await h.store.listCallbacks({ processed: false })).length, 0);
    } finally {
      sim.faults.callbacks(true);
      await h.close();
    }
  });

  test('a partially completed order keeps the instances that opened', async () => {
    const h = await harness(sim, db());
    try {
      await h.orders.start();
      sim.faults.orderOutcome('partial');
      const placed = await h.orders.open({ productNo: US, count: 2 });
      assert.equal((await finalOrder(h, placed.appOrderNo)).status, 5);
      const statuses = (await h.store.listInstances({ orderNo: placed.orderNo! }))
        .map((i) => i.status)
        .sort((x, y) => Number(x) - Number(y));
      assert.deepEqual(statuses, [3, 10]);
    } finally {
      await h.close();
    }
  });

  test('renew moves userExpired by the product period; change keeps instanceNo; reset; release ends at 11', async () => {
    const h = await harness(sim, db());
    try {
      await h.orders.start();
      const opened = await h.orders.open({ productNo: US, count: 1 });
      await finalOrder(h, opened.appOrderNo);
      const [inst] = await h.store.listInstances({ orderNo: opened.orderNo! });
      assert.ok(inst);

      // renew US (1 calendar month): userExpired moves to the same day next month (or its end)
      const before = inst.userExpired!;
      const renewed = await h.orders.renew({ instances: [{ instanceNo: inst.instanceNo, cycleTimes: 1 }] });
      assert.equal(renewed.type, 2);
      assert.equal((await finalOrder(h, renewed.appOrderNo)).status, 3);
      const after = (await h.store.getInstance(inst.instanceNo))!.userExpired!;
      const d = new Date(before * 1000);
      const expected = new Date(
        Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1, d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds()),
      );
      const lastDay = new Date(Date.UTC(expected.getUTCFullYear(), expected.getUTCMonth() + 1, 0)).getUTCDate();
      expected.setUTCDate(Math.min(d.getUTCDate(), lastDay));
      assert.equal(after, expected.getTime() / 1000);
      assert.equal(simInstances().find((i) => i.instanceNo === inst.instanceNo)?.userExpired, after);

      // change: same instanceNo, new connection details that work
      const oldNode = (await h.orders.instanceNode(inst.instanceNo))!;
      const changed = await h.orders.change(inst.instanceNo, { reason: 'slow' });
      assert.equal(changed.type, 5);
      assert.ok(changed.appOrderNo.length <= 64);
      assert.equal((await finalOrder(h, changed.appOrderNo)).status, 3);
      const after5 = (await h.store.getInstance(inst.instanceNo))!;
      const real = simInstances().find((i) => i.instanceNo === inst.instanceNo)!;
      assert.equal(after5.username, real.username);
      assert.equal(after5.pwd, real.pwd);
      assert.equal(after5.port, real.port);
      assert.notEqual(after5.username, oldNode.username);
      const newNode = (await h.orders.instanceNode(inst.instanceNo))!;
      assert.equal(await curlThrough(newNode), 'hello from target');
      await assert.rejects(curlThrough({ ...newNode, password: oldNode.password! }), 'the old password no longer works');

      // reset password: the new password is stored and works
      const reset = await h.orders.resetPassword({ instanceNoList: [inst.instanceNo] });
      assert.equal(reset.status, 3);
      assert.deepEqual(reset.list, [{ instanceNo: inst.instanceNo, status: 3, passwordChanged: true }]);
      const afterReset = (await h.store.getInstance(inst.instanceNo))!;
      assert.equal(afterReset.pwd, simInstances().find((i) => i.instanceNo === inst.instanceNo)!.pwd);
      assert.notEqual(afterReset.pwd, after5.pwd);
      assert.equal(await curlThrough((await h.orders.instanceNode(inst.instanceNo))!), 'hello from target');
      assert.equal(
        JSON.stringify((await h.store.getJournal(reset.resetNo))?.result).includes(afterReset.pwd!),
        false,
        'the journal keeps no password',
      );

      // release: status 11, no longer routable
      const released = await h.orders.release({ instances: [inst.instanceNo] });
      assert.equal(released.type, 3);
      assert.equal((await finalOrder(h, released.appOrderNo)).status, 3);
      assert.equal((await h.store.getInstance(inst.instanceNo))?.status, 11);
      assert.equal(await h.orders.instanceNode(inst.instanceNo), undefined);
      const view = await h.orders.getOrder(released.orderNo!);
      assert.deepEqual(
        view.instances?.map((i) => [i.instanceNo, i.status]),
        [[inst.instanceNo, 11]],
      );
      for (const secret of [oldNode.password!, after5.pwd!, afterReset.pwd!])
        assert.equal(
          h.logs.some((l) => l.includes(secret)),
          false,
        );
    } finally {
      await h.close();
    }
  });

  test('expiry watch warns once and the local auto-renew places one renew per expiry', async () => {
    const h = await harness(sim, db(), { tracking: { expiryWarnHours: 30, autoRenew: { enabled: true, hoursBefore: 25 } } });
    try {
      await h.orders.start();
      const opened = await h.orders.open({ productNo: SG, count: 1 });
      await finalOrder(h, opened.appOrderNo);
      const [inst] = await h.store.listInstances({ orderNo: opened.orderNo! });
      const before = inst!.userExpired!;
      await h.orders.tracker.checkExpiry();
      await h.orders.tracker.checkExpiry();
      const renewOrders = sim.inspect.orders().filter((o) => o.kind === 'renew' && o.instances.includes(inst!.instanceNo));
      assert.equal(renewOrders.length, 1);
      await finalOrder(h, renewOrders[0]!.appOrderNo);
      assert.equal((await h.store.getInstance(inst!.instanceNo))?.userExpired, before + 86_400);
      await h.orders.tracker.checkExpiry();
      assert.equal(
        sim.inspect.orders().filter((o) => o.kind === 'renew' && o.instances.includes(inst!.instanceNo)).length,
        1,
        '48 h left: no renew',
      );
      assert.equal(h.logs.filter((l) => l.includes('expires soon') && l.includes(inst!.instanceNo)).length, 1);
    } finally {
      await h.close();
    }
  });

  test('local refusals send nothing; assign-ip checks then opens', async () => {
    const h = await harness(sim, db());
    try {
      const ordersBefore = sim.inspect.orders().length;
      const refuse = async (p: Promise<unknown>, code: string) =>
        assert.rejects(p, (e: unknown) => e instanceof OrderError && e.code === code);
      await refuse(h.orders.open({ productNo: SIM_PRODUCTS.staticCnShared, count: 1 }), 'PROJECT_REQUIRED');
      await refuse(h.orders.open({ productNo: SIM_PRODUCTS.staticCnShared, count: 1, projectId: 'amazon' }), 'PRODUCT_NOT_PURCHASABLE');
      await refuse(h.orders.open({ productNo: SIM_PRODUCTS.staticOffline, count: 1 }), 'PRODUCT_NOT_PURCHASABLE');
      await refuse(h.orders.open({ productNo: SIM_PRODUCTS.staticSoldOut, count: 1 }), 'PRODUCT_NOT_PURCHASABLE');
      await refuse(h.orders.open({ productNo: SIM_PRODUCTS.unauthorized, count: 1 }), 'PRODUCT_UNAUTHORIZED');
      await refuse(h.orders.open({ productNo: US, count: 101 }), 'ORDER_INVALID');
      await refuse(h.orders.open({ productNo: US, count: 1, cycleTimes: 0 }), 'ORDER_INVALID');
      await refuse(h.orders.open({ productNo: US, count: 2, cidrBlocks: [{ cidr: '198.51.100.0/24', count: 1 }] }), 'ORDER_INVALID');
      await refuse(h.orders.open({ productNo: US, count: 1, cidrBlocks: [{ cidr: '192.0.2.0/26', count: 1 }] }), 'SEGMENT_UNAVAILABLE');
      await refuse(h.orders.open({ proxyType: 101, count: 1, cidrBlocks: [{ cidr: '198.51.100.0/24', count: 1 }] }), 'ORDER_INVALID');
      await refuse(h.orders.open({ productNo: SIM_PRODUCTS.dynamicTraffic, count: 1 }), 'ORDER_INVALID');
      await refuse(h.orders.open({ productNo: US, extBandWidth: 101 }), 'ORDER_INVALID');
      await refuse(h.orders.renew({ appOrderNo: 'x'.repeat(33), instances: [{ instanceNo: 'I1' }] }), 'ORDER_INVALID');
      await refuse(h.orders.resetPassword({ resetNo: 'bad-chars!', instanceNoList: ['I1'] }), 'ORDER_INVALID');
      await refuse(h.orders.assignIp({ productNo: SG, cycleTimes: 1, assignIp: '198.51.100.77' }), 'ORDER_INVALID');
      assert.equal(sim.inspect.orders().length, ordersBefore);
      assert.deepEqual(await h.store.listJournal(), []);

      // A shared product with a project is placed; a platform refusal is journaled as rejected.
      const shared = await h.orders.open({ productNo: SIM_PRODUCTS.staticCnShared, count: 1, projectId: 'tiktok' });
      assert.ok(shared.orderNo);
      await assert.rejects(
        h.orders.renew({ instances: [{ instanceNo: 'NO-SUCH-INSTANCE' }] }),
        (e: unknown) => (e as { platformCode?: number }).platformCode === 10011,
      );
      assert.equal((await h.store.listJournal(['rejected'])).length, 1);
      // Reusing a merchant number for another request is refused locally; resubmitting the same one is idempotent.
      const again = await h.orders.open({
        productNo: SIM_PRODUCTS.staticCnShared,
        count: 1,
        projectId: 'tiktok',
        appOrderNo: shared.appOrderNo,
      });
      assert.equal(again.orderNo, shared.orderNo);
      await refuse(h.orders.open({ productNo: SG, count: 1, appOrderNo: shared.appOrderNo }), 'MERCHANT_NO_CONFLICT');

      const check = await h.orders.checkAssignIp('198.51.100.200');
      assert.equal(check.canBuyStatus, true);
      const assigned = await h.orders.assignIp({ productNo: US, cycleTimes: 1, assignIp: '198.51.100.200' });
      assert.equal(assigned.type, 1);
      await h.orders.start();
      await finalOrder(h, assigned.appOrderNo);
      const [inst] = await h.store.listInstances({ orderNo: assigned.orderNo! });
      assert.equal((inst?.raw as { extendIp?: string }).extendIp, '198.51.100.200');
      assert.equal((await h.orders.checkAssignIp('198.51.100.200')).canBuyStatus, false);
      await refuse(h.orders.assignIp({ productNo: US, cycleTimes: 1, assignIp: '198.51.100.200' }), 'IP_NOT_PURCHASABLE');
      await refuse(h.orders.getOrder('RNOSUCHORDER'), 'ORDER_NOT_FOUND');
      await refuse(h.orders.getInstance('NOSUCH'), 'INSTANCE_NOT_FOUND');
    } finally {
      await h.close();
    }
  });
});

test('nodeOf: protocol from the instance, nothing for stopped, expired or ssh-only instances', () => {
  const base = {
    instanceNo: 'I1',
    orderNo: 'O',
    productNo: 'P',
    status: 3,
    ip: '127.0.0.1',
    port: 1000,
    username: 'u',
    pwd: 'p',
    protocol: '1',
    userExpired: 2000,
    raw: {},
    updatedAt: 0,
  };
  assert.equal(nodeOf(base, 1_000_000)?.protocol, 'socks5');
  assert.equal(nodeOf({ ...base, protocol: '2' }, 1_000_000)?.protocol, 'http');
  assert.equal(nodeOf({ ...base, protocol: '2,1' }, 1_000_000)?.protocol, 'socks5');
  assert.equal(nodeOf({ ...base, protocol: '4' }, 1_000_000), undefined);
  assert.equal(nodeOf({ ...base, status: 6 }, 1_000_000), undefined);
  assert.equal(nodeOf(base, 2_000_000), undefined, 'expired');
  assert.deepEqual(nodeOf(base, 0), {
    id: 'socks5://u@127.0.0.1:1000',
    protocol: 'socks5',
    host: '127.0.0.1',
    port: 1000,
    username: 'u',
    password: 'p',
    source: 'instance',
    expiresAt: 2_000_000,
  });
});

test('an order of 120 instances is read page by page (pageSize 100)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'rotor-pages-'));
  const sim = await startSimulator({ orderDelayMs: 60_000, upstreams: false });
  const h = await harness(sim, join(dir, 'p.db'));
  try {
    await h.orders.start();
    const placed = await h.orders.open({
      params: [
        { productNo: US, count: 60 },
        { productNo: US, count: 60 },
      ],
    });
    assert.equal(placed.count, 120);
    // Not final yet: only GetOrder's pages can have brought the instances in.
    const pending = await h.orders.tracker.refreshOrder(placed.orderNo!);
    assert.ok(pending && pending.status < 3);
    assert.equal((await h.store.listInstances({ orderNo: placed.orderNo! })).length, 120);
    sim.faults.advanceClock(60_000);
    assert.equal((await finalOrder(h, placed.appOrderNo)).status, 3);
    await h.orders.tracker.idle();
    const stored = await h.store.listInstances({ orderNo: placed.orderNo! });
    assert.equal(stored.length, 120);
    assert.ok(stored.every((i) => i.status === 3 && i.pwd));
    assert.equal((await h.orders.getOrder(placed.orderNo!)).instances?.length, 120);
  } finally {
    await h.close();
    await sim.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

// SQLite only (also under ROTOR_TEST_STORE=redis): the killed child and the restarted Orders share the file.
describe('SIGKILL while an order is in flight', () => {
  test('a restarted Orders finishes the order without placing it again', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rotor-kill-'));
    const sim = await startSimulator({ orderDelayMs: 100, callbackBackoffMs: 20, upstreams: false });
    const path = join(dir, 'kill.db');
    try {
      sim.faults.latency(1200);
      const { spawn } = await import('node:child_process');
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', join(import.meta.dirname, 'fixtures', 'place-order.ts'), sim.baseUrl, sim.appKey, sim.appSecret, path, SG],
        {
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      );
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      const exited = new Promise<NodeJS.Signals | null>((r) => child.on('exit', (_code, signal) => r(signal)));
      // Watch the journal from another connection (WAL allows it) until the order is on the wire.
      const { SqliteStore } = await import('../../src/store/index.ts');
      const sent = await waitFor(
        async () => {
          try {
            const s = new SqliteStore(path);
            const list = await s.listJournal(['sent']);
            await s.close();
            return list[0];
          } catch {
            return undefined;
          }
        },
        10_000,
        'the order to be sent',
      );
      // And until the platform holds that request (its latency knob), so the kill lands while it is in flight.
      await waitFor(() => sim.inspect.heldByLatency() > 0, 10_000, 'the platform to hold the order request');
      child.kill('SIGKILL');
      assert.equal(await exited, 'SIGKILL');
      assert.equal(out.includes('answered'), false, 'killed before learning the result');
      sim.faults.latency(0);

      const h = await harness(sim, path, { sqlite: true });
      try {
        await h.orders.start();
        const o = await finalOrder(h, sent.merchantNo);
        assert.equal(o.status, 3);
        // The killed process's request is still held by the platform's latency; let it land too.
        await waitFor(() => sim.inspect.heldByLatency() === 0, 10_000, "the killed process's request to land");
        assert.equal(sim.inspect.charges(sent.merchantNo).length, 1);
        assert.equal(sim.inspect.orders().filter((x) => x.appOrderNo === sent.merchantNo).length, 1);
        const j = await h.store.getJournal(sent.merchantNo);
        assert.equal(j?.reqId, sent.reqId, 'resent with the same reqId');
        assert.equal(j?.state, 'accepted');
      } finally {
        await h.close();
      }
    } finally {
      await sim.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
