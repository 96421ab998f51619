// A fleet daemon's start at a reseller's size, against a real redis-server: every user's lease is a script
// call, so what a start sends per user and how many calls it has in flight decide whether 100,000 users
// start in seconds, in minutes, or with users served offline because their calls timed out behind the others.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { Accounting, type AccountingUser } from '../../src/accounting/accounting.ts';
import { AllowanceLeaser, MAX_BATCHES_IN_FLIGHT, MAX_SYNCS_IN_FLIGHT, SYNC_BATCH } from '../../src/fleet/allowance.ts';
import { RedisAllowance } from '../../src/store/redis-fleet-allowance.ts';
import { openRedisStore } from '../../src/store/index.ts';
import { commandCalls, PacedRelay, redisMissing, redisForFile, connection } from './redis-server.ts';
import { createBatch } from '../../src/users/bulk.ts';
import { Users } from '../../src/users/directory.ts';

const MiB = 1024 * 1024;
// Mid-November 2026, UTC: the month and day periods do not roll during the test.
const T = Date.UTC(2026, 10, 15, 12, 0, 0);
const now = (): number => T;

let admin: Redis;
const server = redisForFile((a) => (admin = a));

/** Calls of each command since the last CONFIG RESETSTAT (INFO commandstats). */
const calls = (): Promise<Record<string, number>> => commandCalls(admin);

/**
 * Script calls that read rows (store/redis.ts HASHES, USAGE_PAGE, USER_PAGE: a page of up to 200 hashes per
 * call, an HGETALL or HMGET each), with room for each read's partial last page: a read per user would still
 * be far above it.
 */
function readPages(counted: Record<string, number>): number {
  return Math.ceil(((counted.hgetall ?? 0) + (counted.hmget ?? 0)) / 100);
}

async function daemon(prefix: string, instance: string, clock: () => number = now) {
  const store = await openRedisStore(server.url, { prefix, commandTimeoutMs: 10_000 });
  // No timer round during the test: the calls counted are the start's own.
  const leaser = new AllowanceLeaser(new RedisAllowance(store.connection, prefix), {
    instance,
    sliceBytes: 4 * MiB,
    now: clock,
    syncEveryMs: 600_000,
  });
  const accounting = new Accounting({ store, allowance: leaser, flushIntervalMs: 60_000, now: clock });
  await accounting.start([]);
  let closed = false;
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    await accounting.close();
    await leaser.close();
    await store.close();
  };
  return { store, leaser, accounting, close };
}

