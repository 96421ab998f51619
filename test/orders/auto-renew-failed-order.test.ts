// An auto-renewal the platform accepted whose order then ends failed (order status 4, a state the seed allows:
// "all failed", the line refunded) counts like a refusal: the expiry watch places the next derived number at its
// next check (src/orders/expiry.ts renewalNumber), so the instance does not lapse with auto-renew on.
// Real sandbox over HTTP (orderOutcome 'fail' once), real placer and tracker.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SIM_PRODUCTS, startSimulator, type Simulator } from '../../src/sim/index.ts';
import { finalOrder, harness, waitFor } from './helpers.ts';

let sim: Simulator;
let dir: string;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'rotor-renew-failed-'));
  sim = await startSimulator({ orderDelayMs: 100, callbackBackoffMs: 20 });
});
after(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

test('an auto-renewal accepted by the platform whose order ends failed (status 4) is placed again for that expiry', async () => {
  const h = await harness(sim, join(dir, 'o.db'), { tracking: { expiryWarnHours: 30, autoRenew: { enabled: true, hoursBefore: 25 } } });
  try {
    await h.orders.start();
    const opened = await h.orders.open({ productNo: SIM_PRODUCTS.staticSgDay, count: 1 });
    await finalOrder(h, opened.appOrderNo);
    const [inst] = await h.store.listInstances({ orderNo: opened.orderNo! });
    const expiresBefore = inst!.userExpired;
    const renewals = () => sim.inspect.orders().filter((o) => o.kind === 'renew' && o.instances.includes(inst!.instanceNo));
    sim.faults.orderOutcome('fail', 1); // the platform takes the renewal, then it fails (refunded)
    await h.orders.tracker.checkExpiry();
    assert.equal(renewals().length, 1, 'the first renewal was placed');
    const first = renewals()[0]!;
    // wait until Rotor's own record of the renewal is final
    const journal = await h.store.listJournal(['accepted']);
    const renewEntry = journal.find((e) => e.operation === 'InstanceRenew');
    assert.ok(renewEntry, 'renewal journaled accepted');
    const done = await finalOrder(h, renewEntry.merchantNo);
    for (let i = 0; i < 3; i++) await h.orders.tracker.checkExpiry();
    const after = (await h.store.getInstance(inst!.instanceNo))!;
    const story =
      `renewal ${first.orderNo} ended with order status ${done.status} (platform: ${first.status}); ` +
      `after 3 more checks ${renewals().length} renewal(s) placed in all; the instance's userExpired ${expiresBefore} -> ${after.userExpired}`;
    assert.equal(done.status, 4, story);
    assert.equal(renewals().length, 2, story);
    assert.ok(
      h.logs.some((l) => l.includes('auto-renew order failed; placing another')),
      'the failed renewal is logged',
    );
    // the second renewal succeeds and moves the expiry; nothing more is placed for the old one
    const second = (await h.store.listJournal(['accepted'])).filter(
      (e) => e.operation === 'InstanceRenew' && e.merchantNo !== renewEntry.merchantNo,
    );
    assert.equal(second.length, 1, story);
    assert.equal((await finalOrder(h, second[0]!.merchantNo)).status, 3);
    const renewed = await waitFor(
      async () => {
        const i = await h.store.getInstance(inst!.instanceNo);
        return i && (i.userExpired ?? 0) > (expiresBefore ?? 0) ? i : undefined;
      },
      30_000,
      'the renewed expiry',
    );
    assert.ok(renewed.userExpired! > expiresBefore!);
  } finally {
    await h.close();
  }
});
