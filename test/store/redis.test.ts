// The shared Store contract against the Redis driver on a real redis-server (started here on a free
// loopback port), plus what only the Redis driver has: URL selection, key prefixes, connect failures.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { openStoreFor, openRedisStore, RedisStore, SqliteStore, StoreError, isRedisUrl } from '../../src/store/index.ts';
import { connection, redisMissing, RedisServer } from '../fleet/redis-server.ts';
import { storeContract, order } from './contract.ts';

const server = new RedisServer();
before(async () => {
  if (!redisMissing) await server.start();
});
after(() => server.stop());

storeContract('redis', {
  skip: redisMissing,
  open: (space, options) => openRedisStore(server.url, { prefix: `t:${space}:`, ...options }),
  // The marks are timed by Redis's TIME: their times are moved back instead.
  ageMarks: async (space, ms) => {
    const admin = await connection(server.url, 'admin');
    try {
      for (const key of [`t:${space}:usage:writers:at`, `t:${space}:connlog:writers:at`]) {
        const all = await admin.client.zrange(key, '0', '-1', 'WITHSCORES');
        for (let i = 0; i < all.length; i += 2) await admin.client.zadd(key, String(Number(all[i + 1]) - ms), all[i]!);
      }
    } finally {
      await admin.close();
    }
  },
});

describe('Redis driver', { skip: redisMissing }, () => {
  test('openStoreFor picks the driver from store.path', async () => {
    assert.equal(isRedisUrl('redis://127.0.0.1:1'), true);
    assert.equal(isRedisUrl('REDISS://h:1/0'), true);
    assert.equal(isRedisUrl('data/rotor.db'), false);
    const r = await openStoreFor(server.url, { prefix: 'sel:' });
    assert.ok(r instanceof RedisStore);
    await r.kvSet('k', 1);
    await r.close();
    const s = await openStoreFor(':memory:');
    assert.ok(s instanceof SqliteStore);
    await s.close();
  });

  test('every key lives under the prefix; two prefixes do not see each other', async () => {
    const a = await openRedisStore(server.url, { prefix: 'pa:' });
    const b = await openRedisStore(server.url, { prefix: 'pb:' });
    await a.putOrder(order('RP1', { orderNo: 'PP1' }));
    await a.addIntent({ merchantNo: 'RP1', operation: 'InstanceOpen', request: {}, reqId: 'q' });
    await a.recordCallback({ type: 'order', no: 'PP1', op: '1' }, 1);
    await a.addUsage([{ user: 'u', bytes: 1 }]);
    await a.kvSet('x', 1);
    assert.equal(await b.getOrder('PP1'), undefined);
    assert.deepEqual(await b.listJournal(), []);
    const raw = new Redis(server.url);
    const keys = await raw.keys('*');
    raw.disconnect();
    const mine = keys.filter((k) => k.startsWith('pa:'));
    assert.ok(mine.length >= 8, `keys: ${mine.join(' ')}`);
    assert.deepEqual(
      keys.filter((k) => k.startsWith('pb:')),
      [],
    );
    await a.close();
    await b.close();
  });

  test("the usage change feed: every write's rows after the cursor, and every row when Redis lost its data", async () => {
    const s = await openRedisStore(server.url, { prefix: 'feed:' });
    const raw = new Redis(server.url);
    try {
      await s.setLimits([
        { user: 'a', limitBytes: 10 },
        { user: 'b', limitBytes: 20 },
        { user: 'c', limitBytes: 30 },
      ]);
      // No epoch yet (no fleet daemon wrote one): every row, and no cursor to follow from.
      let r = await s.usageChangedSince(undefined);
      assert.deepEqual([r.full, r.cursor, r.rows.map((x) => x.user)], [true, undefined, ['a', 'b', 'c']]);
      await raw.set('feed:epoch', 'e1');
      r = await s.usageChangedSince(undefined);
      assert.equal(r.full, true);
      const first = r.cursor!;
      r = await s.usageChangedSince(first);
      assert.deepEqual([r.full, r.rows], [false, []]);
      // Each kind of write is in the feed: addUsage, setLimit, setLimits.
      await s.addUsage([{ user: 'b', bytes: 5 }]);
      r = await s.usageChangedSince(first);
      assert.deepEqual(
        r.rows.map((x) => [x.user, x.usedBytes]),
        [['b', 5]],
      );
      const second = r.cursor!;
      await s.setLimit('c', 31);
      await s.setLimits([{ user: 'd', limitBytes: 40 }]);
      r = await s.usageChangedSince(second);
      assert.deepEqual(r.rows.map((x) => [x.user, x.limitBytes]).sort(), [
        ['c', 31],
        ['d', 40],
      ]);
      const third = r.cursor!;
      // Redis lost its data: the counter starts again below the cursor and climbs past it before the next
      // read; the new epoch says so, and every row comes.
      await raw.flushall();
      await s.addUsage([{ user: 'x', bytes: 1 }]);
      for (let i = 0; i < third.version + 3; i++) await s.setLimit(`y${i}`, 1);
      await raw.set('feed:epoch', 'e2');
      r = await s.usageChangedSince(third);
      assert.equal(r.full, true);
      assert.ok(r.rows.some((x) => x.user === 'x' && x.usedBytes === 1));
    } finally {
      raw.disconnect();
      await s.close();
    }
  });

  test('an unreachable Redis fails the open quickly with STORE_UNAVAILABLE and leaves nothing running', async () => {
    const stopped = new RedisServer();
    await stopped.start();
    const url = stopped.url;
    await stopped.stop();
    const t0 = Date.now();
    await assert.rejects(
      openStoreFor(url),
      (e: unknown) => e instanceof StoreError && e.code === 'STORE_UNAVAILABLE' && !/secret/.test(e.message),
    );
    assert.ok(Date.now() - t0 < 3000);
    // Passwords in the URL never reach the message.
    await assert.rejects(
      openStoreFor(url.replace('redis://', 'redis://user:secret@')),
      (e: unknown) => e instanceof StoreError && !e.message.includes('secret'),
    );
  });
});
