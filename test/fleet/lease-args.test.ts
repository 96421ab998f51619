// What a fleet daemon's start writes to Redis per lease: ioredis builds and writes every argument of a command
// on the event loop, and a start at 100,000 users takes 100,000 leases (500 script calls of 200 users). A
// sync's per-user fields travel as one JSON argument per call (the user's three keys stay keys): a relay
// counts the RESP lines the daemon sends while 600 users give their leases back (the stop: one sync each);
// the leases, the usage reported and the leases given back are what they were.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Accounting, type AccountingUser } from '../../src/accounting/accounting.ts';
import { AllowanceLeaser } from '../../src/fleet/allowance.ts';
import { RedisAllowance } from '../../src/store/redis-fleet-allowance.ts';
import { openRedisStore } from '../../src/store/index.ts';
import { CountingRelay, redisMissing, RedisServer } from './redis-server.ts';

const MiB = 1024 * 1024;
const T = Date.UTC(2026, 10, 15, 12, 0, 0);
const server = new RedisServer();
let relay: CountingRelay;

before(async () => {
  if (redisMissing) return;
  await server.start();
  relay = await new CountingRelay(server.port).start();
});
after(async () => {
  if (redisMissing) return;
  await relay.close();
  await server.stop();
});

test('600 users give their leases back with about 3 arguments each (their keys), not 11', { skip: redisMissing }, async () => {
  const prefix = `leaseargs${process.pid}:`;
  const store = await openRedisStore(relay.url, { prefix, commandTimeoutMs: 10_000 });
  const leaser = new AllowanceLeaser(new RedisAllowance(store.connection, prefix), {
    instance: 'A',
    sliceBytes: 4 * MiB,
    syncEveryMs: 600_000,
    now: () => T,
  });
  const accounting = new Accounting({ store, allowance: leaser, flushIntervalMs: 600_000, now: () => T });
  try {
    await accounting.start([]);
    const users: AccountingUser[] = Array.from({ length: 600 }, (_, i) => ({ name: `a${i}`, limitBytes: (i % 2 === 0 ? 3 : 100) * MiB }));
    await accounting.upsertUsers(users);
    // The leases themselves: a slice each, cut to what the limit leaves.
    for (const u of users) assert.equal(leaser.user(u.name).held, Math.min(4 * MiB, u.limitBytes), `${u.name}'s lease`);
    for (const u of users.slice(0, 10)) accounting.meter(u.name).add(1000, 0);
    await accounting.flush();
    // The stop: one sync per user (its spending reported, its lease given back), nothing else sent.
    relay.requestLines = 0;
    relay.counting = true;
    await leaser.close();
    relay.counting = false;
    // Two lines per argument. Before: 3 keys and 8 fields per user, 22 lines; now 3 keys and a share of one
    // JSON argument per call.
    const perUser = relay.requestLines / 2 / users.length;
    assert.ok(perUser <= 4, `${perUser.toFixed(2)} arguments per user's sync`);
    const rows = new Map((await store.getUsages(users.map((u) => u.name))).map((r) => [r.user, r.usedBytes]));
    for (const u of users) assert.equal(rows.get(u.name), users.indexOf(u) < 10 ? 1000 : 0, `${u.name}'s usage reported`);
    assert.deepEqual(await store.connection.client.keys(`${prefix}allow:*`), [], 'every lease given back');
  } finally {
    relay.counting = false;
    await accounting.close();
    await leaser.close();
    await store.close();
  }
});
