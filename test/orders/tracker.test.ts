// The tracker's polling schedule under an injected clock: capped exponential backoff while the order is
// pending, nothing left scheduled once it is final or the tracker stops.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PlatformClient } from '../../src/platform/client.ts';
import { openTestStore } from '../support/store.ts';
import { Orders, type OrdersClock } from '../../src/orders/index.ts';
import { SIM_PRODUCTS, startSimulator } from '../../src/sim/index.ts';

function manualClock() {
  let now = 1_000_000;
  const tasks = new Map<number, { at: number; ms: number; fn: () => void }>();
  let id = 0;
  const clock: OrdersClock = {
    now: () => now,
    schedule(ms, fn) {
      const key = ++id;
      tasks.set(key, { at: now + ms, ms, fn });
      return () => tasks.delete(key);
    },
  };
  return {
    clock,
    tasks,
    /** Runs the earliest task; returns its delay. */
    fireNext(): number {
      const [key, t] = [...tasks.entries()].sort((a, b) => a[1].at - b[1].at)[0]!;
      tasks.delete(key);
      now = t.at;
      t.fn();
      return t.ms;
    },
  };
}

test('polls with capped exponential backoff until final, then stops', async () => {
  const sim = await startSimulator({ orderDelayMs: 3_600_000, upstreams: false });
  const store = await openTestStore();
  const client = new PlatformClient({ baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret, retries: 0 });
  const m = manualClock();
  // Sweep and expiry timers far out so the poll timer is always the earliest.
  const orders = new Orders({
    client,
    store,
    clock: m.clock,
    tracking: { pollInitialMs: 100, pollFactor: 2, pollMaxMs: 500, sweepMs: 1e9, expiryCheckMs: 1e9 },
  });
  try {
    await orders.start();
    const placed = await orders.open({ productNo: SIM_PRODUCTS.staticSgDay, count: 1 });
    const delays: number[] = [];
    for (let i = 0; i < 5; i++) {
      delays.push(m.fireNext());
      await orders.tracker.idle();
    }
    assert.deepEqual(delays, [100, 200, 400, 500, 500]);
    assert.deepEqual(orders.tracker.following(), [placed.appOrderNo]);
    sim.faults.advanceClock(3_600_000);
    m.fireNext();
    await orders.tracker.idle();
    assert.equal((await store.getOrder(placed.appOrderNo))?.status, 3);
    assert.deepEqual(orders.tracker.following(), []);
    await orders.stop();
    assert.equal(m.tasks.size, 0, 'nothing left scheduled after stop');
  } finally {
    await orders.stop();
    client.close();
    await store.close();
    await sim.close();
  }
});
