// The tracker stores what GetOrder answers only when it is about our order (src/orders/tracker.ts): the merchant
// number is the idempotency key, the platform number is the platform's. A platform that lost an order and gave
// its number to another answers for that other order: refused (logged), asked by our merchant number instead.
// A platform that no longer knows the order by either number: the journal entry becomes 'unknown' and is sent
// again with the same merchant number, and the order ends as what was asked for. Real sandboxes over HTTP
// (one "killed": never closed nor written, a second on its state file), real placer, tracker and store.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SIM_PRODUCTS, startSimulator, type Simulator } from '../../src/sim/index.ts';
import { orderSucceeded } from '../support/orders.ts';
import { finalOrder, harness, waitFor } from './helpers.ts';

const sims: Simulator[] = [];
let dir: string;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'rotor-foreign-order-'));
});
after(async () => {
  for (const s of sims) await s.close();
  rmSync(dir, { recursive: true, force: true });
});

async function sandbox(options: { stateFile?: string } = {}): Promise<Simulator> {
  const sim = await startSimulator({
    orderDelayMs: 60,
    callbackBackoffMs: 20,
    ...(options.stateFile ? { stateFile: options.stateFile, statePersist: { intervalMs: 3_600_000 } } : {}),
  });
  sims.push(sim);
  return sim;
}

test("an answer for another order under our order's platform number is not stored; the order is read by its merchant number", async () => {
  const sim = await sandbox();
  const h = await harness(sim, join(dir, 'a.db'), { listen: false, tracking: { sweepMs: 600_000 } });
  try {
    await h.orders.start();
    const ours = await h.orders.open({ productNo: SIM_PRODUCTS.staticUsSocks, count: 1 });
    const done = await finalOrder(h, ours.appOrderNo);
    // Another order on the platform (another product, another price) ...
    const other = await h.client.call('InstanceOpen', {
      appOrderNo: 'someone-else-1',
      params: [{ productNo: SIM_PRODUCTS.staticDeYear, count: 1 }],
    });
    await orderSucceeded(h.client, other.orderNo);
    // The tracker's own reads of our order done (a read still in flight would be joined by the refresh below and
    // answer from before the record was changed).
    await h.orders.tracker.idle();
    // ... whose number our record now carries, as after a platform that lost our order and reused its number.
    await h.store.putOrder({ ...done, orderNo: other.orderNo, status: 1 });
    const read = await h.orders.tracker.refreshOrder(ours.appOrderNo);
    const stored = (await h.store.getOrder(ours.appOrderNo))!;
    const story = `read ${JSON.stringify(read)}; stored ${JSON.stringify(stored)}; the other order ${other.orderNo} ${other.amount}`;
    assert.equal(stored.orderNo, ours.orderNo, story);
    assert.equal(stored.amount, done.amount, story);
    assert.equal(stored.status, 3, story);
    const instances = await h.store.listInstances({ orderNo: other.orderNo });
    assert.deepEqual(instances, [], `none of the other order's instances stored: ${story}`);
    assert.ok(
      h.logs.some((l) => l.includes('the platform answered for another order')),
      'said so in the log',
    );
  } finally {
    await h.close();
  }
});

test('an accepted order the platform no longer knows (killed before saving it) is sent again with its merchant number', async () => {
  const stateFile = join(dir, 'lost.sandbox.json');
  const killed = await sandbox({ stateFile });
  const db = join(dir, 'b.db');
  let h = await harness(killed, db, { listen: false, tracking: { sweepMs: 600_000 } });
  const ours = await h.orders.open({ productNo: SIM_PRODUCTS.staticUsSocks, count: 1 });
  const amount = ours.amount;
  await h.close(); // Rotor stops; the sandbox "dies" without writing its state (it is never closed here)

  const next = await sandbox({ stateFile });
  h = await harness(next, db, { listen: false, tracking: { sweepMs: 600_000 } });
  try {
    // Its own order first: numbers are never handed out twice, so none of them is ours.
    await h.client.call('InstanceOpen', { appOrderNo: 'someone-else-2', params: [{ productNo: SIM_PRODUCTS.staticDeYear, count: 1 }] });
    await h.orders.start();
    const again = await waitFor(
      async () => {
        const o = await h.store.getOrder(ours.appOrderNo);
        return o && o.orderNo && o.orderNo !== ours.orderNo && o.status === 3 ? o : undefined;
      },
      30_000,
      'the order sent again and final',
    );
    const story = `before ${JSON.stringify(ours)}, now ${JSON.stringify(again)}`;
    assert.equal(again.amount, amount, story);
    const [inst] = await h.store.listInstances({ orderNo: again.orderNo! });
    assert.equal(inst?.productNo, SIM_PRODUCTS.staticUsSocks, story);
    assert.equal(next.inspect.orders().filter((o) => o.appOrderNo === ours.appOrderNo).length, 1, 'placed once on the new platform');
    assert.equal((await h.store.getJournal(ours.appOrderNo))?.state, 'accepted');
    assert.ok(
      h.logs.some((l) => l.includes('it is sent again with its merchant number')),
      story,
    );
  } finally {
    await h.close();
  }
});
