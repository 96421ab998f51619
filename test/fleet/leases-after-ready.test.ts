// A fleet daemon's start takes its users' leases after ready (src/fleet/allowance.ts lendAtStart), against a real
// redis-server: the start returns with every user served from a bounded start share, the leases follow in
// batches, a user with a connection waiting is leased ahead of the others, and the share is the only thing a
// restart can add to a user's total (the overshoot bound), also when Redis cannot be reached.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { Accounting, type AccountingUser } from '../../src/accounting/accounting.ts';
import { AllowanceLeaser, SYNC_BATCH } from '../../src/fleet/allowance.ts';
import { RedisAllowance } from '../../src/store/redis-fleet-allowance.ts';
import { openRedisStore } from '../../src/store/index.ts';
import type { RedisConnection } from '../../src/store/redis-connection.ts';
import { Users } from '../../src/users/directory.ts';
import { createBatch } from '../../src/users/bulk.ts';
import { poll } from '../support/wait.ts';
import { commandCalls, connection, HoldingRelay, redisMissing, redisForFile } from './redis-server.ts';

const MiB = 1024 * 1024;
const SLICE = 4 * MiB;
const OFFLINE = 1 * MiB;
const T = Date.UTC(2026, 10, 15, 12, 0, 0);
const now = (): number => T;

let admin: Redis;
const server = redisForFile((a) => (admin = a));

/** A daemon's accounting on the store; its leases through `leases` when given (a relay), else the store's own connection. */
async function daemon(prefix: string, instance: string, options: { leases?: RedisConnection; offlineBytes?: number } = {}) {
  const store = await openRedisStore(server.url, { prefix, commandTimeoutMs: 10_000 });
  const leaser = new AllowanceLeaser(new RedisAllowance(options.leases ?? store.connection, prefix), {
    instance,
    sliceBytes: SLICE,
    offlineBytes: options.offlineBytes ?? OFFLINE,
    now,
    syncEveryMs: 600_000,
  });
  const accounting = new Accounting({ store, allowance: leaser, flushIntervalMs: 60_000, now });
  await accounting.start([]);
  let closed = false;
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    await accounting.close();
    await leaser.close();
    await store.close();
    await options.leases?.close();
  };
  return { store, leaser, accounting, close };
}

const users = (n: number, tag: string, limitBytes = 100 * MiB): AccountingUser[] =>
  Array.from({ length: n }, (_, i) => ({ name: `${tag}${i}`, limitBytes, period: i % 2 === 0 ? 'total' : 'month' }));

