// orders.autoRenew renews a static instance `hoursBefore` its end with merchant numbers derived from the expiry
// (src/orders/expiry.ts). A renewal the platform refused (the merchant's balance short at that moment) is tried
// again at the next check, under the next derived number, and at most MAX_RENEW_ATTEMPTS times per expiry; one
// accepted renewal ends it. Real sandbox over HTTP, real placer and tracker (test/orders/helpers.ts).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SIM_PRODUCTS, startSimulator, type Simulator } from '../../src/sim/index.ts';
import { finalOrder, harness } from './helpers.ts';
import { MAX_RENEW_ATTEMPTS } from '../../src/orders/expiry.ts';

let sim: Simulator;
let dir: string;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'rotor-renew-retry-'));
  sim = await startSimulator({ orderDelayMs: 100, callbackBackoffMs: 20 });
});
after(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

test('an auto-renewal the platform refused (no funds) is tried again at the next check once funds are back', async () => {
  const h = await harness(sim, join(dir, 'o.db'), { tracking: { expiryWarnHours: 30, autoRenew: { enabled: true, hoursBefore: 25 } } });
  try {
    await h.orders.start();
    const opened = await h.orders.open({ productNo: SIM_PRODUCTS.staticSgDay, count: 1 });
    await finalOrder(h, opened.appOrderNo);
    const [inst] = await h.store.listInstances({ orderNo: opened.orderNo! });
    const renewals = () => sim.inspect.orders().filter((o) => o.kind === 'renew' && o.instances.includes(inst!.instanceNo));
    sim.faults.setMerchant({ coin: '0', credit: '0' }); // the merchant's balance runs dry
    await h.orders.tracker.checkExpiry(); // refused by the platform
    const refused = h.logs.filter((l) => l.includes('auto-renew failed')).length;
    sim.faults.setMerchant({ coin: '100000', credit: '0' }); // topped up
    await h.orders.tracker.checkExpiry();
    await h.orders.tracker.checkExpiry();
    assert.equal(renewals().length, 1, `after ${refused} refused renewal(s) and a top-up, ${renewals().length} renewal placed`);
  } finally {
    await h.close();
  }
});

test('renewals of one expiry refused every time stop after MAX_RENEW_ATTEMPTS, said once', async () => {
  const h = await harness(sim, join(dir, 'o2.db'), { tracking: { expiryWarnHours: 30, autoRenew: { enabled: true, hoursBefore: 25 } } });
  try {
    await h.orders.start();
    const opened = await h.orders.open({ productNo: SIM_PRODUCTS.staticSgDay, count: 1 });
    await finalOrder(h, opened.appOrderNo);
    const [inst] = await h.store.listInstances({ orderNo: opened.orderNo! });
    const refusedRenewals = () => h.logs.filter((l) => l.includes('auto-renew failed')).length;
    sim.faults.setMerchant({ coin: '0', credit: '0' });
    for (let i = 0; i < MAX_RENEW_ATTEMPTS + 3; i++) await h.orders.tracker.checkExpiry();
    assert.equal(refusedRenewals(), MAX_RENEW_ATTEMPTS, `${refusedRenewals()} renewals refused for ${MAX_RENEW_ATTEMPTS + 3} checks`);
    assert.equal(h.logs.filter((l) => l.includes('auto-renew given up')).length, 1);
    sim.faults.setMerchant({ coin: '100000', credit: '0' });
    await h.orders.tracker.checkExpiry();
    const placed = sim.inspect.orders().filter((o) => o.kind === 'renew' && o.instances.includes(inst!.instanceNo));
    assert.equal(placed.length, 0, 'nothing placed once the attempts are spent');
  } finally {
    await h.close();
  }
});
