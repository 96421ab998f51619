// The fleet's re-read of usage after each flush (Accounting.readFleet) at a reseller's size, against a real
// redis-server: it reads the rows written since its last read (the store's usage change feed), not every
// row, so a flush costs what the traffic costs; and what it delivers stays exact: other daemons' traffic and
// limits reach this daemon, a meter made after its row was written gets it, and after Redis lost its data
// (FLUSHALL: a new epoch, the feed's counter starting again) every row is read once more.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { Accounting, type AccountingUser } from '../../src/accounting/accounting.ts';
import { AllowanceLeaser } from '../../src/fleet/allowance.ts';
import { RedisAllowance } from '../../src/store/redis-fleet-allowance.ts';
import { openRedisStore, type RedisStore } from '../../src/store/index.ts';
import { commandCalls, redisMissing, redisForFile } from './redis-server.ts';

const MiB = 1024 * 1024;
// Mid-November 2026, UTC: no quota day ends during the test.
const T = Date.UTC(2026, 10, 15, 12, 0, 0);
const now = (): number => T;
let admin: Redis;
const server = redisForFile((a) => (admin = a));

/** Calls of each command since the last CONFIG RESETSTAT (INFO commandstats). */
const calls = (): Promise<Record<string, number>> => commandCalls(admin);

interface Daemon {
  store: RedisStore;
  leaser: AllowanceLeaser;
  accounting: Accounting;
  close(): Promise<void>;
}

/** `users` null: started, no user given yet (the start's read of every row is kept for the first users). */
async function daemon(prefix: string, instance: string, users: AccountingUser[] | null): Promise<Daemon> {
  const store = await openRedisStore(server.url, { prefix, commandTimeoutMs: 10_000 });
  // No timers: each flush and sync is the test's own.
  const leaser = new AllowanceLeaser(new RedisAllowance(store.connection, prefix), {
    instance,
    sliceBytes: 4 * MiB,
    syncEveryMs: 600_000,
    now,
  });
  const accounting = new Accounting({ store, allowance: leaser, flushIntervalMs: 600_000, now });
  await accounting.start([]);
  if (users !== null) await accounting.upsertUsers(users);
  let closed = false;
  return {
    store,
    leaser,
    accounting,
    close: async () => {
      if (closed) return;
      closed = true;
      await accounting.close();
      await leaser.close();
      await store.close();
    },
  };
}

const usersOf = (n: number, p = 'c'): AccountingUser[] =>
  Array.from({ length: n }, (_, i) => ({ name: `${p}${i}`, limitBytes: 1000 * MiB }));

