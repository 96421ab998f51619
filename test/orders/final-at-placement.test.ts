// `order.final` for an order whose placement answer is already final: a change order whose reply was lost is
// resent with the same number after the platform finished it, and the platform answers with the order's
// current state (seed: "a duplicate change order number returns the existing change order state"). The
// tracker follows only unfinished orders, so before this the event never came. Real sandbox over HTTP, real
// store and outbox; callbacks and the tracker's sweeps are off so only the resend can learn the outcome.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SIM_PRODUCTS, startSimulator, type Simulator } from '../../src/sim/index.ts';
import { Events, orderFinalWriter } from '../../src/events/index.ts';
import { OrderError } from '../../src/orders/index.ts';
import type { OrderRecord } from '../../src/store/index.ts';
import { finalOrder, harness, waitFor } from './helpers.ts';

let sim: Simulator;
let dir: string;
before(async () => {
  sim = await startSimulator({ orderDelayMs: 100, callbackBackoffMs: 20 });
  dir = mkdtempSync(join(tmpdir(), 'rotor-final-at-placement-'));
});
after(async () => {
  await sim.close();
  rmSync(dir, { recursive: true, force: true });
});

test('a resent change order that is already final when answered emits order.final once', async () => {
  let emit: ((o: OrderRecord) => Promise<void>) | undefined;
  const h = await harness(sim, join(dir, 'o.db'), {
    retries: 0,
    listen: false,
    tracking: { sweepMs: 600_000, pollInitialMs: 40, pollMaxMs: 200 },
    storeFinalOrder: (o) => emit!(o),
  });
  try {
    const events = new Events({ store: h.store, deliver: false });
    emit = orderFinalWriter(events, h.store);
    const finals = async (no: string) =>
      (await h.store.listEvents()).filter((e) => e.type === 'order.final' && (e.data as { appOrderNo: string }).appOrderNo === no);
    await h.orders.start();
    const opened = await h.orders.open({ productNo: SIM_PRODUCTS.staticUsSocks, count: 1 });
    await finalOrder(h, opened.appOrderNo);
    assert.equal((await finals(opened.appOrderNo)).length, 1, 'the tracker announced the open order');
    const [inst] = await h.store.listInstances({ orderNo: opened.orderNo! });
    assert.ok(inst);

    sim.faults.dropNext(1, 'ChangeProxy');
    let no = '';
    await assert.rejects(h.orders.change(inst.instanceNo, { reason: 'slow' }), (e: unknown) => {
      assert.ok(e instanceof OrderError && e.code === 'ORDER_OUTCOME_UNKNOWN', String(e));
      no = e.merchantNo!;
      return true;
    });
    await waitFor(
      () => (sim.inspect.orders().find((o) => o.appOrderNo === no)?.status === 3 ? true : undefined),
      5000,
      'the platform to finish the change',
    );
    const report = await h.orders.resumeIntents();
    assert.deepEqual(report.accepted, [no]);
    const stored = await h.store.getOrder(no);
    assert.equal(stored?.status, 3, 'final when placed');
    const listed = await finals(no);
    assert.equal(listed.length, 1, 'order.final for the order final at placement');
    assert.equal((listed[0]!.data as { status: number; type: number }).status, 3);
    assert.equal((listed[0]!.data as { status: number; type: number }).type, 5);
    // Resuming again (nothing left) and reading the order again announce nothing more.
    await h.orders.resumeIntents();
    await h.orders.getOrder(no);
    assert.equal((await finals(no)).length, 1);
  } finally {
    await h.close();
  }
});
