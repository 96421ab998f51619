// A user at pool.maxPerUser who keeps naming other regions replaces its least recently used idle pool at most
// pool.replacePerMinute times a minute, after a burst of 2 x maxPerUser (src/pool/registry.ts); past it the new
// pool is refused (PoolChurnError) and nothing is drawn, its pools stay. Before, every connection naming
// another region closed a pool and drew for a new one: a platform call per connection. Opening pools below the
// bound, and using the pools a user holds, cost no token; other users have buckets of their own.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { PoolChurnError, PoolRegistry } from '../../src/pool/registry.ts';
import type { UpstreamNode } from '../../src/pool/types.ts';

const node = (port: number): UpstreamNode => ({
  id: `socks5://@127.0.0.1:${port}`,
  protocol: 'socks5',
  host: '127.0.0.1',
  port,
  source: 'pwd',
});

describe('PoolRegistry: replacing pools is rationed per user', () => {
  test('burst 2 x maxPerUser, then replacePerMinute; refused replacements draw nothing', async () => {
    let now = 1_000;
    let draws = 0;
    const reg = new PoolRegistry({
      drawerFor: () => ({
        draw: async () => {
          draws++;
          return [node(40040)];
        },
      }),
      tuning: { lowWater: 0 },
      maxPerUser: 2,
      replacePerMinute: 6,
      now: () => now,
    });
    const get = (user: string, region: string) => reg.get({ user, productNo: 'P', region });
    try {
      // Below the bound: free. Then 4 replacements (2 x maxPerUser) at once.
      for (const r of ['A', 'B', 'C', 'D', 'E', 'F']) {
        now += 1;
        await get('alice', r)
          .acquire()
          .then((n) => reg.find(`alice/P/${r}`)!.release(n));
      }
      assert.equal(draws, 6);
      assert.throws(() => get('alice', 'G'), PoolChurnError);
      assert.throws(() => get('alice', 'G'), /too many regions or products at once: user alice holds 2 pools/);
      assert.equal(draws, 6, 'a refused replacement draws nothing');
      assert.deepEqual(
        reg
          .list()
          .map((p) => p.key.region)
          .sort(),
        ['E', 'F'],
        "the user's pools stay",
      );
      // The pools it holds are served without a token.
      for (let i = 0; i < 10; i++) get('alice', i % 2 === 0 ? 'E' : 'F');
      // Another user has its own bucket.
      get('bob', 'A');
      get('bob', 'B');
      get('bob', 'C');
      // One replacement per 10 s at 6 a minute.
      now += 9_000;
      assert.throws(() => get('alice', 'G'), PoolChurnError);
      now += 1_000;
      get('alice', 'G');
      assert.throws(() => get('alice', 'H'), PoolChurnError);
      // An error the gateway answers 403 with (a client's doing), never a platform failure.
      assert.equal(new PoolChurnError('alice', 2, 6).code, 'POOL_CHURN');
    } finally {
      reg.close();
    }
  });

  test('maxPerUser 1: the bucket outlives the pool it replaces', () => {
    let now = 1_000;
    const reg = new PoolRegistry({ drawerFor: () => ({ draw: async () => [] }), tuning: { lowWater: 0 }, maxPerUser: 1, now: () => now });
    try {
      for (const r of ['A', 'B', 'C']) reg.get({ user: 'alice', productNo: 'P', region: r }); // 1 free + 2 replacements
      assert.throws(() => reg.get({ user: 'alice', productNo: 'P', region: 'D' }), PoolChurnError);
      now += 10_000;
      reg.get({ user: 'alice', productNo: 'P', region: 'D' });
    } finally {
      reg.close();
    }
  });
});
