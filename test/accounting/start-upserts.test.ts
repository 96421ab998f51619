// A start's stored users applied from the start's snapshot (Accounting.upsertUsers right after start) go
// through each user's period, row and limit without waiting on anything: no promise per step and user (at
// 100,000 users the suspended steps of each upsert were ~2 KB of garbage a user, a tenth of a fleet restart's
// allocation before ready). The users still start at their stored usage, in their stored periods, and a user
// whose row is not in the snapshot's answer is still read from the store.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHook } from 'node:async_hooks';
import { Accounting, type AccountingUser } from '../../src/accounting/accounting.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';

const COUNT = 1000;

test("1,000 stored users applied from the start's snapshot: two promises each, usage and periods as stored", async () => {
  const store = new SqliteStore(':memory:');
  const now = (): number => Date.UTC(2026, 10, 15, 12, 0, 0);
  const periods = ['total', 'day', 'month'] as const;
  const users: AccountingUser[] = Array.from({ length: COUNT }, (_, i) => ({
    name: `s${i}`,
    limitBytes: 10_000 + i,
    period: periods[i % 3],
  }));
  await store.setLimits(users.map((u) => ({ user: u.name, limitBytes: u.limitBytes })));
  const periodKey = (p: string): string => (p === 'day' ? 'day:2026-11-15' : 'month:2026-11');
  await store.addUsage(
    users.map((u, i) => ({ user: u.period === 'total' ? u.name : `${u.name}@${periodKey(u.period!)}`, bytes: 100 + i })),
  );
  const accounting = new Accounting({ store, flushIntervalMs: 3_600_000, now });
  let promises = 0;
  const hook = createHook({
    init(_id, type) {
      if (type === 'PROMISE') promises++;
    },
  });
  try {
    await accounting.start([]);
    hook.enable();
    await accounting.upsertUsers(users);
    hook.disable();
    // Its call and its await (2 a user); before: 7.3 a user (the stored row's read, the period, the roll, the load).
    assert.ok(promises <= 2.5 * COUNT, `${promises} promises for ${COUNT} users' upserts`);
    users.forEach((u, i) => {
      assert.equal(accounting.get(u.name)?.usedBytes, 100 + i, `${u.name}'s stored usage`);
      assert.equal(accounting.get(u.name)?.limitBytes, u.limitBytes);
      assert.equal(accounting.periodKeyOf(u.name), u.period === 'total' ? 'total' : periodKey(u.period!));
    });
    // A user new to the store after the start's read: read from the store (the snapshot does not answer).
    await store.addUsage([{ user: 'late@day:2026-11-15', bytes: 42 }]);
    await accounting.upsertUsers([{ name: 'late', limitBytes: 5000, period: 'day' }]);
    assert.equal(accounting.get('late')?.usedBytes, 42);
  } finally {
    hook.disable();
    await accounting.close();
    await store.close();
  }
});
