// The store's contract every driver must keep, aggregate by aggregate (orders, instances, journal, callbacks,
// usage, settings, users; each test reaches its aggregate through the backends components get), run for
// SQLite and Redis (test/store/contract-sqlite.test.ts, test/store/redis.test.ts): the single home of the
// shared semantics, including reading back through a second handle on the same data and two handles racing.
// The outbox's is test/store/events.test.ts, the connection log's test/connlog/store|bounds, the fleet
// state's test/store/fleet-state.test.ts. Driver files test only what is their own.
import { test, describe } from 'node:test';
import { BATCH_WRITER_TTL_MS } from '../../src/store/batch-marks.ts';
import assert from 'node:assert/strict';
import {
  StoreConflictError,
  StoreError,
  UNRESOLVED_STATES,
  type InstanceRecord,
  type OrderRecord,
  type Store,
  type StoredUser,
  type Backends,
  backendsOf,
} from '../../src/store/index.ts';

export interface StoreFactory {
  /**
   * A store over the data set named `space`: the same space gives another handle on the same data (a
   * reopen, or a second daemon); a new space starts empty.
   */
  open(space: string, options?: { now?: () => number }): Promise<Store>;
  /** Set when the driver cannot run here (the suite is skipped with this reason). */
  skip?: string;
  /**
   * The writers' marks of `space` made `ms` older, for a driver whose marks are timed by a clock of the store's
   * own (Redis TIME) that the injected `now` does not move.
   */
  ageMarks?(space: string, ms: number): Promise<void>;
}

export const order = (appOrderNo: string, over: Partial<OrderRecord> = {}): OrderRecord => ({
  appOrderNo,
  orderNo: null,
  type: 1,
  status: 1,
  amount: null,
  count: 1,
  request: { appOrderNo, params: [{ productNo: 'P1', count: 1 }] },
  createdAt: 1000,
  updatedAt: 1000,
  ...over,
});

export const instance = (instanceNo: string, over: Partial<InstanceRecord> = {}): InstanceRecord => ({
  instanceNo,
  orderNo: 'O1',
  productNo: 'P1',
  status: 3,
  ip: '127.0.0.1',
  port: 20000,
  username: 'u',
  pwd: 'secret-pw',
  protocol: '1',
  userExpired: 1_900_000_000,
  raw: { instanceNo },
  updatedAt: 1,
  ...over,
});

let spaces = 0;
const fresh = () => `c${process.pid}x${++spaces}`;

