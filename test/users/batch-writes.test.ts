// A batch of users costs the store two commits, not two per user (issue 24: 100,000 users imported in a
// minute): createBatch writes every row's intent in one transaction (SqliteStore.putUsers) and every row made
// ready in another, while each row still fails alone — a name that exists, a sub account the platform refuses
// (its intent removed) — and the users made are ready in the store and in memory, their generated passwords
// accepted. Real SQLite store (the calls are observed, then done); the platform side is the port's contract.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Accounting } from '../../src/accounting/accounting.ts';
import { PlatformError } from '../../src/platform/errors.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import { createBatch } from '../../src/users/bulk.ts';
import { Users } from '../../src/users/directory.ts';

test('a batch of 500 rows: two store transactions, per-row failures, every other user ready', async () => {
  const store = new SqliteStore(':memory:');
  const accounting = new Accounting({ store, flushIntervalMs: 3_600_000 });
  const made: string[] = [];
  const platform = {
    ensure: async (u: { name: string }) => {
      await new Promise((r) => setImmediate(r));
      if (u.name === 'b0007')
        throw new PlatformError({ operation: 'CreateProxyUser', reqId: undefined, platformCode: 10061, platformMsg: 'refused' });
      made.push(u.name);
    },
  };
  const changes: string[][] = [];
  const users = new Users({ store, accounting, platform, sweepMs: 3_600_000, onChange: (names) => changes.push([...names]) });
  try {
    await accounting.start([]);
    await users.start([]);
    await users.create({ name: 'b0003', mainAccount: 'm' } as never);
    const calls = { putUser: 0, putUsers: 0 };
    for (const op of ['putUser', 'putUsers'] as const) {
      const real = (store[op] as (...a: unknown[]) => unknown).bind(store);
      (store as unknown as Record<string, unknown>)[op] = (...args: unknown[]) => {
        calls[op]++;
        return real(...args);
      };
    }
    const rows = Array.from({ length: 500 }, (_, i) => ({ name: `b${String(i).padStart(4, '0')}`, mainAccount: 'm' }));
    const answer = await createBatch(users, rows, { concurrency: 16 });

    assert.deepEqual(
      answer.errors.map((e) => [e.index, e.name]),
      [
        [3, 'b0003'],
        [7, 'b0007'],
      ],
    );
    assert.equal(answer.errors[0]!.code, 'USER_EXISTS');
    assert.match(answer.errors[1]!.message, /refused/);
    assert.equal(answer.created, 498);
    assert.equal(Object.keys(answer.passwords).length, 498);
    assert.deepEqual(calls, { putUser: 0, putUsers: 2 }, 'one transaction for the intents, one for the records made ready');

    const stored = await store.listUsers();
    assert.equal(stored.length, 499, 'the refused row left nothing');
    assert.ok(
      stored.every((s) => s.state === 'ready'),
      'every record ready',
    );
    assert.equal(await store.getUser('b0007'), undefined);
    assert.equal(users.get('b0007'), undefined);
    const u = users.get('b0499');
    assert.ok(u, 'b0499 is served');
    assert.equal(await users.verify(u, answer.passwords.b0499!), true);
    assert.equal(await users.verify(u, 'not-the-password'), false);
    assert.equal(accounting.limitOf('b0499'), -1);
    assert.equal(made.length, 499, 'b0003 (made first) and the batch');
    // One change notice for the batch (the router's credential view rebuilt once, not 498 times).
    assert.equal(changes.at(-1)!.length, 498);
  } finally {
    await users.close();
    await accounting.close();
    await store.close();
  }
});
