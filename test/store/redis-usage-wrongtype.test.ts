// The quota meters' flush script (ADD_USAGE) marked the batch part taken before its increments and checked no key's
// type: a usage key of another type (an operator's edit, another program on the prefix) failed it half-way, after
// the mark and the rows before the bad key. The accounting writes a failed flush again under its id, which was then
// "taken": the users after the bad key in that part were never billed, silently. The script now checks every key
// first: the flush fails whole (nothing written, mark included) until the key is fixed, then lands once.
// Real redis-server of its own.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { openRedisStore } from '../../src/store/index.ts';
import { connection, redisMissing, RedisServer } from '../fleet/redis-server.ts';

const server = new RedisServer();
before(async () => {
  if (!redisMissing) await server.start();
});
after(() => server.stop());

test(
  'a meter flush with one wrong-typed usage key writes nothing, keeps failing, and lands whole once fixed',
  { skip: redisMissing },
  async () => {
    const prefix = 'usagewt:';
    const store = await openRedisStore(server.url, { prefix });
    const admin = await connection(server.url, 'admin');
    const used = async (user: string): Promise<number> => (await store.getUsage(user))?.usedBytes ?? 0;
    try {
      await admin.client.set(`${prefix}u:bob`, 'not a hash');
      const deltas = [
        { user: 'alice', bytes: 100 },
        { user: 'bob', bytes: 200 },
        { user: 'carol', bytes: 300 },
      ];
      await assert.rejects(store.addUsage(deltas, 'writerA.1'), /WRONGTYPE/);
      assert.equal(await used('alice'), 0, 'nothing written before the bad key');
      assert.equal(await admin.client.hlen(`${prefix}usage:writers`), 0, 'no batch mark written');
      // The accounting writes the failed flush again, as it was: it keeps failing (kept and logged), never "taken".
      await assert.rejects(store.addUsage(deltas, 'writerA.1'), /WRONGTYPE/);
      assert.deepEqual([await used('alice'), await used('carol')], [0, 0]);
      // The operator removes the foreign key: the same flush lands, every user once.
      await admin.client.del(`${prefix}u:bob`);
      await store.addUsage(deltas, 'writerA.1');
      await store.addUsage(deltas, 'writerA.1');
      assert.deepEqual([await used('alice'), await used('bob'), await used('carol')], [100, 200, 300]);
    } finally {
      await admin.close?.();
      await store.close();
    }
  },
);
