// A listing's pages overlap: the next page is asked for before the current one is decoded, so Redis builds
// it while the daemon parses (one page at a time, each side waited for the other: a fleet daemon's restart
// at 20,000 users read ~70,000 records that way). A relay holds Redis' replies back; the pages asked for
// meanwhile reach Redis: READ_PAGES_IN_FLIGHT of them, and no more.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { openRedisStore } from '../../src/store/index.ts';
import { READ_PAGES_IN_FLIGHT } from '../../src/store/redis.ts';
import { commandCalls, HoldingRelay, redisMissing, RedisServer } from '../fleet/redis-server.ts';

const redis = new RedisServer();
let relay: HoldingRelay;
let admin: Redis;

before(async () => {
  if (redisMissing) return;
  await redis.start();
  relay = await new HoldingRelay(redis.port).start();
  admin = new Redis(redis.port, '127.0.0.1', { lazyConnect: true });
  await admin.connect();
});

after(async () => {
  if (redisMissing) return;
  admin.disconnect();
  await relay.close();
  await redis.stop();
});

/** Resolves once Redis has run `n` script calls since the last RESETSTAT (checked every 10 ms); rejects after `ms`. */
async function scriptCallsReach(n: number, ms: number): Promise<number> {
  const until = Date.now() + ms;
  for (;;) {
    const c = await commandCalls(admin);
    const calls = (c.evalsha ?? 0) + (c.eval ?? 0);
    if (calls >= n) return calls;
    if (Date.now() > until) throw new Error(`${calls} script calls reached Redis, waited for ${n}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

test(
  `a listing keeps ${READ_PAGES_IN_FLIGHT} pages in flight, and its records come back whole and in order`,
  { skip: redisMissing },
  async () => {
    assert.ok(READ_PAGES_IN_FLIGHT >= 2, 'pages overlap');
    const store = await openRedisStore(relay.url, { prefix: 'pif:', commandTimeoutMs: 30_000 });
    try {
      const names = Array.from({ length: 1000 }, (_, i) => `u${String(i).padStart(4, '0')}`);
      await store.setLimits(names.map((user, i) => ({ user, limitBytes: 1000 + i })));
      // The page script loaded once, outside the count.
      assert.equal((await store.getUsages(['u0001'])).length, 1);
      await admin.config('RESETSTAT');
      relay.held = true;
      const reading = store.getUsages(names);
      // Before: the second page was asked for only once the first had come back, which the relay keeps.
      await scriptCallsReach(READ_PAGES_IN_FLIGHT, 20_000);
      // And no more than that ahead of the daemon (a fleet-wide listing is bounded by the pages in flight).
      await admin.ping();
      const c = await commandCalls(admin);
      assert.equal((c.evalsha ?? 0) + (c.eval ?? 0), READ_PAGES_IN_FLIGHT, 'pages asked for while none came back');
      relay.release();
      const rows = await reading;
      assert.deepEqual(
        rows.map((r) => [r.user, r.limitBytes]),
        names.map((n, i) => [n, 1000 + i]),
      );
    } finally {
      relay.release();
      await store.close();
    }
  },
);
