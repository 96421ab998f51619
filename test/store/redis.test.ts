// The shared Store contract against the Redis driver on a real redis-server (started here on a free
// loopback port), plus what only the Redis driver has: URL selection, key prefixes, connect failures.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { openStoreFor, openRedisStore, RedisStore, SqliteStore, StoreError, isRedisUrl } from '../../src/store/index.ts';
import { redisMissing, RedisServer } from '../fleet/redis-server.ts';
import { storeContract, order } from './contract.ts';

const server = new RedisServer();
before(async () => {
  if (!redisMissing) await server.start();
});
after(() => server.stop());

storeContract('redis', {
  skip: redisMissing,
  open: (space, options) => openRedisStore(server.url, { prefix: `t:${space}:`, ...options }),
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
