// A Redis that lost its data is rebuilt by the daemons' next syncs: each folds in the last view it holds of
// every user's usage. Rounds of syncAll can overlap (the timer's round and an explicit one, or a round that ran
// longer than the interval on a slow Redis): the loss one round noticed must still make a later round sync
// every user, or a user idle on this daemon never has its view folded in and the bytes only this daemon's view
// covered are gone from the shared counter the bill is read from. Real redis-server.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { AllowanceLeaser } from '../../src/fleet/allowance.ts';
import { RedisAllowance } from '../../src/store/redis-fleet-allowance.ts';
import { openRedisStore } from '../../src/store/index.ts';
import { redisMissing, RedisServer, connection } from './redis-server.ts';

const server = new RedisServer();
before(async () => {
  if (!redisMissing) await server.start();
});
after(() => server.stop());

describe('the rebuild after a loss', { skip: redisMissing }, () => {
  test('two overlapping rounds that both see the loss still leave every user to be synced next', async () => {
    const prefix = 'rebuild1:';
    const store = await openRedisStore(server.url, { prefix });
    await store.setLimit('gina', 100_000_000);
    const [ca, cb, admin] = await Promise.all([
      connection(server.url, 'a', 10_000),
      connection(server.url, 'b', 10_000),
      connection(server.url, 'flusher', 10_000),
    ]);
    const options = { sliceBytes: 1_000_000, syncEveryMs: 3_600_000 };
    const a = new AllowanceLeaser(new RedisAllowance(ca, prefix), { instance: 'A', ...options });
    const b = new AllowanceLeaser(new RedisAllowance(cb, prefix), { instance: 'B', ...options });
    try {
      // B reports first, then A: A's last view (6,000) covers every byte; B's (1,000) does not.
      await b.acquire('gina');
      b.user('gina').spend(1_000);
      await b.acquire('gina');
      await a.acquire('gina');
      a.user('gina').spend(5_000);
      await a.acquire('gina');
      assert.equal((await store.getUsage('gina'))?.usedBytes, 6_000);

      await admin.client.flushall();
      // B notices (a heartbeat round), then rebuilds everyone: its 1,000 go back.
      await b.syncAll();
      await b.syncAll();
      // A's two rounds overlap: both only heartbeat (nobody is due), and both see the new epoch.
      await Promise.all([a.syncAll(), a.syncAll()]);
      // The round after must sync gina on A although she is idle there, folding in A's view.
      await a.syncAll();
      assert.equal((await store.getUsage('gina'))?.usedBytes, 6_000, 'every byte back, once');
      await a.syncAll();
      await b.syncAll();
      assert.equal((await store.getUsage('gina'))?.usedBytes, 6_000, 'and not twice');
    } finally {
      await a.close();
      await b.close();
      await Promise.all([ca.close(), cb.close(), admin.close()]);
      await store.close();
    }
  });
});
