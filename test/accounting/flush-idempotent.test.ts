// A quota meter's flush is one store write (addUsage). A write can land and still be seen failing: a Redis reply
// lost past the command timeout, a restart between the script and its answer. Written again, it must not count
// its bytes twice (a customer's quota would read high by one flush interval). Each flush carries an id the store
// takes with the increments (SQLite: migration 71 in the same transaction; Redis: one script), and a failed flush
// is written again as it was, before anything newer. Against the test store (SQLite, or Redis with
// ROTOR_TEST_STORE=redis: the suite runs this file on both), through the real Accounting, its addUsage failing as
// a timed-out store call fails, after the store took it or before.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Accounting } from '../../src/accounting/accounting.ts';
import type { Store } from '../../src/store/index.ts';
import { StoreUnavailableError } from '../../src/store/errors.ts';
import { openTestStore } from '../support/store.ts';
import { captureLogger } from '../support/logger.ts';

let store: Store;
before(async () => {
  store = await openTestStore();
});
after(async () => {
  await store?.close();
});

/** The store whose next `failures` addUsage calls throw as a timed-out call does; `landing`: after writing. */
function flaky(
  inner: Store,
  seen?: (...args: Parameters<Store['addUsage']>) => void,
): { store: Store; fail(n: number, landing: boolean): void; calls: () => number } {
  let failures = 0;
  let lands = false;
  let calls = 0;
  const wrapped = new Proxy(inner, {
    get(t, p) {
      if (p === 'addUsage')
        return async (...args: Parameters<Store['addUsage']>) => {
          calls++;
          seen?.(...args);
          if (failures > 0) {
            failures--;
            if (lands) await t.addUsage(...args);
            throw new StoreUnavailableError('usage: Command timed out');
          }
          return t.addUsage(...args);
        };
      const v = Reflect.get(t, p, t) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
  return {
    store: wrapped,
    fail: (n, landing) => {
      failures = n;
      lands = landing;
    },
    calls: () => calls,
  };
}

/** What a restart reads: the stored row's usedBytes, through a fresh Accounting on the same store. */
async function storedAfterRestart(name: string): Promise<number | undefined> {
  const next = new Accounting({ store, flushIntervalMs: 3_600_000 });
  await next.start([{ name, limitBytes: 1_000_000_000 }]);
  const used = next.get(name)?.usedBytes;
  await next.close();
  return used;
}

for (const landing of [true, false]) {
  test(`a flush whose write ${landing ? 'landed but was' : 'was'} seen failing is counted once`, async () => {
    const name = `payer_${landing ? 'landed' : 'lost'}`;
    const f = flaky(store);
    const accounting = new Accounting({ store: f.store, flushIntervalMs: 3_600_000 });
    await accounting.start([{ name, limitBytes: 1_000_000_000 }]);
    const meter = accounting.meter(name);
    meter.add(300_000, 3_400_000);
    f.fail(1, landing);
    await accounting.flush(); // fails (after landing, or not at all)
    meter.add(5, 300);
    await accounting.flush(); // the failed flush again, as it was, then the new bytes
    meter.add(1_000, 0);
    await accounting.close();
    assert.equal(f.calls(), 4, `addUsage calls: ${f.calls()}`);
    const row = await store.getUsage(name);
    assert.equal(row?.usedBytes, 3_701_305, `stored usedBytes ${row?.usedBytes} for 3,701,305 B metered`);
    assert.equal(await storedAfterRestart(name), 3_701_305);
  });
}

test('a flush that fails again and again is written once, before anything newer, with its own id', async () => {
  const name = 'payer_retried';
  const ids: string[] = [];
  const f = flaky(store, (deltas, id) => ids.push(`${id}:${deltas.map((d) => d.bytes).join('+')}`));
  let n = 0;
  const accounting = new Accounting({ store: f.store, flushIntervalMs: 3_600_000, batchIds: () => `test-retried-${++n}` });
  await accounting.start([{ name, limitBytes: 1_000_000_000 }]);
  const meter = accounting.meter(name);
  meter.add(0, 1_000);
  f.fail(3, true);
  await accounting.flush();
  meter.add(0, 20);
  await accounting.flush();
  meter.add(0, 300);
  await accounting.flush();
  await accounting.flush(); // the 4th try of the first flush succeeds; the 20 + 300 B follow in one new write
  await accounting.close();
  assert.deepEqual(ids, ['test-retried-1:1000', 'test-retried-1:1000', 'test-retried-1:1000', 'test-retried-1:1000', 'test-retried-2:320']);
  assert.equal((await store.getUsage(name))?.usedBytes, 1_320);
});

test('a day quota whose flush failed across midnight: each day row holds its own bytes once', async () => {
  const name = 'payer_daily';
  const f = flaky(store);
  let now = Date.UTC(2026, 10, 29, 23, 59, 0);
  const accounting = new Accounting({ store: f.store, flushIntervalMs: 3_600_000, now: () => now });
  await accounting.start([{ name, limitBytes: 1_000_000_000, period: 'day' }]);
  const meter = accounting.meter(name);
  meter.add(0, 70_000);
  f.fail(1, true);
  await accounting.flush();
  now = Date.UTC(2026, 10, 30, 0, 0, 30);
  assert.equal(accounting.admit(name).ok, true);
  meter.add(0, 800);
  await accounting.flush();
  await accounting.close();
  assert.equal((await store.getUsage(`${name}@day:2026-11-29`))?.usedBytes, 70_000);
  assert.equal((await store.getUsage(`${name}@day:2026-11-30`))?.usedBytes, 800);
});

test('a stop that cannot write a kept flush logs its bytes by user', async () => {
  const name = 'payer_stop';
  const f = flaky(store);
  const { logger, text } = captureLogger('info');
  const accounting = new Accounting({ store: f.store, flushIntervalMs: 3_600_000, logger });
  await accounting.start([{ name, limitBytes: 1_000_000_000 }]);
  accounting.meter(name).add(0, 4_000);
  f.fail(1, false);
  await accounting.flush();
  accounting.meter(name).add(0, 50);
  f.fail(Infinity, false);
  await accounting.close();
  const line = text()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { msg: string; bytes?: number; byUser?: { user: string; bytes: number }[] })
    .find((l) => l.msg.startsWith('traffic counters not written at stop'));
  assert.ok(line, text());
  assert.equal(line.bytes, 4_050);
  assert.deepEqual(line.byUser, [{ user: name, bytes: 4_050 }]);
});

test('a flush that landed, then a store outage of a day while another daemon flushes: written again, it is counted once', async () => {
  // The store's clock is injected: a day passes without a real wait. The ids of one hour kept before were trimmed by
  // the other writer's flushes meanwhile, and the flush written again counted twice (src/store/batch-marks.ts).
  let now = Date.UTC(2026, 10, 29, 10);
  const shared = await openTestStore(':memory:', { now: () => now });
  try {
    const f = flaky(shared);
    const a = new Accounting({ store: f.store, flushIntervalMs: 3_600_000, now: () => now });
    const b = new Accounting({ store: shared, flushIntervalMs: 3_600_000, now: () => now });
    await a.start([{ name: 'payer_outage', limitBytes: 1_000_000_000 }]);
    await b.start([{ name: 'payer_other', limitBytes: 1_000_000_000 }]);
    a.meter('payer_outage').add(0, 9_000_000);
    f.fail(Infinity, true);
    await a.flush(); // landed, seen failing
    for (let hour = 1; hour <= 24; hour++) {
      now += 3_600_000;
      await a.flush(); // the store still unreachable for this daemon
      b.meter('payer_other').add(0, 10);
      await b.flush();
    }
    f.fail(0, false);
    a.meter('payer_outage').add(0, 1);
    await a.flush(); // the kept flush, then the new byte
    await a.close();
    await b.close();
    assert.equal((await shared.getUsage('payer_outage'))?.usedBytes, 9_000_001);
    assert.equal((await shared.getUsage('payer_other'))?.usedBytes, 240);
  } finally {
    await shared.close();
  }
});
