// A fleet allowance sync whose script ran in Redis but whose reply never reached the daemon (Redis stalled
// past the command timeout, then caught up) must not add the same bytes again at the next sync: usage is
// billed from that shared counter. Real redis-server; the stall is Redis's own CLIENT PAUSE.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { AllowanceLeaser } from '../../src/fleet/allowance.ts';
import { RedisAllowance } from '../../src/store/redis-fleet-allowance.ts';
import { openRedisStore, RedisKeys } from '../../src/store/index.ts';
import { redisMissing, RedisServer, connection } from './redis-server.ts';
import { poll } from '../support/wait.ts';

const server = new RedisServer();
before(async () => {
  if (!redisMissing) await server.start();
});
after(() => server.stop());

describe('allowance syncs are idempotent', { skip: redisMissing }, () => {
  test('a sync applied by Redis after the daemon gave up on it is not counted twice', async () => {
    const prefix = 'replay1:';
    const store = await openRedisStore(server.url, { prefix });
    await store.setLimit('alice', 10_000_000);
    const conn = await connection(server.url); // commandTimeoutMs 500
    const leaser = new AllowanceLeaser(new RedisAllowance(conn, prefix), { instance: 'A', sliceBytes: 1_000_000, syncEveryMs: 600_000 });
    await leaser.acquire('alice');
    const a = leaser.user('alice');
    a.spend(300_000);

    // Redis stalls for longer than the command timeout: the sync's script runs once the pause ends, after
    // the daemon has already counted the sync as failed (offline allowance) and kept its 300 000 bytes.
    const admin = await connection(server.url, 'pauser');
    await admin.client.call('CLIENT', 'PAUSE', '1500', 'ALL');
    await leaser.acquire('alice');
    assert.equal(a.offline, true, 'the daemon saw the sync fail');
    assert.equal(a.spent, 300_000, 'and still holds the bytes as unreported');
    await poll(async () => (await store.getUsage('alice'))?.usedBytes === 300_000, {
      what: 'the paused script to run',
      timeoutMs: 10_000,
      everyMs: 50,
      ignoreErrors: true,
    });

    // Redis is back: the next sync reports the same bytes again (it cannot know they landed) plus new ones.
    a.spend(1_000);
    await leaser.acquire('alice');
    assert.equal(a.offline, false);
    assert.equal((await store.getUsage('alice'))?.usedBytes, 301_000, 'each byte once');
    a.spend(500);
    await leaser.close();
    assert.equal((await store.getUsage('alice'))?.usedBytes, 301_500);
    // The last sync of a process forgets its reporter entry.
    assert.equal(await admin.client.exists(new RedisKeys(prefix).allowanceAcked('alice')), 0);
    await admin.close();
    await conn.close();
    await store.close();
  });

  test('a new process with the same instance id reports from zero again; a Redis that lost the figures is rebuilt without a double count', async () => {
    const prefix = 'replay2:';
    const store = await openRedisStore(server.url, { prefix });
    await store.setLimit('bob', 10_000_000);
    const c1 = await connection(server.url);
    const first = new AllowanceLeaser(new RedisAllowance(c1, prefix), { instance: 'A', sliceBytes: 1_000_000, syncEveryMs: 600_000 });
    await first.acquire('bob');
    first.user('bob').spend(7_000);
    await first.acquire('bob');
    // A crash: no final sync; the next run uses the same configured instance id.
    const c2 = await connection(server.url);
    const second = new AllowanceLeaser(new RedisAllowance(c2, prefix), { instance: 'A', sliceBytes: 1_000_000, syncEveryMs: 600_000 });
    const b = second.user('bob');
    b.seedLimit = 10_000_000;
    b.seedUsed = 7_000;
    await second.acquire('bob');
    b.spend(2_000);
    await second.acquire('bob');
    assert.equal((await store.getUsage('bob'))?.usedBytes, 9_000, "the restarted process's bytes count from its own zero");
    // Redis loses everything; the next sync rebuilds from this daemon's view and adds only the new bytes.
    const admin = await connection(server.url, 'flusher');
    await admin.client.flushall();
    b.seedUsed = 9_000;
    b.spend(300);
    await second.acquire('bob');
    assert.equal((await store.getUsage('bob'))?.usedBytes, 9_300);
    await first.close();
    await second.close();
    await admin.close();
    await c1.close();
    await c2.close();
    await store.close();
  });
});
