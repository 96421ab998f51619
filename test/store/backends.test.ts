// The one opener (src/store/backends.ts) on both drivers: `store.path` picks the driver, and what comes back is
// one backend per aggregate — what one opening writes through a backend, a second opening of the same path
// reads through the same backend; the fleet's shared state exists on Redis only; close() closes every backend.
// Each aggregate's own semantics are the contracts' (contract.ts, events.test.ts, test/connlog/bounds|store).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { openBackends, StoreError, type Backends } from '../../src/store/index.ts';
import { LOST_REASON, recordSize, type ConnectionRecord, type RecordResult } from '../../src/store/connection-log-types.ts';
import { redisMissing, RedisServer } from '../fleet/redis-server.ts';
import { order } from './contract.ts';

const server = new RedisServer();
const dir = mkdtempSync(join(tmpdir(), 'rotor-backends-'));
before(async () => {
  if (!redisMissing) await server.start();
});
after(async () => {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

const drivers: { name: string; skip?: string; path: () => string; prefix?: string }[] = [
  { name: 'sqlite', path: () => join(dir, 'rotor.db') },
  { name: 'redis', ...(redisMissing ? { skip: redisMissing } : {}), path: () => server.url, prefix: `bk${process.pid}:` },
];

for (const driver of drivers)
  describe(`openBackends (${driver.name})`, driver.skip ? { skip: driver.skip } : {}, () => {
    const open = (): Promise<Backends> => openBackends(driver.path(), driver.prefix ? { prefix: driver.prefix } : {});

    test('every aggregate written through one opening is read back through another', async () => {
      const a = await open();
      const b = await open();
      try {
        assert.deepEqual(Object.keys(a).sort(), ['close', 'connectionLog', 'fleet', 'orders', 'outbox', 'settings', 'usage', 'users']);
        await a.orders.putOrder(order('BK1', { orderNo: 'PBK1' }));
        await a.orders.addIntent({ merchantNo: 'BK1', operation: 'InstanceOpen', request: {}, reqId: 'q1' });
        await a.users.putUser({ name: 'ann', data: { x: 1 }, passwordHash: 'scrypt$h', state: 'ready' });
        await a.usage.addUsage([{ user: 'ann', bytes: 42 }]);
        await a.settings.kvSet('bk.setting', { on: true });
        const ev = await a.outbox.appendEvent({ type: 't.bk', time: 1, data: { n: 1 } });
        await a.connectionLog().append([
          {
            id: 'bk-r1',
            user: 'ann',
            session: null,
            listener: 'http',
            target: 'a.example:443',
            node: null,
            exit: '127.0.0.1',
            bytesUp: 1,
            bytesDown: 2,
            startedAt: 1000,
            durationMs: 1,
            result: 'ok',
            reason: 'closed',
            retries: 0,
            hedges: 0,
          },
        ]);

        assert.equal((await b.orders.getOrder('PBK1'))?.appOrderNo, 'BK1');
        assert.equal((await b.orders.getJournal('BK1'))?.reqId, 'q1');
        assert.deepEqual((await b.users.getUser('ann'))?.data, { x: 1 });
        assert.equal((await b.usage.getUsage('ann'))?.usedBytes, 42);
        assert.deepEqual(await b.settings.kvGet('bk.setting'), { on: true });
        assert.ok(ev);
        assert.deepEqual(
          (await b.outbox.listEvents()).map((e) => e.id),
          [ev.id],
        );
        assert.deepEqual(
          (await b.connectionLog().query({ limit: 10 })).map((r) => r.id),
          ['bk-r1'],
        );
      } finally {
        await a.close();
        await b.close();
      }
    });

    test(`the fleet's shared state is ${driver.name === 'redis' ? 'there' : 'absent'}`, async () => {
      const a = await open();
      try {
        if (driver.name === 'redis') assert.ok(a.fleet);
        else assert.equal(a.fleet, undefined);
      } finally {
        await a.close();
      }
    });

    test('close() closes every backend (STORE_UNAVAILABLE), and closing twice is fine', async () => {
      const a = await open();
      await a.close();
      await a.close();
      const calls: [string, () => Promise<unknown>][] = [
        ['orders', () => a.orders.listOrders()],
        ['users', () => a.users.listUsers()],
        ['usage', () => a.usage.listUsage()],
        ['settings', () => a.settings.kvGet('x')],
        ['outbox', () => a.outbox.listEvents()],
      ];
      for (const [name, call] of calls)
        await assert.rejects(call, (err: unknown) => err instanceof StoreError && err.code === 'STORE_UNAVAILABLE', name);
    });

    test('settleOpen: the open records of a daemon that ended without a stop become lost, bytes kept, once', async () => {
      const a = await open();
      await a.connectionLog().append([record('so-open', 'open', 500), record('so-ok', 'ok', 700)]);
      // Gone without writing its connections' ends (as a SIGKILL leaves them).
      await a.close();
      const b = await open();
      try {
        const log = b.connectionLog();
        assert.equal(await log.settleOpen(), 1);
        const rows = await log.query({ limit: 1000 });
        const byId = new Map(rows.map((r) => [r.id, r]));
        assert.deepEqual(byId.get('so-open'), { ...record('so-open', 'lost', 500), reason: LOST_REASON });
        assert.deepEqual(byId.get('so-ok'), record('so-ok', 'ok', 700));
        assert.deepEqual(await log.footprint(), { records: rows.length, bytes: rows.reduce((n, r) => n + recordSize(r), 0) }, 'bytes held');
        assert.equal(await log.settleOpen(), 0, 'settled once');
        // Its connection's end, written late (a daemon that was only stalled), still replaces it.
        await log.append([record('so-open', 'ok', 900)]);
        assert.equal((await log.query({ limit: 1000 })).find((r) => r.id === 'so-open')?.bytesDown, 900);
      } finally {
        await b.close();
      }
    });

    if (driver.name === 'redis')
      test("settleOpen on a store a fleet shares: a running peer's open records stay open while its lease is renewed", async () => {
        // A lease of 1 s: with 300 ms a loaded machine stalled this process past a lease's life, so the peer's lease
        // lapsed while it ran and a background settling took its record before the assertions could.
        const options = { prefix: `${driver.prefix}peer:`, aliveTtlMs: 1_000 };
        const peer = await openBackends(driver.path(), options);
        const me = await openBackends(driver.path(), options);
        try {
          await peer.connectionLog().append([record('peer-open', 'open', 100)]);
          const log = me.connectionLog();
          // Two and a half lease lives: a lease not renewed would have lapsed twice over.
          const start = Date.now();
          while (Date.now() - start < 2.5 * options.aliveTtlMs) {
            assert.equal(await log.settleOpen(), 0);
            await new Promise((r) => setTimeout(r, 50));
          }
          assert.equal((await log.query({ limit: 10 }))[0]?.result, 'open');
          // The peer stops: its lease is given up, and what it left open is lost at the next settling.
          await peer.close();
          assert.equal(await log.settleOpen(), 1);
          assert.equal((await log.query({ limit: 10 }))[0]?.result, 'lost');
        } finally {
          await Promise.allSettled([peer.close(), me.close()]);
        }
      });
  });

function record(id: string, result: RecordResult, bytesDown: number): ConnectionRecord {
  return {
    id,
    user: 'ann',
    session: null,
    listener: 'socks5',
    target: 'a.example:443',
    node: 'socks5://sub@127.0.0.1:9000',
    bytesUp: 10,
    bytesDown,
    startedAt: 2000,
    durationMs: 5,
    result,
    reason: null,
    retries: 0,
    hedges: 0,
  };
}