describe('the fleet re-read after a flush', { skip: redisMissing }, () => {
  test("reads the rows written since the last flush, not every user's, and still sees the other daemon's traffic and limits", async () => {
    const prefix = `feed${process.pid}:`;
    const users = usersOf(600);
    const a = await daemon(prefix, 'A', users);
    const b = await daemon(prefix, 'B', users.slice(0, 3));
    try {
      await a.accounting.flush();
      await a.accounting.flush();
      b.accounting.meter('c1').add(5000, 0);
      a.accounting.meter('c2').add(7000, 0);
      await b.leaser.syncAll();
      await b.accounting.setLimit('c0', 123 * MiB);
      await admin.config('RESETSTAT');
      await a.accounting.flush();
      const counted = await calls();
      // c1 (B's traffic) and c0 (B's limit; B's syncs also wrote its row): a handful, not 600 (before: one
      // HGETALL per user every flush).
      assert.ok(
        (counted.hgetall ?? 0) + (counted.hmget ?? 0) <= 5,
        `${(counted.hgetall ?? 0) + (counted.hmget ?? 0)} rows read by a flush with 600 users, 2 of them changed`,
      );
      assert.equal(counted.smembers ?? 0, 0, 'no listing of every user');
      assert.equal(a.accounting.get('c1')?.usedBytes, 5000, "B's traffic reached A");
      assert.equal(a.accounting.get('c2')?.usedBytes, 7000, "A's own traffic, not yet synced, counted");
      assert.equal(a.accounting.get('c0')?.limitBytes, 123 * MiB, 'the limit set on B reached A');
      // A's own sync moves c2's bytes into the shared row: counted once, not twice.
      await a.leaser.syncAll();
      await a.accounting.flush();
      assert.equal(a.accounting.get('c2')?.usedBytes, 7000);
      // Nothing written: nothing read.
      await admin.config('RESETSTAT');
      await a.accounting.flush();
      const idle = await calls();
      assert.equal((idle.hgetall ?? 0) + (idle.hmget ?? 0), 0, 'an idle flush reads no row');
    } finally {
      await b.close();
      await a.close();
    }
  });

  test("a restart's first flush reads what was written since the start's read, not every user's rows again", async () => {
    const prefix = `feedstart${process.pid}:`;
    const periods = ['total', 'month', 'day'] as const;
    const users: AccountingUser[] = Array.from({ length: 600 }, (_, i) => ({
      name: `s${i}`,
      limitBytes: 1000 * MiB,
      period: periods[i % 3],
    }));
    const first = await daemon(prefix, 'A', users);
    for (let i = 0; i < users.length; i += 7) first.accounting.meter(`s${i}`).add(1000 + i, 0);
    await first.close();
    const other = await daemon(prefix, 'B', users.slice(0, 3));
    // The restarted daemon: its start reads every row once (with the feed's cursor), then applies its users.
    const again = await daemon(prefix, 'A', null);
    try {
      // Another daemon's traffic lands after that read, before the users are applied and before any flush.
      other.accounting.meter('s1').add(5000, 0);
      await other.leaser.syncAll();
      await again.accounting.upsertUsers(users);
      await admin.config('RESETSTAT');
      await again.accounting.flush();
      const counted = await calls();
      // s1's month row (B's sync wrote it) and the rows B's own start wrote: a handful, not 600 users' 1,000
      // rows (before: every row listed again, then every meter read by key).
      assert.ok(
        (counted.hgetall ?? 0) + (counted.hmget ?? 0) <= 10,
        `${(counted.hgetall ?? 0) + (counted.hmget ?? 0)} rows read by the first flush after a start of 600 users`,
      );
      assert.equal(counted.smembers ?? 0, 0, 'no listing of every row');
      assert.equal(again.accounting.get('s1')?.usedBytes, 5000, "the other daemon's traffic after the start's read");
      for (let i = 0; i < users.length; i += 7) assert.equal(again.accounting.get(`s${i}`)?.usedBytes, 1000 + i, `s${i}'s usage`);
    } finally {
      await again.close();
      await other.close();
    }
  });

  test('a meter made after its row was written (from an older read) gets the row at the next flush', async () => {
    const prefix = `feedlate${process.pid}:`;
    const late: AccountingUser = { name: 'late', limitBytes: 1000 * MiB, period: 'day' };
    const b = await daemon(prefix, 'B', [late]);
    // A starts (its start reads every row, the day's row of `late` too, and keeps that read for the users to
    // come) and flushes: from now on it follows the feed.
    const a = await daemon(prefix, 'A', null);
    try {
      await a.accounting.flush();
      // B's traffic lands; A's flush reads the row while A has no meter for it.
      b.accounting.meter('late').add(9000, 0);
      await b.leaser.syncAll();
      await a.accounting.flush();
      // The user comes to A from its start's read (older than B's traffic), and the row is not in the feed again.
      await a.accounting.upsertUsers([late]);
      await a.accounting.flush();
      assert.equal(a.accounting.get('late')?.usedBytes, 9000, "B's traffic reached the meter A made afterwards");
    } finally {
      await a.close();
      await b.close();
    }
  });

  test('after Redis lost its data the next flush reads every row again', async () => {
    const prefix = `feedlost${process.pid}:`;
    const users = usersOf(5);
    const a = await daemon(prefix, 'A', users);
    const b = await daemon(prefix, 'B', users);
    try {
      a.accounting.meter('c0').add(1000, 0);
      await a.leaser.syncAll();
      await a.accounting.flush();
      await a.accounting.flush();
      await admin.flushall();
      // B rebuilds (its syncs write a new epoch) and its traffic lands while the feed's counter starts again
      // below A's cursor, and climbs past it with later writes.
      b.accounting.meter('c3').add(4000, 0);
      await b.leaser.syncAll();
      for (let i = 0; i < 20; i++) await b.store.setLimit(`other${i}`, MiB);
      await a.accounting.flush();
      assert.equal(a.accounting.get('c3')?.usedBytes, 4000, "B's traffic after the loss reached A");
    } finally {
      await b.close();
      await a.close();
    }
  });
});
