// The fleet allowance against a real redis-server: slices granted from what is left, spending moved into
// `used`, two daemons racing for one user's limit, and the documented overshoot bound when a daemon's
// lease is handed back while it is still spending (the worst case).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { AllowanceLeaser, SYNC_BATCH } from '../../src/fleet/allowance.ts';
import { RedisAllowance } from '../../src/store/redis-fleet-allowance.ts';
import { openRedisStore, type RedisStore } from '../../src/store/index.ts';
import { redisMissing, RedisServer, connection } from './redis-server.ts';
import { poll } from '../support/wait.ts';
import type { AllowanceGrant, AllowanceSync } from '../../src/store/fleet-state.ts';

/** Counts the users' syncs sent to Redis (a script call carries many). */
class CountingAllowance extends RedisAllowance {
  users = 0;
  override syncMany(requests: readonly AllowanceSync[]): Promise<AllowanceGrant[]> {
    this.users += requests.length;
    return super.syncMany(requests);
  }
}

const server = new RedisServer();
before(async () => {
  if (!redisMissing) await server.start();
});
after(() => server.stop());

const tick = () => new Promise((r) => setImmediate(r));

async function storeFor(prefix: string): Promise<RedisStore> {
  return openRedisStore(server.url, { prefix });
}

/** Relays `chunk` bytes at a time while the allowance lasts, asking for more when it is spent. */
async function drain(leaser: AllowanceLeaser, user: string, chunk: number): Promise<number> {
  const a = leaser.user(user);
  let total = 0;
  for (;;) {
    if (a.exhausted && (await leaser.acquire(user)) <= 0) return total;
    a.spend(chunk);
    total += chunk;
    await tick();
  }
}

