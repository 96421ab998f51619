// The fleet's shared state (src/store/fleet-state.ts) as the opener gives it (Backends.fleet): two openings of
// the same store are two daemons. Leases are exclusive, the first sticky binding wins, the allowance never
// grants past the limit the usage backend holds and moves what was spent into its `used`, users are put back
// once, and the persistence settings are read. Only a store several daemons share has it: on SQLite the
// opener gives none (test/store/backends.test.ts). The fleet's logic on top is test/fleet's.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { openBackends, type AllowanceSync, type Backends, type FleetState } from '../../src/store/index.ts';
import { redisMissing, RedisServer } from '../fleet/redis-server.ts';

const server = new RedisServer();
before(async () => {
  if (!redisMissing) await server.start();
});
after(() => server.stop());

let spaces = 0;
/** Two daemons on one fresh data set. */
async function twoDaemons(): Promise<[Backends & { fleet: FleetState }, Backends & { fleet: FleetState }]> {
  const prefix = `fs${process.pid}x${++spaces}:`;
  const open = async () => {
    const b = await openBackends(server.url, { prefix });
    assert.ok(b.fleet, 'a Redis store gives the fleet state');
    return b as Backends & { fleet: FleetState };
  };
  return [await open(), await open()];
}

const sync = (over: Partial<AllowanceSync>): AllowanceSync => ({
  instance: 'A',
  user: 'ann',
  reported: 0,
  want: 0,
  aliveTtlMs: 60_000,
  now: Date.now(),
  seedLimit: null,
  seedUsed: 0,
  seedEpoch: '',
  reporter: 'A:1',
  acked: 0,
  final: false,
  newEpoch: 'e1',
  ...over,
});

describe('fleet state through the opener (redis)', { skip: redisMissing }, () => {
  test('a lease is held by one owner at a time; released, the other takes it', async () => {
    const [a, b] = await twoDaemons();
    try {
      const la = a.fleet.leases('A', 60_000);
      const lb = b.fleet.leases('B', 60_000);
      assert.equal(await la.acquire('order:1'), true);
      assert.equal(await lb.acquire('order:1'), false);
      assert.equal(await lb.renew('order:1'), false);
      assert.equal(await lb.release('order:1'), false);
      assert.equal(await lb.holder('order:1'), 'A');
      assert.equal(await la.release('order:1'), true);
      assert.equal(await lb.acquire('order:1'), true);
      assert.equal(await la.holder('order:1'), 'B');
    } finally {
      await a.close();
      await b.close();
    }
  });

  test('the first sticky binding wins; only the node it is on can end it', async () => {
    const [a, b] = await twoDaemons();
    try {
      const sa = a.fleet.sessions<{ id: string }>();
      const sb = b.fleet.sessions<{ id: string }>();
      assert.equal((await sa.claim('ann', 's1', { id: 'n1' }, 60_000)).won, true);
      const second = await sb.claim('ann', 's1', { id: 'n2' }, 60_000);
      assert.equal(second.won, false);
      assert.equal(second.session.node.id, 'n1');
      assert.equal((await sb.get('ann', 's1'))?.node.id, 'n1');
      assert.equal(await sb.end('ann', 's1', 'n2'), false);
      assert.equal(await sb.end('ann', 's1', 'n1'), true);
      assert.equal(await sa.get('ann', 's1'), undefined);
    } finally {
      await a.close();
      await b.close();
    }
  });

  test("the allowance grants no more than the usage backend's limit leaves, and spending lands in its `used`", async () => {
    const [a, b] = await twoDaemons();
    try {
      await a.usage.setLimit('ann', 1000);
      const alA = a.fleet.allowance();
      const alB = b.fleet.allowance();
      const first = await alA.sync(sync({ want: 600 }));
      assert.equal(first.held, 600);
      assert.equal(first.limit, 1000);
      const second = await alB.sync(sync({ instance: 'B', reporter: 'B:1', want: 600 }));
      assert.equal(second.held, 400, 'only what A does not hold');
      assert.equal(second.others, 600);
      assert.equal(second.daemons, 2);
      assert.equal(second.epoch, first.epoch);
      // Topping up a lease already at `want` grants nothing more; an unlimited user holds nothing (granted -1).
      const again = await alA.sync(sync({ want: 600 }));
      assert.deepEqual([again.held, again.granted, again.used], [600, 0, 0]);
      const free = await alA.sync(sync({ user: 'ben', want: 600 }));
      assert.deepEqual([free.held, free.granted, free.limit], [0, -1, -1]);
      // A spent 500 and gives the rest back; a retried report of the same cumulative figure adds nothing.
      await alA.sync(sync({ reported: 500, want: 0 }));
      await alA.sync(sync({ reported: 500, want: 0, acked: 0 }));
      assert.equal((await b.usage.getUsage('ann'))?.usedBytes, 500);
      assert.equal(await alB.heartbeat('B', 60_000, Date.now(), 'other'), first.epoch);
    } finally {
      await a.close();
      await b.close();
    }
  });

  test('users are put back once, read through the users backend', async () => {
    const [a, b] = await twoDaemons();
    try {
      const held = { name: 'ann', data: { n: 1 }, passwordHash: 'scrypt$x', state: 'ready' as const, version: 7, updatedAt: 1 };
      assert.equal(await a.fleet.restoreUsers([held], 1000), 1);
      assert.equal(await b.fleet.restoreUsers([held], 1000), 0, 'as new is there already');
      assert.deepEqual((await b.users.getUser('ann'))?.data, { n: 1 });
    } finally {
      await a.close();
      await b.close();
    }
  });

  test('the persistence settings are read (this test server keeps nothing on disk)', async () => {
    const [a, b] = await twoDaemons();
    try {
      assert.deepEqual(await a.fleet.persistence(), { snapshots: false, appendOnly: false });
    } finally {
      await a.close();
      await b.close();
    }
  });
});