describe("a fleet daemon's users leased after ready", { skip: redisMissing }, () => {
  test('the users directory starts with every user served from its start share; one lease per user follows in batches', async () => {
    const prefix = `lar${process.pid}:`;
    const first = await daemon(prefix, 'A');
    const dir1 = new Users({
      store: first.store,
      accounting: first.accounting,
      platform: { ensure: async () => undefined },
      sweepMs: 3_600_000,
    });
    await dir1.start([]);
    const rows = Array.from({ length: 600 }, (_, i) => ({
      name: `u${i}`,
      mainAccount: 'm',
      quota: { bytes: (100 + i) * MiB, period: 'total' as const },
    }));
    assert.equal((await createBatch(dir1, rows, { concurrency: 16 })).created, 600);
    first.accounting.meter('u7').add(5000, 0);
    await dir1.close();
    await first.close();

    const second = await daemon(prefix, 'B');
    const dir2 = new Users({
      store: second.store,
      accounting: second.accounting,
      platform: { ensure: async () => undefined },
      sweepMs: 3_600_000,
    });
    try {
      await admin.config('RESETSTAT');
      await dir2.start([]);
      // Ready: every user is admitted on its start share (before: every lease was taken first, and none was
      // pending here), and no lease is sent before the daemon says it is ready (takeLeases): sent during the
      // start, they took the CPU the rest of the start needed.
      const pending = rows.filter((r) => second.leaser.user(r.name).pending && second.leaser.user(r.name).syncing === undefined);
      assert.equal(pending.length, rows.length, 'users waiting for their first lease, none sent, at ready');
      for (const r of rows) {
        assert.equal(second.accounting.admit(r.name).ok, true, `${r.name} admitted before its lease`);
        const a = second.leaser.user(r.name);
        if (a.pending) assert.equal(a.held, OFFLINE, `${r.name}'s start share`);
      }
      await second.accounting.leasesTaken();
      const counted = await commandCalls(admin);
      const scripts = (counted.evalsha ?? 0) + (counted.eval ?? 0);
      assert.ok(
        scripts <= Math.ceil(rows.length / SYNC_BATCH) + 2 + Math.ceil(((counted.hgetall ?? 0) + (counted.hmget ?? 0)) / 100),
        `${scripts} script calls`,
      );
      for (const r of rows) {
        const a = second.leaser.user(r.name);
        assert.equal(a.pending, false);
        assert.equal(a.held, SLICE, `${r.name} holds a slice after the background leases`);
      }
      assert.equal(second.accounting.get('u7')?.usedBytes, 5000, "u7's usage kept");
    } finally {
      await dir2.close();
      await second.close();
    }
  });

  test('a user with a connection admitted is leased ahead of the start queue', { timeout: 120_000 }, async () => {
    const prefix = `larp${process.pid}:`;
    const list = users(2000, 'p');
    const first = await daemon(prefix, 'A');
    await first.accounting.upsertUsers(list);
    await first.close();

    const relay = await new HoldingRelay(server.port).start();
    const second = await daemon(prefix, 'B', { leases: await connection(relay.url, 'held', 30_000) });
    try {
      relay.held = true;
      await second.accounting.upsertUsers(list, { leasesAfter: true });
      second.accounting.takeLeases();
      const last = list[list.length - 1]!.name;
      const key = second.accounting.periodKeyOf(last) === 'total' ? last : `${last}@${second.accounting.periodKeyOf(last)}`;
      const share = second.leaser.user(key);
      assert.equal(share.pending, true);
      // How many users still wait, counted at the instant this user's first lease lands (a poll would count
      // later, after more batches on a loaded machine).
      const waiting = (): number =>
        list.filter((u) => {
          const k = second.accounting.periodKeyOf(u.name) === 'total' ? u.name : `${u.name}@${second.accounting.periodKeyOf(u.name)}`;
          return second.leaser.user(k).pending;
        }).length;
      let stillWaiting: number | undefined;
      let pending: boolean = share.pending;
      Object.defineProperty(share, 'pending', {
        configurable: true,
        enumerable: true,
        get: () => pending,
        set: (v: boolean) => {
          pending = v;
          if (!v && stillWaiting === undefined) stillWaiting = waiting();
        },
      });
      // Admitted while two batches wait for Redis: its lease goes into the next call, not the tenth.
      assert.equal(second.accounting.admit(last).ok, true);
      await poll(() => share.syncing !== undefined, { what: `${last}'s lease asked for` });
      relay.release();
      await poll(() => !share.pending, { what: `${last}'s first lease`, timeoutMs: 60_000 });
      assert.ok(
        stillWaiting !== undefined && stillWaiting >= list.length - 4 * SYNC_BATCH,
        `${stillWaiting} users still waiting when the admitted one was leased`,
      );
      assert.equal(second.leaser.user(key).held, SLICE);
      await second.accounting.leasesTaken();
    } finally {
      relay.release();
      await second.close();
      await relay.close();
    }
  });

  test('the start share bounds what a restart adds: a user whose remainder another daemon holds passes its limit by at most offlineBytes', async () => {
    const prefix = `larb${process.pid}:`;
    const LIMIT = 8 * MiB;
    const u: AccountingUser = { name: 'near', limitBytes: LIMIT, period: 'total' };
    const a = await daemon(prefix, 'A');
    const relay = await new HoldingRelay(server.port).start();
    let b: Awaited<ReturnType<typeof daemon>> | undefined;
    try {
      await a.accounting.upsertUsers([u]);
      a.accounting.meter('near').add(4 * MiB, 0);
      await a.leaser.syncAll();
      // A: 4 MiB used and the other 4 MiB leased: nothing is free in Redis.
      assert.equal(Number(await admin.hget(`${prefix}u:near`, 'used')), 4 * MiB);
      assert.equal(a.leaser.user('near').held, 4 * MiB);

      b = await daemon(prefix, 'B', { leases: await connection(relay.url, 'held', 30_000) });
      relay.held = true;
      await b.accounting.upsertUsers([u], { leasesAfter: true });
      // B read 4 MiB used of 8: its start share is min(offlineBytes, 4 MiB), and it is all B serves on its own.
      const share = b.leaser.user('near');
      assert.equal(share.pending, true);
      assert.equal(share.held, OFFLINE);
      assert.equal(b.accounting.admit('near').ok, true, 'served while the lease is on its way');
      b.accounting.meter('near').add(OFFLINE - 1, 0);
      assert.equal(b.accounting.admit('near').ok, true);
      b.accounting.meter('near').add(1, 0);
      assert.equal(b.accounting.admit('near').ok, false, 'refused once the start share is spent');
      relay.release();
      await b.accounting.leasesTaken();
      // The first lease granted nothing (A holds the rest); what B spent meanwhile is reported as used (by
      // that lease, or the next sync when it was spent while the lease was in flight, as here).
      assert.equal(share.held, 0);
      assert.equal(b.accounting.admit('near').ok, false);
      await b.leaser.syncAll();
      assert.equal(share.held, 0);
      assert.equal(Number(await admin.hget(`${prefix}u:near`, 'used')), 5 * MiB);
      // A spends its lease: the fleet's total passes the limit by the start share, no more.
      a.accounting.meter('near').add(4 * MiB, 0);
      await a.leaser.syncAll();
      const used = Number(await admin.hget(`${prefix}u:near`, 'used'));
      assert.ok(used <= LIMIT + OFFLINE, `used ${used} within limit + offlineBytes`);
      assert.equal(used, 9 * MiB);
    } finally {
      relay.release();
      await b?.close();
      await a.close();
      await relay.close();
    }
  });

  test('a first lease that finds Redis unreachable adds no offline share to the start share', { timeout: 60_000 }, async () => {
    const prefix = `laru${process.pid}:`;
    const list = users(3, 'o');
    const first = await daemon(prefix, 'A');
    await first.accounting.upsertUsers(list);
    await first.close();
    const relay = await new HoldingRelay(server.port).start();
    // Replies held longer than the command timeout: the first leases time out (Redis unreachable).
    const d = await daemon(prefix, 'B', { leases: await connection(relay.url, 'held', 300) });
    try {
      relay.held = true;
      await d.accounting.upsertUsers(list, { leasesAfter: true });
      await d.accounting.leasesTaken();
      const a = d.leaser.user('o0');
      assert.equal(a.offline, true, 'the first lease found Redis unreachable');
      assert.equal(a.held, OFFLINE, 'one own share per start and outage, not two');
      assert.equal(d.accounting.admit('o0').ok, true);
    } finally {
      relay.release();
      await d.close();
      await relay.close();
    }
  });

  test(
    'a stop while the leases are still coming: what was spent is reported, every lease given back, nothing waits',
    { timeout: 60_000 },
    async () => {
      const prefix = `lars${process.pid}:`;
      const list = users(2000, 's');
      const first = await daemon(prefix, 'A');
      await first.accounting.upsertUsers(list);
      await first.close();
      const relay = await new HoldingRelay(server.port).start();
      const d = await daemon(prefix, 'B', { leases: await connection(relay.url, 'held', 30_000) });
      relay.held = true;
      await d.accounting.upsertUsers(list, { leasesAfter: true });
      const taken = d.accounting.leasesTaken();
      const last = list[list.length - 2]!.name; // a 'total' user, at the end of the queue: never sent
      d.accounting.meter(last).add(1234, 0);
      relay.release();
      await d.close();
      await taken;
      await relay.close();
      assert.deepEqual(await admin.keys(`${prefix}allow:*`), [], 'no lease left after the stop');
      assert.equal(Number(await admin.hget(`${prefix}u:${last}`, 'used')), 1234, 'spent from the start share, reported at the stop');
    },
  );

  test('with offlineBytes 0 nothing is lent: the start takes every lease before it returns', async () => {
    const prefix = `larz${process.pid}:`;
    const list = users(300, 'z');
    const first = await daemon(prefix, 'A');
    await first.accounting.upsertUsers(list);
    await first.close();
    const d = await daemon(prefix, 'B', { offlineBytes: 0 });
    try {
      await d.accounting.upsertUsers(list, { leasesAfter: true });
      assert.equal(d.leaser.user('z0').pending, false);
      assert.equal(d.leaser.user('z0').held, SLICE);
    } finally {
      await d.close();
    }
  });
});
