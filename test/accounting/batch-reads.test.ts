// A batch of users applied at once (an import, a start without the start's snapshot) reads its stored rows in
// one read; when that read fails (a command timed out on a loaded Redis) the batch is not failed for it: each
// user's rows are read on their own, and every user starts at its stored usage.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Accounting } from '../../src/accounting/accounting.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import { StoreUnavailableError } from '../../src/store/errors.ts';

test('a failed read of a batch of rows falls back to reading each user, and nothing is lost', async () => {
  const store = new SqliteStore(':memory:');
  const now = (): number => Date.UTC(2026, 10, 15, 12, 0, 0);
  await store.addUsage([
    { user: 'ann', bytes: 500 },
    { user: 'bob@month:2026-11', bytes: 700 },
  ]);
  let failed = 0;
  const accounting = new Accounting({
    store: Object.assign(Object.create(store) as SqliteStore, {
      getUsages: async (): Promise<never> => {
        failed++;
        throw new StoreUnavailableError('usage of 3 users: redis unavailable: Command timed out');
      },
    }),
    flushIntervalMs: 3_600_000,
    now,
  });
  try {
    await accounting.upsertUsers([
      { name: 'ann', limitBytes: 1000 },
      { name: 'bob', limitBytes: 2000, period: 'month' },
      { name: 'cy', limitBytes: 3000, period: 'day' },
    ]);
    assert.equal(failed, 1, 'the batch read was tried');
    assert.deepEqual(
      ['ann', 'bob', 'cy'].map((u) => [accounting.get(u)?.usedBytes, accounting.get(u)?.limitBytes]),
      [
        [500, 1000],
        [700, 2000],
        [0, 3000],
      ],
    );
    assert.equal((await store.getUsage('cy'))?.limitBytes, 3000, 'the limits written');
  } finally {
    await accounting.close();
    await store.close();
  }
});
