// A restart with many stored users (issue 24): the users directory and accounting load them with one read of
// the stored usage, never one read or write per user, and every meter still starts at its stored figure
// (a lifetime quota, the current month's and the current day's rows). Real SQLite store; its reads and writes
// are observed (counted), then done.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Accounting } from '../../src/accounting/accounting.ts';
import { periodKey } from '../../src/accounting/period.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import { Users } from '../../src/users/directory.ts';
import { hashPasswordAsync } from '../../src/admission/password.ts';

test('2,000 stored users: the start reads the usage once for all, writes no limit, and each meter starts at its stored usage', async () => {
  const now = Date.parse('2026-11-24T10:00:00Z');
  const store = new SqliteStore(':memory:');
  const hash = await hashPasswordAsync('start-reads-password');
  const periods = ['total', 'month', 'day'] as const;
  const count = 2000;
  const usage: { user: string; bytes: number }[] = [];
  for (let i = 0; i < count; i++) {
    const name = `s${String(i).padStart(4, '0')}`;
    const period = periods[i % 3]!;
    await store.putUser({
      name,
      data: { name, mainAccount: 'm', product: 'DYN-105-FLOW', source: 'api', createdAt: now, quota: { bytes: 1_000_000, period } },
      passwordHash: hash,
      state: 'ready',
    });
    // As a previous run left it: the limit under the name, the usage under the period's key.
    await store.setLimit(name, 1_000_000);
    usage.push({ user: period === 'total' ? name : `${name}@${periodKey(period, 'UTC', now)}`, bytes: 1000 + i });
  }
  await store.addUsage(usage);

  const calls = { getUsage: 0, listUsage: 0, setLimit: 0 };
  for (const op of ['getUsage', 'listUsage', 'setLimit'] as const) {
    const real = (store[op] as (...a: unknown[]) => unknown).bind(store);
    (store as unknown as Record<string, unknown>)[op] = (...args: unknown[]) => {
      calls[op]++;
      return real(...args);
    };
  }
  const accounting = new Accounting({ store, flushIntervalMs: 3_600_000, now: () => now });
  const users = new Users({ store, accounting, platform: { ensure: async () => undefined }, sweepMs: 3_600_000, now: () => now });
  try {
    await accounting.start([]);
    await users.start([]);
    assert.equal(calls.getUsage, 0, 'no read per user');
    assert.equal(calls.listUsage, 1, "the stored usage is read once (accounting's start; the directory's users reuse it)");
    assert.equal(calls.setLimit, 0, 'no limit written again');
    for (const i of [0, 1, 2, 1000, 1999]) {
      const name = `s${String(i).padStart(4, '0')}`;
      assert.equal(accounting.usedOf(name), 1000 + i, name);
      assert.equal(accounting.limitOf(name), 1_000_000, name);
    }
    assert.equal(accounting.periodKeyOf('s0002'), 'day:2026-11-24');
  } finally {
    await users.close();
    await accounting.close();
    await store.close();
  }
});