export function storeContract(name: string, factory: StoreFactory): void {
  const options = factory.skip ? { skip: factory.skip } : {};
  // Through the backends components get (src/store/backends.ts): each check uses only its aggregate's.
  const open = async (space: string, opts?: { now?: () => number }): Promise<Backends> => backendsOf(await factory.open(space, opts));
  describe(`Store contract: ${name}`, options, () => {
    test('everything written is read back through another handle', async () => {
      const space = fresh();
      let t = 5000;
      const s = await open(space, { now: () => t });
      await s.orders.putOrder(order('RA1', { orderNo: 'PO1', status: 3, amount: '12.50', createdAt: 1 }));
      await s.orders.putOrder(order('RA2', { createdAt: 2 }));
      await s.orders.putInstances([instance('I1'), instance('I2', { status: 11 })]);
      await s.orders.addIntent({ merchantNo: 'RA2', operation: 'InstanceOpen', request: { appOrderNo: 'RA2', list: [] }, reqId: 'req-1' });
      t = 6000;
      await s.orders.updateJournal('RA2', { state: 'sent', sent: true });
      await s.orders.recordCallback({ type: 'order', no: 'PO1', op: '1' }, 7000);
      await s.usage.addUsage([{ user: 'alice', bytes: 100 }]);
      await s.usage.setLimit('alice', 1_000_000);
      await s.settings.kvSet('whitelist:shop1:DYN', ['127.0.0.1']);
      await s.close();

      const r = await open(space);
      assert.deepEqual(await r.orders.getOrder('PO1'), order('RA1', { orderNo: 'PO1', status: 3, amount: '12.50', createdAt: 1 }));
      assert.equal((await r.orders.getOrder('RA1'))?.orderNo, 'PO1');
      assert.equal(await r.orders.getOrder('nope'), undefined);
      assert.deepEqual(
        (await r.orders.listOrders()).map((o) => o.appOrderNo),
        ['RA2', 'RA1'],
      );
      assert.deepEqual(
        (await r.orders.listOrders({ open: true })).map((o) => o.appOrderNo),
        ['RA2'],
      );
      assert.deepEqual(
        (await r.orders.listOrders({ statuses: [3] })).map((o) => o.appOrderNo),
        ['RA1'],
      );
      assert.deepEqual((await r.orders.listOrders({ type: 2 })).length, 0);
      assert.deepEqual(
        (await r.orders.listOrders({ limit: 1, offset: 1 })).map((o) => o.appOrderNo),
        ['RA1'],
      );
      assert.deepEqual(
        (await r.orders.countOrders()).sort((a, b) => a.status - b.status),
        [
          { type: 1, status: 1, count: 1 },
          { type: 1, status: 3, count: 1 },
        ],
      );
      assert.deepEqual(await r.orders.getInstance('I1'), instance('I1'));
      assert.deepEqual(
        (await r.orders.listInstances({ statuses: [3] })).map((i) => i.instanceNo),
        ['I1'],
      );
      assert.deepEqual(
        (await r.orders.listInstances({ orderNo: 'O1', productNo: 'P1' })).map((i) => i.instanceNo),
        ['I1', 'I2'],
      );
      assert.deepEqual(
        (await r.orders.countInstances()).sort((a, b) => Number(a.status) - Number(b.status)),
        [
          { status: 3, count: 1 },
          { status: 11, count: 1 },
        ],
      );
      const j = await r.orders.getJournal('RA2');
      assert.equal(j?.state, 'sent');
      assert.equal(j?.reqId, 'req-1');
      assert.equal(j?.operation, 'InstanceOpen');
      assert.equal(j?.attempts, 1);
      assert.equal(j?.createdAt, 5000);
      assert.equal(j?.updatedAt, 6000);
      assert.equal(j?.orderNo, null);
      assert.equal(j?.result, null);
      // Payloads come back exactly (an empty array stays an array).
      assert.deepEqual(j?.request, { appOrderNo: 'RA2', list: [] });
      assert.deepEqual(
        (await r.orders.listJournal(UNRESOLVED_STATES)).map((e) => e.merchantNo),
        ['RA2'],
      );
      assert.deepEqual(await r.orders.listCallbacks({ processed: false }), [
        { type: 'order', no: 'PO1', op: '1', receivedAt: 7000, count: 1, processed: false },
      ]);
      assert.deepEqual(await r.usage.getUsage('alice'), { user: 'alice', usedBytes: 100, limitBytes: 1_000_000, updatedAt: 6000 });
      assert.deepEqual(await r.settings.kvGet('whitelist:shop1:DYN'), ['127.0.0.1']);
      await r.close();
    });

    test('orders: upsert replaces by merchant number and keeps createdAt', async () => {
      const s = await open(fresh());
      await s.orders.putOrder(order('RB1', { createdAt: 10 }));
      await s.orders.putOrder(order('RB1', { orderNo: 'PB1', status: 2, amount: '1.5', createdAt: 99, updatedAt: 20 }));
      const o = await s.orders.getOrder('PB1');
      assert.equal(o?.status, 2);
      assert.equal(o?.amount, '1.5');
      assert.equal(o?.createdAt, 10);
      assert.equal(o?.updatedAt, 20);
      assert.equal((await s.orders.listOrders()).length, 1);
      assert.equal((await s.orders.listOrders({ limit: 0 })).length, 0);
      // Finishing an order takes it out of the open listing; nulls replace values.
      await s.orders.putOrder(order('RB1', { orderNo: 'PB1', status: 3, amount: null, count: null, updatedAt: 30 }));
      assert.deepEqual(await s.orders.listOrders({ open: true }), []);
      const done = await s.orders.getOrder('RB1');
      assert.equal(done?.amount, null);
      assert.equal(done?.count, null);
      // The platform number of another order is refused.
      await assert.rejects(s.orders.putOrder(order('RB2', { orderNo: 'PB1' })));
      // A merchant number that equals another order's platform number: the merchant number wins.
      await s.orders.putOrder(order('PB1', { createdAt: 5 }));
      assert.equal((await s.orders.getOrder('PB1'))?.appOrderNo, 'PB1');
      await s.close();
    });

    test('instances: change keeps the number and replaces the connection details', async () => {
      const s = await open(fresh());
      await s.orders.putInstances([instance('I9')]);
      await s.orders.putInstances([instance('I9', { ip: '127.0.0.2', port: 3000, pwd: 'new' })]);
      await s.orders.putInstances([]);
      const i = await s.orders.getInstance('I9');
      assert.equal(i?.ip, '127.0.0.2');
      assert.equal(i?.port, 3000);
      assert.equal(i?.pwd, 'new');
      assert.equal(await s.orders.getInstance('I404'), undefined);
      assert.equal((await s.orders.listInstances()).length, 1);
      assert.equal((await s.orders.listInstances({ expiresBefore: 1_800_000_000 })).length, 0);
      assert.equal((await s.orders.listInstances({ expiresBefore: 1_900_000_000 })).length, 1);
      await s.orders.putInstances([instance('I8', { userExpired: null }), instance('I7')]);
      assert.deepEqual(
        (await s.orders.listInstances({ limit: 2 })).map((x) => x.instanceNo),
        ['I7', 'I8'],
      );
      assert.deepEqual(
        (await s.orders.listInstances({ expiresBefore: 2_000_000_000 })).map((x) => x.instanceNo),
        ['I7', 'I9'],
      );
      await s.close();
    });

    test('journal: a merchant number is journaled once; states move; unresolved listing', async () => {
      const s = await open(fresh());
      await s.orders.addIntent({ merchantNo: 'RC1', operation: 'InstanceOpen', request: {}, reqId: 'q1' });
      await assert.rejects(
        s.orders.addIntent({ merchantNo: 'RC1', operation: 'InstanceOpen', request: {}, reqId: 'q2' }),
        (e: unknown) => e instanceof StoreConflictError && e.code === 'STORE_CONFLICT',
      );
      assert.equal((await s.orders.getJournal('RC1'))?.reqId, 'q1');
      await s.orders.addIntent({ merchantNo: 'RC2', operation: 'InstanceRenew', request: {}, reqId: 'q3' });
      await s.orders.addIntent({ merchantNo: 'RC3', operation: 'InstanceRelease', request: {}, reqId: 'q4' });
      await s.orders.updateJournal('RC1', { state: 'accepted', result: { orderNo: 'P1' }, orderNo: 'P1', sent: true });
      await s.orders.updateJournal('RC2', { state: 'unknown', result: { code: 'TRANSPORT' }, sent: true });
      await s.orders.updateJournal('RC3', { state: 'rejected', result: { platformCode: 10002 }, sent: true });
      const one = await s.orders.getJournal('RC1');
      assert.equal(one?.orderNo, 'P1');
      assert.deepEqual(one?.result, { orderNo: 'P1' });
      // A patch without result/orderNo keeps them.
      await s.orders.updateJournal('RC1', { state: 'accepted' });
      assert.equal((await s.orders.getJournal('RC1'))?.orderNo, 'P1');
      assert.equal((await s.orders.getJournal('RC1'))?.attempts, 1);
      assert.deepEqual(
        (await s.orders.listJournal(UNRESOLVED_STATES)).map((e) => e.merchantNo),
        ['RC2'],
      );
      assert.deepEqual((await s.orders.listJournal(['rejected', 'accepted'])).map((e) => e.merchantNo).sort(), ['RC1', 'RC3']);
      assert.equal((await s.orders.listJournal()).length, 3);
      assert.deepEqual(await s.orders.listJournal([]), []);
      // Updating an entry that does not exist changes nothing.
      await s.orders.updateJournal('RC404', { state: 'sent', sent: true });
      assert.equal(await s.orders.getJournal('RC404'), undefined);
      await s.close();
    });

    test('callbacks: dedupe on (type, no, op), counted, processed flag', async () => {
      const s = await open(fresh());
      const key = { type: 'order', no: 'P1', op: '1' };
      assert.deepEqual(await s.orders.recordCallback(key, 1), { duplicate: false, processed: false });
      assert.deepEqual(await s.orders.recordCallback(key, 2), { duplicate: true, processed: false });
      await s.orders.markCallbackProcessed(key);
      assert.deepEqual(await s.orders.recordCallback(key, 3), { duplicate: true, processed: true });
      assert.deepEqual(await s.orders.recordCallback({ ...key, op: '2' }, 4), { duplicate: false, processed: false });
      assert.deepEqual(await s.orders.recordCallback({ type: 'instance', no: 'P1', op: '' }, 5), { duplicate: false, processed: false });
      const all = await s.orders.listCallbacks();
      assert.equal(all.length, 3);
      assert.equal(all[0]?.count, 3);
      assert.equal(all[0]?.receivedAt, 1);
      assert.deepEqual(
        (await s.orders.listCallbacks({ processed: false })).map((c) => c.op),
        ['2', ''],
      );
      assert.deepEqual(
        (await s.orders.listCallbacks({ processed: true })).map((c) => c.op),
        ['1'],
      );
      await s.close();
    });

    test('two handles on the same data: one callback and one intent win, usage adds up', async () => {
      const space = fresh();
      const a = await open(space);
      const b = await open(space);
      const key = { type: 'order', no: 'PX', op: '3' };
      const recorded = await Promise.all([a, b, a, b].map((s, i) => s.orders.recordCallback(key, 100 + i)));
      assert.equal(recorded.filter((r) => !r.duplicate).length, 1);
      assert.equal((await b.orders.listCallbacks())[0]?.count, 4);
      const intents = await Promise.allSettled(
        [a, b].map((s, i) => s.orders.addIntent({ merchantNo: 'RX1', operation: 'InstanceOpen', request: {}, reqId: `q${i}` })),
      );
      assert.equal(intents.filter((r) => r.status === 'fulfilled').length, 1);
      assert.equal(intents.filter((r) => r.status === 'rejected' && r.reason instanceof StoreConflictError).length, 1);
      await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).usage.addUsage([{ user: 'zed', bytes: 3 }])));
      assert.equal((await a.usage.getUsage('zed'))?.usedBytes, 60);
      await a.close();
      await b.close();
    });

    test('usage: batched adds, limits, unknown users, large values', async () => {
      const s = await open(fresh(), { now: () => 42 });
      await s.usage.addUsage([
        { user: 'alice', bytes: 10 },
        { user: 'bob', bytes: 5 },
        { user: 'alice', bytes: 7 },
      ]);
      await s.usage.addUsage([]);
      await s.usage.setLimit('carol', 2048);
      await s.usage.setLimit('alice', -1);
      assert.deepEqual(await s.usage.getUsage('alice'), { user: 'alice', usedBytes: 17, limitBytes: -1, updatedAt: 42 });
      assert.equal(await s.usage.getUsage('nobody'), undefined);
      assert.deepEqual(
        (await s.usage.listUsage()).map((u) => [u.user, u.usedBytes, u.limitBytes]),
        [
          ['alice', 17, -1],
          ['bob', 5, -1],
          ['carol', 0, 2048],
        ],
      );
      await s.usage.addUsage([{ user: 'bob', bytes: 10 * 2 ** 40 }]);
      assert.equal((await s.usage.getUsage('bob'))?.usedBytes, 10 * 2 ** 40 + 5);
      // Many at once: the rows that exist, in the order asked; limits for many keys, new ones at 0 used.
      await s.usage.setLimits([
        { user: 'bob', limitBytes: 4096 },
        { user: 'dan@day:2026-11-28', limitBytes: 512 },
      ]);
      await s.usage.setLimits([]);
      assert.deepEqual(
        (await s.usage.getUsages(['dan@day:2026-11-28', 'nobody', 'bob'])).map((u) => [u.user, u.usedBytes, u.limitBytes]),
        [
          ['dan@day:2026-11-28', 0, 512],
          ['bob', 10 * 2 ** 40 + 5, 4096],
        ],
      );
      assert.deepEqual(await s.usage.getUsages([]), []);
      await s.close();
    });

    test('usage: a batch id taken before adds nothing, on any handle, and the change feed sees the write once', async () => {
      const space = fresh();
      const a = await open(space);
      const b = await open(space);
      const batch = [
        { user: 'alice', bytes: 1_000 },
        { user: 'bob@day:2026-11-29', bytes: 20 },
      ];
      await a.usage.addUsage(batch, 'flush-1');
      // Written again (its first answer lost), here or through another handle: nothing more.
      await a.usage.addUsage(batch, 'flush-1');
      await b.usage.addUsage([{ user: 'alice', bytes: 1_000 }], 'flush-1');
      assert.equal((await b.usage.getUsage('alice'))?.usedBytes, 1_000);
      assert.equal((await b.usage.getUsage('bob@day:2026-11-29'))?.usedBytes, 20);
      // Another id, or none, is another write.
      await b.usage.addUsage([{ user: 'alice', bytes: 3 }], 'flush-2');
      await b.usage.addUsage([{ user: 'alice', bytes: 4 }]);
      await b.usage.addUsage([{ user: 'alice', bytes: 4 }]);
      assert.equal((await a.usage.getUsage('alice'))?.usedBytes, 1_011);
      // A skipped batch is no change for the feed's readers either.
      const first = await a.usage.usageChangedSince(undefined);
      await a.usage.addUsage(batch, 'flush-1');
      const next = await a.usage.usageChangedSince(first.cursor);
      if (!next.full) assert.deepEqual(next.rows, []);
      // A failing batch takes no id: written again once fixed, it is added.
      await assert.rejects(a.usage.addUsage([{ user: null as unknown as string, bytes: 1 }], 'flush-3'));
      await a.usage.addUsage([{ user: 'alice', bytes: 5 }], 'flush-3');
      assert.equal((await a.usage.getUsage('alice'))?.usedBytes, 1_016);
      await a.close();
      await b.close();
    });

    test('usage and the connection log: a batch written again after an outage of days (others writing meanwhile) adds nothing; one mark per writer', async () => {
      // A writer's batches are `<writer><seq>` (src/store/batch-marks.ts). The ids of an hour kept before let a write
      // retried after a longer outage count twice: another writer's write trimmed them.
      const HOUR = 3_600_000;
      let t = Date.UTC(2026, 10, 29, 12);
      const space = fresh();
      const s = await open(space, { now: () => t });
      const log = s.connectionLog();
      const rollup = (bytesDown: number) => [
        {
          user: 'outage',
          granularity: 'hour' as const,
          period: Date.UTC(2026, 10, 29, 11),
          bytesUp: 0,
          bytesDown,
          connections: 1,
          failures: 0,
        },
      ];
      const billed = async () =>
        (await log.usage({ granularity: 'hour', user: 'outage', from: Date.UTC(2026, 10, 29), to: Date.UTC(2026, 10, 30) })).reduce(
          (n, r) => n + r.bytesDown,
          0,
        );
      // Daemon A's writes land, their answers are lost, and A cannot reach the store for days.
      await s.usage.addUsage([{ user: 'outage', bytes: 700 }], 'daemonA.41');
      await log.append([], rollup(700), 'daemonA.41');
      // Daemon B writes on: two hours on, then twenty days on.
      for (const later of [2 * HOUR, 20 * 24 * HOUR]) {
        t += later;
        await s.usage.addUsage([{ user: 'other', bytes: 1 }], `daemonB.${later}`);
        await log.append([], [{ ...rollup(1)[0]!, user: 'other' }], `daemonB.${later}`);
      }
      // A is back: its batches written again as they were add nothing; its next ones add; an older number nothing.
      await s.usage.addUsage([{ user: 'outage', bytes: 700 }], 'daemonA.41');
      await log.append([], rollup(700), 'daemonA.41');
      assert.equal((await s.usage.getUsage('outage'))?.usedBytes, 700);
      assert.equal(await billed(), 700);
      await s.usage.addUsage([{ user: 'outage', bytes: 5 }], 'daemonA.42');
      await log.append([], rollup(5), 'daemonA.42');
      await s.usage.addUsage([{ user: 'outage', bytes: 9 }], 'daemonA.40');
      await log.append([], rollup(9), 'daemonA.40');
      assert.equal((await s.usage.getUsage('outage'))?.usedBytes, 705);
      assert.equal(await billed(), 705);
      // A writer silent for BATCH_WRITER_TTL_MS is forgotten by the next write (the marks stay one per live writer).
      t += BATCH_WRITER_TTL_MS + 1;
      await factory.ageMarks?.(space, BATCH_WRITER_TTL_MS + 1);
      await s.usage.addUsage([{ user: 'other', bytes: 1 }], 'daemonB.99999999999');
      await log.append([], [{ ...rollup(1)[0]!, user: 'other' }], 'daemonB.99999999999');
      await s.usage.addUsage([{ user: 'outage', bytes: 5 }], 'daemonA.42');
      await log.append([], rollup(5), 'daemonA.42');
      assert.equal((await s.usage.getUsage('outage'))?.usedBytes, 710);
      assert.equal(await billed(), 710);
      // An id that is not <writer><number> is refused before anything is written.
      await assert.rejects(s.usage.addUsage([{ user: 'outage', bytes: 1 }], 'no-number'));
      assert.equal((await s.usage.getUsage('outage'))?.usedBytes, 710);
      await s.close();
    });

    test('usage: a batch of 60,000 rows (a flush of that many users) is added, once under its id', async () => {
      const s = await open(fresh());
      const rows = Array.from({ length: 60_000 }, (_, i) => ({ user: `wide${i}`, bytes: i + 1 }));
      await s.usage.addUsage(rows, 'wide-1');
      await s.usage.addUsage(rows, 'wide-1');
      const got = await s.usage.getUsages(['wide0', 'wide29999', 'wide59999']);
      assert.deepEqual(
        got.map((u) => [u.user, u.usedBytes]),
        [
          ['wide0', 1],
          ['wide29999', 30_000],
          ['wide59999', 60_000],
        ],
      );
      await s.close();
    });

    test('usage: a failing batch leaves nothing half-applied', async () => {
      const s = await open(fresh());
      await s.usage.addUsage([{ user: 'alice', bytes: 1 }]);
      await assert.rejects(
        s.usage.addUsage([
          { user: 'alice', bytes: 5 },
          { user: null as unknown as string, bytes: 1 },
        ]),
      );
      assert.equal((await s.usage.getUsage('alice'))?.usedBytes, 1);
      await s.close();
    });

    test('kv: set, replace, list by prefix (literal, not a pattern), delete', async () => {
      const s = await open(fresh());
      await s.settings.kvSet('wl:a', { ip: '1' });
      await s.settings.kvSet('wl:b', { ip: '2' });
      await s.settings.kvSet('wl%x', 3);
      await s.settings.kvSet('wl*y', [4]);
      await s.settings.kvSet('wl:a', { ip: '9' });
      assert.deepEqual(await s.settings.kvList('wl:'), [
        { key: 'wl:a', value: { ip: '9' } },
        { key: 'wl:b', value: { ip: '2' } },
      ]);
      await s.settings.kvDelete('wl:a');
      await s.settings.kvDelete('never-set');
      assert.equal(await s.settings.kvGet('wl:a'), undefined);
      assert.equal((await s.settings.kvList('wl')).length, 3);
      assert.deepEqual(await s.settings.kvList('wl*'), [{ key: 'wl*y', value: [4] }]);
      await s.close();
    });

    test('users: put (if absent, if version), read through another handle, list, delete, follow changes', async () => {
      const space = fresh();
      const s = await open(space, { now: () => 42 });
      const a = await s.users.putUser(
        {
          name: 'cust1',
          data: { mainAccount: 'shop1', quota: { bytes: 5, period: 'day' }, list: [] },
          passwordHash: 'scrypt$x',
          state: 'creating',
        },
        { ifAbsent: true },
      );
      assert.equal(a.updatedAt, 42);
      await assert.rejects(
        s.users.putUser({ name: 'cust1', data: {}, passwordHash: 'h', state: 'ready' }, { ifAbsent: true }),
        (e: unknown) => e instanceof StoreConflictError,
      );
      await assert.rejects(
        s.users.putUser({ name: 'cust1', data: {}, passwordHash: 'h', state: 'ready' }, { ifVersion: a.version + 100 }),
        (e: unknown) => e instanceof StoreConflictError,
      );
      const b = await s.users.putUser(
        { name: 'cust1', data: { mainAccount: 'shop2', list: [] }, passwordHash: 'scrypt$y', state: 'ready' },
        { ifVersion: a.version },
      );
      assert.ok(b.version > a.version);
      const mark = b.version;
      await s.users.putUser({ name: 'bob', data: { n: 1 }, passwordHash: 'h2', state: 'ready' });

      const r = await open(space);
      assert.deepEqual(await r.users.getUser('cust1'), {
        name: 'cust1',
        data: { mainAccount: 'shop2', list: [] },
        passwordHash: 'scrypt$y',
        state: 'ready',
        version: b.version,
        updatedAt: 42,
      });
      assert.equal(await r.users.getUser('nobody'), undefined);
      assert.deepEqual(
        (await r.users.listUsers()).map((u) => u.name),
        ['bob', 'cust1'],
      );
      const since = await r.users.usersChangedSince(mark);
      assert.deepEqual(
        since.changed.map((u) => u.name),
        ['bob'],
      );
      assert.deepEqual(since.deleted, []);
      assert.equal(await r.users.deleteUser('cust1'), true);
      assert.equal(await r.users.deleteUser('cust1'), false);
      const after = await s.users.usersChangedSince(since.version);
      assert.deepEqual(after.changed, []);
      assert.deepEqual(after.deleted, ['cust1']);
      assert.ok(after.version > since.version);
      assert.deepEqual(
        (await s.users.listUsers()).map((u) => u.name),
        ['bob'],
      );
      // Re-created: no longer reported deleted.
      await s.users.putUser({ name: 'cust1', data: {}, passwordHash: 'h', state: 'ready' }, { ifAbsent: true });
      const again = await s.users.usersChangedSince(since.version);
      assert.deepEqual(again.deleted, []);
      assert.deepEqual(
        again.changed.map((u) => u.name),
        ['cust1'],
      );
      await s.close();
      await r.close();
    });

    test('users: deletedAmong names the deleted names (tombstones) among those asked, until one is written again', async () => {
      const space = fresh();
      const s = await open(space);
      const r = await open(space);
      for (const name of ['gone1', 'gone2', 'kept']) await s.users.putUser({ name, data: {}, passwordHash: 'h', state: 'ready' });
      assert.deepEqual([...(await s.users.deletedAmong(['gone1', 'kept', 'never']))], []);
      await s.users.deleteUser('gone1');
      await s.users.deleteUser('gone2');
      await s.users.deleteUser('never'); // nothing to delete: no tombstone
      assert.deepEqual([...(await r.users.deletedAmong(['never', 'gone2', 'kept', 'gone1']))].sort(), ['gone1', 'gone2']);
      assert.deepEqual([...(await r.users.deletedAmong([]))], []);
      await r.users.putUser({ name: 'gone2', data: {}, passwordHash: 'h', state: 'ready' }, { ifAbsent: true });
      assert.deepEqual([...(await s.users.deletedAmong(['gone1', 'gone2']))], ['gone1']);
      await s.close();
      await r.close();
    });

    test('users: putUsers writes in order as one unit; a conflict fails alone; a write it cannot make fails them all', async () => {
      const space = fresh();
      const s = await open(space, { now: () => 7 });
      const x = await s.users.putUser({ name: 'x', data: { n: 0 }, passwordHash: 'h0', state: 'ready' });
      const answer = await s.users.putUsers([
        { user: { name: 'a', data: { n: 1 }, passwordHash: 'h1', state: 'creating' }, ifAbsent: true },
        { user: { name: 'x', data: { n: 2 }, passwordHash: 'h2', state: 'ready' }, ifAbsent: true },
        { user: { name: 'x', data: { n: 3 }, passwordHash: 'h3', state: 'ready' }, ifVersion: x.version },
        { user: { name: 'b', data: { n: 4 }, passwordHash: 'h4', state: 'ready' } },
        // Sees the write before it in the same call.
        { user: { name: 'b', data: { n: 5 }, passwordHash: 'h5', state: 'ready' }, ifAbsent: true },
        { user: { name: 'x', data: { n: 6 }, passwordHash: 'h6', state: 'ready' }, ifVersion: x.version },
      ]);
      assert.deepEqual(
        answer.map((r) => (r instanceof StoreConflictError ? 'conflict' : r.data)),
        [{ n: 1 }, 'conflict', { n: 3 }, { n: 4 }, 'conflict', 'conflict'],
      );
      const [a, , x3, b] = answer as StoredUser[];
      assert.ok(x.version < a!.version && a!.version < x3!.version && x3!.version < b!.version, 'versions in the order written');
      assert.equal(a!.updatedAt, 7);
      assert.deepEqual(await s.users.putUsers([]), []);

      const r = await open(space);
      assert.deepEqual(await r.users.getUser('a'), {
        name: 'a',
        data: { n: 1 },
        passwordHash: 'h1',
        state: 'creating',
        version: a!.version,
        updatedAt: 7,
      });
      assert.deepEqual((await r.users.getUser('x'))?.data, { n: 3 });
      assert.deepEqual((await r.users.getUser('b'))?.data, { n: 4 });
      const since = await r.users.usersChangedSince(x.version);
      assert.deepEqual(since.changed.map((u) => u.name).sort(), ['a', 'b', 'x']);
      assert.equal(since.version, b!.version);

      // A write the store cannot make (data that has no JSON form): the call rejects and none of it is written.
      await assert.rejects(
        s.users.putUsers([
          { user: { name: 'c', data: { n: 7 }, passwordHash: 'h7', state: 'ready' } },
          { user: { name: 'd', data: { n: 8n }, passwordHash: 'h8', state: 'ready' } },
        ]),
      );
      assert.equal(await r.users.getUser('c'), undefined);
      assert.equal(await r.users.getUser('d'), undefined);
      assert.equal((await r.users.usersChangedSince(0)).version, b!.version, 'no version spent');
      await s.close();
      await r.close();
    });

    test('a closed store fails with STORE_UNAVAILABLE; close twice is fine', async () => {
      const s = await open(fresh());
      await s.close();
      await s.close();
      await assert.rejects(s.settings.kvGet('x'), (e: unknown) => e instanceof StoreError && e.code === 'STORE_UNAVAILABLE');
      await assert.rejects(s.orders.putOrder(order('R1')), (e: unknown) => e instanceof StoreError && e.code === 'STORE_UNAVAILABLE');
    });
  });
}
