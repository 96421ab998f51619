// A page of user records carries each record's data as the JSON it is stored as (store/redis-scripts.ts
// USER_PAGE), parsed once with its page, not as a string the daemon unescapes and parses again per record (a
// fleet daemon's restart at 100,000 users parsed 100,000 such strings). A page of usage rows carries the three
// fields a row is read for (USAGE_PAGE), their values as before: integers as numbers, anything else as text.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { openRedisStore } from '../../src/store/index.ts';
import { redisMissing, RedisServer } from '../fleet/redis-server.ts';

const redis = new RedisServer();

before(async () => {
  if (!redisMissing) await redis.start();
});

after(async () => {
  if (!redisMissing) await redis.stop();
});

test("1,000 user records are listed with one JSON parse per page, not one more per record's data", { skip: redisMissing }, async () => {
  const store = await openRedisStore(redis.url, { prefix: 'rup:', commandTimeoutMs: 30_000 });
  const parse = JSON.parse;
  let parses = 0;
  try {
    const writes = Array.from({ length: 1000 }, (_, i) => ({
      user: {
        name: `p${String(i).padStart(4, '0')}`,
        data: { n: i, quota: { bytes: 2 ** 53 - 1 - i, period: 'day' } },
        passwordHash: `h${i}`,
        state: 'ready' as const,
      },
    }));
    await store.putUsers(writes);
    JSON.parse = ((text: string, reviver?: (this: unknown, key: string, value: unknown) => unknown) => {
      parses++;
      return parse(text, reviver);
    }) as typeof JSON.parse;
    const { changed } = await store.usersChangedSince(0);
    JSON.parse = parse;
    assert.equal(changed.length, 1000);
    changed.sort((a, b) => (a.name < b.name ? -1 : 1));
    changed.forEach((u, i) => {
      const w = writes[i]!.user;
      assert.deepEqual([u.name, u.data, u.passwordHash, u.state], [w.name, w.data, w.passwordHash, 'ready']);
      assert.ok(u.version > 0 && u.updatedAt > 0);
    });
    // 5 pages of 200 (before: 5 + 1,000).
    assert.ok(parses <= 5, `${parses} JSON parses for 5 pages of user records`);
  } finally {
    JSON.parse = parse;
    await store.close();
  }
});

test(
  'usage rows read their three fields as before: integers, -1, text that is not an integer, missing fields',
  { skip: redisMissing },
  async () => {
    const store = await openRedisStore(redis.url, { prefix: 'rup2:', commandTimeoutMs: 30_000 });
    const raw = new Redis(redis.url);
    try {
      await store.setLimits([
        { user: 'big', limitBytes: 2 ** 53 - 1 },
        { user: 'unlimited', limitBytes: -1 },
        { user: 'zero', limitBytes: 0 },
      ]);
      await store.addUsage([{ user: 'big', bytes: 2 ** 53 - 2 }]);
      // Fields other writers may leave (the fleet's seed fields) and values that are not integers' text.
      await raw.hset('rup2:u:big', 'seed', '5', 'seedEpoch', 'e1');
      await raw.hset('rup2:u:odd', 'used', '1.5', 'limit', '007', 'updatedAt', 'x');
      await raw.hset('rup2:u:bare', 'seed', '1');
      const rows = await store.getUsages(['big', 'unlimited', 'zero', 'odd', 'bare', 'missing']);
      assert.deepEqual(
        rows.map((r) => [r.user, r.usedBytes, r.limitBytes]),
        [
          ['big', 2 ** 53 - 2, 2 ** 53 - 1],
          ['unlimited', 0, -1],
          ['zero', 0, 0],
          ['odd', 1.5, 7],
          ['bare', 0, -1],
        ],
      );
      assert.ok(Number.isNaN(rows[3]!.updatedAt));
      assert.equal(rows[4]!.updatedAt, 0);
      assert.ok(rows[0]!.updatedAt > 0);
    } finally {
      raw.disconnect();
      await store.close();
    }
  },
);
