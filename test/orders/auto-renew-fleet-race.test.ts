// Two daemons on one store both run the expiry watch (every daemon's tracker runs checkExpiry; no lease). When
// their checks meet, daemon B can find A's renewal intent journaled and unsettled and send it again; the platform
// answers a renew number it has already taken with 10013 ("the same merchant order cannot be renewed twice", seed
// part 7). B's send is a resend: it asks for the order by its number before counting the refusal, and never
// writes over A's 'accepted'; otherwise the next check, which retries a refused renewal under the next number,
// renews again and the merchant pays twice.
// Real sandbox over HTTP, real placers and trackers of two Orders on one store. The interleaving is held in place
// by waits around the real store calls (A's addIntent after B's watch read the journal; B's place read after it);
// the sandbox repeats a number's first answer instead of 10013, so B's client answers that one call as the
// seed's platform does, once the platform holds A's renewal and A has settled it.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SIM_PRODUCTS, startSimulator, type Simulator } from '../../src/sim/index.ts';
import { PlatformError } from '../../src/platform/errors.ts';
import { derivedMerchantNo } from '../../src/orders/numbers.ts';
import { finalOrder, harness } from './helpers.ts';
import { poll } from '../support/wait.ts';

let sim: Simulator;
let dir: string;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'rotor-renew-race-'));
  sim = await startSimulator({ orderDelayMs: 100, callbackBackoffMs: 20 });
});
after(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

test('two daemons whose expiry checks meet renew an instance once, not twice', async () => {
  const tracking = { expiryWarnHours: 30, autoRenew: { enabled: true, hoursBefore: 25 } };
  const a = await harness(sim, join(dir, 'o.db'), { tracking });
  const b = await harness(sim, join(dir, 'o.db'), { tracking, listen: false });
  try {
    await a.orders.start();
    await b.orders.start();
    const opened = await a.orders.open({ productNo: SIM_PRODUCTS.staticSgDay, count: 1 });
    await finalOrder(a, opened.appOrderNo);
    const [inst] = await a.store.listInstances({ orderNo: opened.orderNo! });
    const n0 = derivedMerchantNo('RA', `${inst!.instanceNo}:${inst!.userExpired}`);
    const renewals = () => sim.inspect.orders().filter((o) => o.kind === 'renew' && o.instances.includes(inst!.instanceNo));

    let bWatchRead!: () => void;
    const bRead = new Promise<void>((r) => (bWatchRead = r));
    let aAddedDone!: () => void;
    const aAdded = new Promise<void>((r) => (aAddedDone = r));
    const realAdd = a.store.addIntent.bind(a.store);
    a.store.addIntent = async (e) => {
      if (e.merchantNo !== n0) return realAdd(e);
      await bRead; // B's watch has looked at the journal (nothing there yet)
      const r = await realAdd(e);
      aAddedDone();
      return r;
    };
    const realGet = b.store.getJournal.bind(b.store);
    let bReads = 0;
    b.store.getJournal = async (no) => {
      if (no !== n0) return realGet(no);
      if (++bReads === 1) {
        const r = await realGet(no);
        bWatchRead();
        return r;
      }
      await aAdded; // B's placer reads after A's intent is written
      return realGet(no);
    };
    const realCall = b.client.call.bind(b.client);
    (b.client as { call: unknown }).call = async (op: string, params: { appOrderNo?: string }, options?: unknown) => {
      if (op === 'InstanceRenew' && params.appOrderNo === n0) {
        await poll(async () => (a.logs.some((l) => l.includes('auto-renew placed')) ? true : undefined), {
          what: "A's renewal placed and settled",
          timeoutMs: 10_000,
        });
        throw new PlatformError({
          operation: op,
          reqId: 'r',
          platformCode: 10013,
          platformMsg: 'the same merchant order cannot be renewed twice',
        });
      }
      return realCall(op as never, params as never, options as never);
    };

    await Promise.all([a.orders.tracker.checkExpiry(), b.orders.tracker.checkExpiry()]);
    const after0 = (await a.store.getJournal(n0))?.state;
    await a.orders.tracker.checkExpiry(); // the next check
    const placed = renewals().length;
    assert.ok(placed === 1, `renewals placed: ${placed}; the first one's journal entry after the two checks: ${after0}`);
  } finally {
    await b.close();
    await a.close();
  }
});