describe('a fleet daemon starting with many users', { skip: redisMissing }, () => {
  test('a restart takes one lease per user, writes no limit the store already holds, and keeps every usage', async () => {
    const prefix = `sas${process.pid}:`;
    const periods = ['total', 'month', 'day'] as const;
    const users: AccountingUser[] = [];
    for (let i = 0; i < 600; i++) users.push({ name: `c${i}`, limitBytes: (100 + i) * MiB, period: periods[i % 3] });

    const first = await daemon(prefix, 'A');
    await first.accounting.upsertUsers(users);
    for (let i = 0; i < users.length; i += 7) first.accounting.meter(`c${i}`).add(1000 + i, 0);
    const before = new Map(users.map((u) => [u.name, first.accounting.get(u.name)!.usedBytes]));
    await first.close();

    const second = await daemon(prefix, 'B');
    try {
      await admin.config('RESETSTAT');
      await second.accounting.upsertUsers(users);
      const counted = await calls();
      const scripts = (counted.evalsha ?? 0) + (counted.eval ?? 0);
      // The users' leases in batches of SYNC_BATCH per script call (before: one call per user, and earlier a
      // period user's roll took one, gave it back and took another: 3 per user).
      const batches = Math.ceil(users.length / SYNC_BATCH);
      assert.ok(scripts <= batches + 2, `${scripts} script calls for ${users.length} users (${batches} batches)`);
      // The limits are stored already (before: two MULTI/EXEC writes per period user at every start).
      assert.equal(counted.exec ?? 0, 0, 'no limit written again');
      for (const u of users) {
        assert.equal(second.accounting.get(u.name)!.usedBytes, before.get(u.name), `${u.name}'s usage after the restart`);
        const row = second.accounting.get(u.name)!;
        assert.equal(row.limitBytes, u.limitBytes);
      }
      // A round after the start: every user holds a full slice and is idle, and a period user's share under its
      // bare name (made with its meter, never leased) has nothing to sync: the heartbeat only (before: 400 calls).
      await admin.config('RESETSTAT');
      await second.leaser.syncAll();
      const round = await calls();
      assert.equal((round.evalsha ?? 0) + (round.eval ?? 0), 0, 'script calls in an idle round after the start');
      // Every user holds a lease: the data path runs without waiting for Redis.
      for (const u of users.slice(0, 30)) assert.equal(second.accounting.admit(u.name).ok, true, `${u.name} admitted`);
      // The stop gives every lease back, in batches too; nothing is lost on the way: A's and B's usage stayed.
      await admin.config('RESETSTAT');
      await second.close();
      const stop = await calls();
      const stopScripts = (stop.evalsha ?? 0) + (stop.eval ?? 0);
      assert.ok(
        stopScripts > 0 && stopScripts <= batches + 2 + readPages(stop),
        `${stopScripts} script calls to give back ${users.length} leases`,
      );
      const leased = await admin.keys(`${prefix}allow:*`);
      assert.deepEqual(leased, [], 'no lease left after the stop');
    } finally {
      await second.close();
    }
  });

  test('an import of 600 users (createBatch): their rows read, limits written and leases taken per batch, not per user', async () => {
    const prefix = `sasi${process.pid}:`;
    const d = await daemon(prefix, 'I');
    const users = new Users({ store: d.store, accounting: d.accounting, platform: { ensure: async () => undefined }, sweepMs: 3_600_000 });
    try {
      await users.start([]);
      const periods = ['total', 'month', 'day'] as const;
      const rows = Array.from({ length: 600 }, (_, i) => ({
        name: `i${i}`,
        mainAccount: 'm',
        quota: { bytes: (100 + i) * MiB, period: periods[i % 3] },
      }));
      await admin.config('RESETSTAT');
      const answer = await createBatch(users, rows, { concurrency: 16 });
      assert.equal(answer.created, 600);
      const counted = await calls();
      const scripts = (counted.evalsha ?? 0) + (counted.eval ?? 0);
      // The records' two writes (putUsers), and the leases: each new user gives back a lease it may hold and
      // takes one, SYNC_BATCH users per call (before: two calls per user, one round trip after another).
      const batches = Math.ceil(users.size / SYNC_BATCH);
      assert.ok(scripts <= 2 + 2 * batches + 2 + readPages(counted), `${scripts} script calls for 600 users`);
      // Limits (the user's row and its period's row) in one MULTI per page, not one or two per user.
      assert.ok((counted.exec ?? 0) <= 4, `${counted.exec} MULTI/EXEC for 600 users' limits`);
      for (const r of rows) {
        const key = d.accounting.periodKeyOf(r.name) === 'total' ? r.name : `${r.name}@${d.accounting.periodKeyOf(r.name)}`;
        assert.equal(d.accounting.get(r.name)?.limitBytes, r.quota.bytes, `${r.name}'s limit`);
        assert.equal(Number(await admin.hget(`${prefix}u:${key}`, 'limit')), r.quota.bytes, `${key}'s stored limit`);
        assert.equal(d.leaser.user(key).held, 4 * MiB, `${key} holds a slice`);
        assert.equal(d.accounting.admit(r.name).ok, true);
      }
    } finally {
      await users.close();
      await d.close();
    }
  });

  test("the config's users applied at a start and a reload read their own rows, not every stored row", async () => {
    const prefix = `sasc${process.pid}:`;
    const stored: AccountingUser[] = Array.from({ length: 600 }, (_, i) => ({
      name: `s${i}`,
      limitBytes: (100 + i) * MiB,
      period: 'month',
    }));
    const first = await daemon(prefix, 'A');
    await first.accounting.upsertUsers(stored);
    await first.accounting.setUsers([{ name: 'cfg', limitBytes: 50 * MiB, period: 'month' }]);
    first.accounting.meter('cfg').add(7000, 0);
    await first.close();

    const second = await daemon(prefix, 'B');
    try {
      // As the users directory's seed does right after the start (before: every usage row listed again).
      await admin.config('RESETSTAT');
      await second.accounting.setUsers([{ name: 'cfg', limitBytes: 50 * MiB, period: 'month' }]);
      let counted = await calls();
      assert.equal(counted.smembers ?? 0, 0, 'no listing of every row');
      assert.ok(
        (counted.hgetall ?? 0) + (counted.hmget ?? 0) <= 2,
        `${(counted.hgetall ?? 0) + (counted.hmget ?? 0)} rows read for one config user`,
      );
      assert.equal(second.accounting.get('cfg')?.usedBytes, 7000, "cfg's usage kept");
      assert.equal(second.accounting.admit('cfg').ok, true);
      // A reload after writes (the start's snapshot is gone): the config users' rows by key.
      await second.accounting.setUsers([{ name: 'cfg', limitBytes: 60 * MiB, period: 'month' }]);
      await admin.config('RESETSTAT');
      await second.accounting.setUsers([{ name: 'cfg', limitBytes: 70 * MiB, period: 'month' }]);
      counted = await calls();
      assert.equal(counted.smembers ?? 0, 0, 'no listing of every row at a reload');
      assert.ok(
        (counted.hgetall ?? 0) + (counted.hmget ?? 0) <= 8,
        `${(counted.hgetall ?? 0) + (counted.hmget ?? 0)} rows read at a reload (its lease calls read some)`,
      );
      assert.equal(second.accounting.get('cfg')?.limitBytes, 70 * MiB);
      assert.equal(second.accounting.get('cfg')?.usedBytes, 7000, "cfg's usage kept at the reload");
    } finally {
      await second.close();
    }
  });

  test('midnight: 600 day users roll to the new day with their rows, limits and leases per batch, not per user', async () => {
    const prefix = `sasm${process.pid}:`;
    let clock = Date.UTC(2026, 10, 15, 23, 59, 0);
    const d = await daemon(prefix, 'M', () => clock);
    try {
      const users: AccountingUser[] = Array.from({ length: 600 }, (_, i) => ({
        name: `m${i}`,
        limitBytes: (100 + i) * MiB,
        period: 'day',
      }));
      await d.accounting.upsertUsers(users);
      for (let i = 0; i < users.length; i += 5) d.accounting.meter(`m${i}`).add(1000, 0);
      await d.accounting.flush();
      clock = Date.UTC(2026, 10, 16, 0, 0, 1);
      await admin.config('RESETSTAT');
      await d.accounting.flush();
      const counted = await calls();
      const scripts = (counted.evalsha ?? 0) + (counted.eval ?? 0);
      // The new day's leases, SYNC_BATCH per call; before: one call and one limit write per user, one user after another.
      assert.ok(
        scripts <= 2 * Math.ceil(users.length / SYNC_BATCH) + 2 + readPages(counted),
        `${scripts} script calls for the roll of 600 users`,
      );
      assert.ok((counted.exec ?? 0) <= 4, `${counted.exec} MULTI/EXEC for 600 users' new limits`);
      for (const u of users) {
        assert.equal(d.accounting.periodKeyOf(u.name), 'day:2026-11-16', `${u.name} rolled`);
        assert.equal(d.accounting.get(u.name)?.usedBytes, 0, `${u.name} starts the day at 0`);
        assert.equal(Number(await admin.hget(`${prefix}u:${u.name}@day:2026-11-16`, 'limit')), u.limitBytes);
        assert.equal(d.leaser.user(`${u.name}@day:2026-11-16`).held, 4 * MiB, `${u.name} holds a slice of the new day`);
        assert.equal(d.accounting.admit(u.name).ok, true);
      }
      // The old day's spending goes to the old day's row (the leaser's next round reports it).
      await d.leaser.syncAll();
      assert.equal(Number(await admin.hget(`${prefix}u:m5@day:2026-11-15`, 'used')), 1000);
    } finally {
      await d.close();
    }
  });

  test(`3,000 users leased at once through a slow link: at most ${MAX_SYNCS_IN_FLIGHT} users in ${MAX_BATCHES_IN_FLIGHT} calls in flight, none timed out`, async () => {
    const prefix = `sasb${process.pid}:`;
    const relay = await new PacedRelay(server.port, 250_000).start();
    // The leases' calls go through a link carrying 250 KB/s: 3,000 calls sent at once (~1.2 MB) would take
    // about 5 s to cross it, and the last ones would time out after 2 s.
    const conn = await connection(relay.url, 'slow', 2000);
    const leaser = new AllowanceLeaser(new RedisAllowance(conn, prefix), { instance: 'S', sliceBytes: 4 * MiB, now });
    try {
      const names = Array.from({ length: 3000 }, (_, i) => `s${i}`);
      for (const n of names) leaser.user(n).seedLimit = 1024 * MiB;
      const got = await Promise.all(names.map((n) => leaser.acquire(n)));
      const offline = names.filter((n) => leaser.user(n).offline);
      assert.deepEqual(offline.slice(0, 5), [], `${offline.length} of 3,000 users served offline (their calls timed out)`);
      assert.ok(
        got.every((g) => g === 4 * MiB),
        'each holds a full slice',
      );
    } finally {
      await leaser.close();
      await conn.close();
      await relay.close();
    }
  });
});