describe('AllowanceLeaser', { skip: redisMissing }, () => {
  test('slices come from what is left; spending moves into used; release gives the rest back', async () => {
    const store = await storeFor('a1:');
    await store.setLimit('alice', 100_000);
    await store.addUsage([{ user: 'alice', bytes: 20_000 }]);
    const conn = await connection(server.url);
    const changes: [string, boolean][] = [];
    const leaser = new AllowanceLeaser(new RedisAllowance(conn, 'a1:'), {
      instance: 'A',
      sliceBytes: 30_000,
      onChange: (u, e) => changes.push([u, e]),
    });
    assert.equal(await leaser.acquire('alice'), 30_000);
    const a = leaser.user('alice');
    assert.equal(a.spend(10_000), true);
    assert.equal(a.available, 20_000);
    // Topping up reports the 10 000 spent and holds a full slice again.
    assert.equal(await leaser.acquire('alice'), 30_000);
    assert.equal((await store.getUsage('alice'))?.usedBytes, 30_000);
    // 100 000 - 30 000 used - 30 000 held: a second daemon gets at most 40 000.
    const conn2 = await connection(server.url);
    const other = new AllowanceLeaser(new RedisAllowance(conn2, 'a1:'), { instance: 'B', sliceBytes: 50_000 });
    assert.equal(await other.acquire('alice'), 40_000);
    assert.equal(await other.acquire('alice'), 40_000, 'nothing more is left');
    await other.release('alice');
    assert.equal(await other.acquire('alice'), 40_000, 'released lease is available again');
    // Spending to the end of the lease starts a refill; while it is in flight the user may overdraw by at
    // most lowWater (half a slice), then the refill finds nothing left and the user is refused.
    assert.equal(a.spend(29_999), true);
    // The data path only asks (the share is data of accounting/); the fleet starts the refill in a task of its own.
    assert.ok(a.queued, 'running low asked for a refill');
    assert.equal(a.spend(2), true, 'a refill asked for lets the user overdraw a little (the fleet had room)');
    await new Promise((resolve) => setImmediate(resolve));
    assert.ok(a.syncing !== undefined, 'the fleet started the refill');
    await a.syncing;
    assert.equal(a.exhausted, true);
    await leaser.release('alice');
    await other.release('alice');
    assert.equal((await store.getUsage('alice'))?.usedBytes, 60_001);
    assert.deepEqual(changes, [
      ['alice', false],
      ['alice', true],
    ]);
    await leaser.close();
    await other.close();
    await conn.close();
    await conn2.close();
    await store.close();
  });

  test('an unlimited user is never exhausted and is still counted', async () => {
    const store = await storeFor('a2:');
    const conn = await connection(server.url);
    const leaser = new AllowanceLeaser(new RedisAllowance(conn, 'a2:'), { instance: 'A', sliceBytes: 1000 });
    assert.equal(await leaser.acquire('free'), Infinity);
    const a = leaser.user('free');
    for (let i = 0; i < 10; i++) assert.equal(a.spend(5000), true);
    await leaser.syncAll();
    assert.deepEqual(await store.getUsage('free'), {
      user: 'free',
      usedBytes: 50_000,
      limitBytes: -1,
      updatedAt: (await store.getUsage('free'))!.updatedAt,
    });
    await leaser.close();
    await conn.close();
    await store.close();
  });

  test('usageStore: the accounting flush adds only what did not go through spend', async () => {
    const store = await storeFor('a3:');
    await store.setLimit('alice', 1_000_000);
    const conn = await connection(server.url);
    const leaser = new AllowanceLeaser(new RedisAllowance(conn, 'a3:'), { instance: 'A', sliceBytes: 100_000 });
    const usage = leaser.usageStore(store);
    await leaser.acquire('alice');
    leaser.user('alice').spend(7000);
    // The flush carries the 7000 relayed plus 500 adopted from the platform.
    await usage.addUsage([{ user: 'alice', bytes: 7500 }]);
    await leaser.syncAll();
    assert.equal((await store.getUsage('alice'))?.usedBytes, 7500);
    assert.equal((await usage.getUsage('alice'))?.limitBytes, 1_000_000, 'other methods pass through');
    await leaser.close();
    await conn.close();
    await store.close();
  });

  test('two daemons racing for one limit: the fleet relays the limit, plus at most half a slice and a chunk each', async () => {
    const limit = 2_000_000;
    const slice = 64_000;
    const chunk = 1500;
    const store = await storeFor('a4:');
    await store.setLimit('alice', limit);
    const conns = await Promise.all([connection(server.url, 'a'), connection(server.url, 'b')]);
    const leasers = conns.map((c, i) => new AllowanceLeaser(new RedisAllowance(c, 'a4:'), { instance: `D${i}`, sliceBytes: slice }));
    const relayed = await Promise.all(leasers.map((l) => drain(l, 'alice', chunk)));
    const total = relayed[0]! + relayed[1]!;
    assert.ok(
      relayed.every((r) => r > limit / 10),
      `both daemons relayed: ${relayed.join(', ')}`,
    );
    assert.ok(total >= limit, `the whole limit was usable: ${total}`);
    // The documented bound with Redis reachable: each daemon may overdraw by lowWater (half a slice) while a
    // refill that it started with room left is in flight, plus the chunk that crosses the line.
    const bound = 2 * (slice / 2) + 2 * chunk;
    assert.ok(total <= limit + bound, `overshoot ${total - limit} > ${bound}`);
    await Promise.all(leasers.map((l) => l.close()));
    // Every relayed byte is in `used`; no lease is left behind.
    assert.equal((await store.getUsage('alice'))?.usedBytes, total);
    const raw = conns[0]!.client;
    assert.deepEqual(await raw.hgetall('a4:allow:alice'), {});
    await Promise.all(conns.map((c) => c.close()));
    await store.close();
  });

  test('worst case: a daemon cut off from Redis keeps spending its lease; overshoot stays within instances × (slice + offline)', async () => {
    const limit = 1_000_000;
    const slice = 100_000;
    const offline = 50_000;
    const chunk = 1000;
    const store = await storeFor('a5:');
    await store.setLimit('alice', limit);
    const ca = await connection(server.url, 'a');
    // B must stay connected throughout: on a loaded machine a command past the usual 500 ms would count as an
    // outage and put B on its own offline allowance too (B then relays limit + offline, not the limit).
    const cb = await connection(server.url, 'b', 10_000);
    // outageMaxBytes = offline: A's share of what alice has left is cut to its offline allowance (the bound of
    // a partitioned daemon is sliceBytes + outageMaxBytes).
    const options = {
      sliceBytes: slice,
      offlineBytes: offline,
      outageMaxBytes: offline,
      aliveTtlMs: 300,
      syncEveryMs: 60_000,
    };
    const a = new AllowanceLeaser(new RedisAllowance(ca, 'a5:'), { ...options, instance: 'A' });
    const b = new AllowanceLeaser(new RedisAllowance(cb, 'a5:'), { ...options, instance: 'B' });
    try {
      assert.equal(await a.acquire('alice'), slice);
      // A loses Redis (its connection is cut and stays cut); its heartbeat runs out after aliveTtlMs.
      ca.client.disconnect();
      // Redis keeps the heartbeat's clock (PX): its TTL is made to run out now rather than waited for.
      assert.equal(await cb.client.pexpire('a5:alive:A', 1), 1, "A's heartbeat key exists");
      await poll(async () => (await cb.client.exists('a5:alive:A')) === 0, {
        what: "A's heartbeat to expire",
        timeoutMs: 5000,
        everyMs: 5,
      });
      // B now gets everything, A's lease included; A spends its lease and then its offline allowance.
      const [byA, byB] = await Promise.all([drain(a, 'alice', chunk), drain(b, 'alice', chunk)]);
      const total = byA + byB;
      const bound = limit + 2 * (slice + offline) + 2 * chunk;
      // B relays the whole limit, A's lease included. On a loaded machine one of B's own rounds can still be slow
      // enough to count as an outage, and B then spends from its offline allowance: never more than that.
      assert.ok(byB >= limit && byB <= limit + offline, `B relayed ${byB}: the whole limit, at most its offline allowance over`);
      assert.equal(byA, slice + offline, 'A relayed its lease and its offline allowance');
      assert.ok(total > limit && total <= bound, `total ${total}, limit ${limit}, bound ${bound}`);
    } finally {
      // Also after a failed assertion: an open connection would keep the file running until its timeout.
      await a.close();
      await b.close();
      await ca.close();
      await cb.close();
      await store.close();
    }
  });

  test('a round syncs the users that moved, not the idle ones; after Redis was unreachable, everyone once', async () => {
    const store = await storeFor('a6:');
    for (let i = 0; i < 1000; i++) await store.setLimit(`u${i}`, 10_000_000);
    // A generous command timeout: 1,000 syncs at once on a loaded machine must not count as an outage (a sync
    // timed out leaves its user offline, and the round after syncs everyone again).
    const conn = await connection(server.url, 'a6', 10_000);
    const synced = new CountingAllowance(conn, 'a6:');
    const leaser = new AllowanceLeaser(synced, {
      instance: 'A',
      sliceBytes: 100_000,
      aliveTtlMs: 5000,
      syncEveryMs: 3_600_000,
    });
    let counter: Awaited<ReturnType<typeof connection>> | undefined;
    try {
      for (let i = 0; i < 1000; i++) await leaser.acquire(`u${i}`);
      // Script calls Redis ran (a batch of users' syncs is one), read from Redis itself over a connection of the
      // test's own; the users synced, counted on the way to it.
      counter = await connection(server.url, 'a6-counter');
      const calls = async (): Promise<number> => {
        const info = await counter!.client.info('commandstats');
        return [...info.matchAll(/^cmdstat_(?:evalsha|eval|fcall):calls=(\d+)/gm)].reduce((s, m) => s + Number(m[1]), 0);
      };
      const idle = await calls();
      synced.users = 0;
      await leaser.syncAll();
      assert.equal((await calls()) - idle, 0, 'nobody moved: no sync');
      assert.ok((await conn.client.pttl('a6:alive:A')) > 0, 'the heartbeat was renewed all the same');
      leaser.user('u3').spend(10);
      leaser.user('u500').spend(40_000); // more than half a slice left: no refill of its own
      const before = await calls();
      await leaser.syncAll();
      assert.equal(synced.users, 2, 'the two that moved');
      assert.equal((await calls()) - before, 1, 'in one call');
      assert.equal((await store.getUsage('u3'))?.usedBytes, 10);
      assert.equal((await store.getUsage('u500'))?.usedBytes, 40_000);
      // Redis unreachable for a round (the heartbeat fails), then back: the next round syncs all 1,000.
      conn.client.disconnect(true); // dropped; ioredis reconnects by itself (commands fail meanwhile)
      await leaser.syncAll();
      await poll(async () => (await conn.client.ping()) === 'PONG', { what: 'the connection back', timeoutMs: 5000, ignoreErrors: true });
      const back = await calls();
      synced.users = 0;
      await leaser.syncAll();
      assert.equal(synced.users, 1000, 'everyone after an unreachable round');
      assert.equal((await calls()) - back, Math.ceil(1000 / SYNC_BATCH), `in calls of ${SYNC_BATCH}`);
      await leaser.syncAll();
      assert.equal(synced.users, 1000, 'then idle again');
    } finally {
      // Also after a failed assertion: an open connection would keep the file running until its timeout.
      await leaser.close();
      await conn.close();
      await counter?.close();
      await store.close();
    }
  });
});
