// A user's live limiter (rate, connection cap, running relays: src/admission/limiter.ts) is made on the user's
// first admission, not for every stored user at start: 100,000 users of whom a few connect hold a few
// limiters (issue 24, idle RSS). The first connection is limited exactly as before: its cap and rate are the
// record's, a change to the record reaches a limiter made earlier, and one made later starts from it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Accounting } from '../../src/accounting/accounting.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import { UserGate } from '../../src/admission/users.ts';
import { Users } from '../../src/users/directory.ts';
import { hashPasswordAsync } from '../../src/admission/password.ts';

test('stored users hold no limiter until admitted; the first admission is capped and rated by the record', async () => {
  const store = new SqliteStore(':memory:');
  const hash = await hashPasswordAsync('lazy-limiters-password');
  for (let i = 0; i < 50; i++) {
    const name = `u${i}`;
    await store.putUser({
      name,
      data: {
        name,
        mainAccount: 'm',
        product: 'DYN-105-FLOW',
        source: 'api',
        createdAt: Date.now(),
        quota: { bytes: -1, period: 'total' },
        maxConnections: 1,
        rateBytesPerSec: 20_000,
      },
      passwordHash: hash,
      state: 'ready',
    });
  }
  const accounting = new Accounting({ store, flushIntervalMs: 3_600_000 });
  const users = new Users({ store, accounting, platform: { ensure: async () => undefined }, sweepMs: 3_600_000 });
  const gate = new UserGate(users.table, accounting);
  try {
    await accounting.start([]);
    await users.start([]);
    assert.equal(users.size, 50);
    assert.equal(users.limitersHeld, 0, 'no limiter made at start');
    // A change to a user that never connected makes none either.
    await users.patch('u1', { rateBytesPerSec: 30_000 });
    assert.equal(users.limitersHeld, 0, 'a patch makes no limiter');

    // The first admission: capped at the record's maxConnections, at the record's rate.
    assert.deepEqual(gate.admit('u0'), { ok: true });
    assert.equal(users.limitersHeld, 1);
    const second = gate.admit('u0');
    assert.equal(second.ok, false, 'the second concurrent connection of a maxConnections 1 user is refused');
    assert.equal(gate.limiter('u0')?.rateBytesPerSec, 20_000);
    // A limiter made after a change starts from the changed record.
    assert.deepEqual(gate.admit('u1'), { ok: true });
    assert.equal(gate.limiter('u1')?.rateBytesPerSec, 30_000);
    // A change reaches a limiter already made.
    await users.patch('u0', { rateBytesPerSec: 40_000, maxConnections: 0 });
    assert.equal(gate.limiter('u0')?.rateBytesPerSec, 40_000);
    assert.deepEqual(gate.admit('u0'), { ok: true }, 'the cap lifted');
    // An unknown name gets none.
    assert.equal(gate.limiter('nobody'), undefined);
    assert.equal(users.limitersHeld, 2);
  } finally {
    await users.close();
    await accounting.close();
    await store.close();
  }
});
