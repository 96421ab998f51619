// The Store contract every driver must keep, run for SQLite and Redis (test/store/contract-sqlite.test.ts,
// test/store/redis.test.ts): the single home of the shared semantics, including reading back through a
// second handle on the same data and two handles racing. Driver files test only what is their own.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import {
  StoreConflictError,
  StoreError,
  UNRESOLVED_STATES,
  type InstanceRecord,
  type OrderRecord,
  type Store,
} from '../../src/store/index.ts';

export interface StoreFactory {
  /**
   * A store over the data set named `space`: the same space gives another handle on the same data (a
   * reopen, or a second daemon); a new space starts empty.
   */
  open(space: string, options?: { now?: () => number }): Promise<Store>;
  /** Set when the driver cannot run here (the suite is skipped with this reason). */
  skip?: string;
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
  describe(`Store contract: ${name}`, options, () => {
    test('everything written is read back through another handle', async () => {
      const space = fresh();
      let t = 5000;
      const s = await factory.open(space, { now: () => t });
      await s.putOrder(order('RA1', { orderNo: 'PO1', status: 3, amount: '12.50', createdAt: 1 }));
      await s.putOrder(order('RA2', { createdAt: 2 }));
      await s.putInstances([instance('I1'), instance('I2', { status: 11 })]);
      await s.addIntent({ merchantNo: 'RA2', operation: 'InstanceOpen', request: { appOrderNo: 'RA2', list: [] }, reqId: 'req-1' });
      t = 6000;
      await s.updateJournal('RA2', { state: 'sent', sent: true });
      await s.recordCallback({ type: 'order', no: 'PO1', op: '1' }, 7000);
      await s.addUsage([{ user: 'alice', bytes: 100 }]);
      await s.setLimit('alice', 1_000_000);
      await s.kvSet('whitelist:shop1:DYN', ['127.0.0.1']);
      await s.close();

      const r = await factory.open(space);
      assert.deepEqual(await r.getOrder('PO1'), order('RA1', { orderNo: 'PO1', status: 3, amount: '12.50', createdAt: 1 }));
      assert.equal((await r.getOrder('RA1'))?.orderNo, 'PO1');
      assert.equal(await r.getOrder('nope'), undefined);
      assert.deepEqual(
        (await r.listOrders()).map((o) => o.appOrderNo),
        ['RA2', 'RA1'],
      );
      assert.deepEqual(
        (await r.listOrders({ open: true })).map((o) => o.appOrderNo),
        ['RA2'],
      );
      assert.deepEqual(
        (await r.listOrders({ statuses: [3] })).map((o) => o.appOrderNo),
        ['RA1'],
      );
      assert.deepEqual((await r.listOrders({ type: 2 })).length, 0);
      assert.deepEqual(
        (await r.listOrders({ limit: 1, offset: 1 })).map((o) => o.appOrderNo),
        ['RA1'],
      );
      assert.deepEqual(
        (await r.countOrders()).sort((a, b) => a.status - b.status),
        [
          { type: 1, status: 1, count: 1 },
          { type: 1, status: 3, count: 1 },
        ],
      );
      assert.deepEqual(await r.getInstance('I1'), instance('I1'));
      assert.deepEqual(
        (await r.listInstances({ statuses: [3] })).map((i) => i.instanceNo),
        ['I1'],
      );
      assert.deepEqual(
        (await r.listInstances({ orderNo: 'O1', productNo: 'P1' })).map((i) => i.instanceNo),
        ['I1', 'I2'],
      );
      assert.deepEqual(
        (await r.countInstances()).sort((a, b) => Number(a.status) - Number(b.status)),
        [
          { status: 3, count: 1 },
          { status: 11, count: 1 },
        ],
      );
      const j = await r.getJournal('RA2');
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
        (await r.listJournal(UNRESOLVED_STATES)).map((e) => e.merchantNo),
        ['RA2'],
      );
      assert.deepEqual(await r.listCallbacks({ processed: false }), [
        { type: 'order', no: 'PO1', op: '1', receivedAt: 7000, count: 1, processed: false },
      ]);
      assert.deepEqual(await r.getUsage('alice'), { user: 'alice', usedBytes: 100, limitBytes: 1_000_000, updatedAt: 6000 });
      assert.deepEqual(await r.kvGet('whitelist:shop1:DYN'), ['127.0.0.1']);
      await r.close();
    });

    test('orders: upsert replaces by merchant number and keeps createdAt', async () => {
      const s = await factory.open(fresh());
      await s.putOrder(order('RB1', { createdAt: 10 }));
      await s.putOrder(order('RB1', { orderNo: 'PB1', status: 2, amount: '1.5', createdAt: 99, updatedAt: 20 }));
      const o = await s.getOrder('PB1');
      assert.equal(o?.status, 2);
      assert.equal(o?.amount, '1.5');
      assert.equal(o?.createdAt, 10);
      assert.equal(o?.updatedAt, 20);
      assert.equal((await s.listOrders()).length, 1);
      assert.equal((await s.listOrders({ limit: 0 })).length, 0);
      // Finishing an order takes it out of the open listing; nulls replace values.
      await s.putOrder(order('RB1', { orderNo: 'PB1', status: 3, amount: null, count: null, updatedAt: 30 }));
      assert.deepEqual(await s.listOrders({ open: true }), []);
      const done = await s.getOrder('RB1');
      assert.equal(done?.amount, null);
      assert.equal(done?.count, null);
      // The platform number of another order is refused.
      await assert.rejects(s.putOrder(order('RB2', { orderNo: 'PB1' })));
      // A merchant number that equals another order's platform number: the merchant number wins.
      await s.putOrder(order('PB1', { createdAt: 5 }));
      assert.equal((await s.getOrder('PB1'))?.appOrderNo, 'PB1');
      await s.close();
    });

    test('instances: change keeps the number and replaces the connection details', async () => {
      const s = await factory.open(fresh());
      await s.putInstances([instance('I9')]);
      await s.putInstances([instance('I9', { ip: '127.0.0.2', port: 3000, pwd: 'new' })]);
      await s.putInstances([]);
      const i = await s.getInstance('I9');
      assert.equal(i?.ip, '127.0.0.2');
      assert.equal(i?.port, 3000);
      assert.equal(i?.pwd, 'new');
      assert.equal(await s.getInstance('I404'), undefined);
      assert.equal((await s.listInstances()).length, 1);
      assert.equal((await s.listInstances({ expiresBefore: 1_800_000_000 })).length, 0);
      assert.equal((await s.listInstances({ expiresBefore: 1_900_000_000 })).length, 1);
      await s.putInstances([instance('I8', { userExpired: null }), instance('I7')]);
      assert.deepEqual(
        (await s.listInstances({ limit: 2 })).map((x) => x.instanceNo),
        ['I7', 'I8'],
      );
      assert.deepEqual(
        (await s.listInstances({ expiresBefore: 2_000_000_000 })).map((x) => x.instanceNo),
        ['I7', 'I9'],
      );
      await s.close();
    });

    test('journal: a merchant number is journaled once; states move; unresolved listing', async () => {
      const s = await factory.open(fresh());
      await s.addIntent({ merchantNo: 'RC1', operation: 'InstanceOpen', request: {}, reqId: 'q1' });
      await assert.rejects(
        s.addIntent({ merchantNo: 'RC1', operation: 'InstanceOpen', request: {}, reqId: 'q2' }),
        (e: unknown) => e instanceof StoreConflictError && e.code === 'STORE_CONFLICT',
      );
      assert.equal((await s.getJournal('RC1'))?.reqId, 'q1');
      await s.addIntent({ merchantNo: 'RC2', operation: 'InstanceRenew', request: {}, reqId: 'q3' });
      await s.addIntent({ merchantNo: 'RC3', operation: 'InstanceRelease', request: {}, reqId: 'q4' });
      await s.updateJournal('RC1', { state: 'accepted', result: { orderNo: 'P1' }, orderNo: 'P1', sent: true });
      await s.updateJournal('RC2', { state: 'unknown', result: { code: 'TRANSPORT' }, sent: true });
      await s.updateJournal('RC3', { state: 'rejected', result: { platformCode: 10002 }, sent: true });
      const one = await s.getJournal('RC1');
      assert.equal(one?.orderNo, 'P1');
      assert.deepEqual(one?.result, { orderNo: 'P1' });
      // A patch without result/orderNo keeps them.
      await s.updateJournal('RC1', { state: 'accepted' });
      assert.equal((await s.getJournal('RC1'))?.orderNo, 'P1');
      assert.equal((await s.getJournal('RC1'))?.attempts, 1);
      assert.deepEqual(
        (await s.listJournal(UNRESOLVED_STATES)).map((e) => e.merchantNo),
        ['RC2'],
      );
      assert.deepEqual((await s.listJournal(['rejected', 'accepted'])).map((e) => e.merchantNo).sort(), ['RC1', 'RC3']);
      assert.equal((await s.listJournal()).length, 3);
      assert.deepEqual(await s.listJournal([]), []);
      // Updating an entry that does not exist changes nothing.
      await s.updateJournal('RC404', { state: 'sent', sent: true });
      assert.equal(await s.getJournal('RC404'), undefined);
      await s.close();
    });

    test('callbacks: dedupe on (type, no, op), counted, processed flag', async () => {
      const s = await factory.open(fresh());
      const key = { type: 'order', no: 'P1', op: '1' };
      assert.deepEqual(await s.recordCallback(key, 1), { duplicate: false, processed: false });
      assert.deepEqual(await s.recordCallback(key, 2), { duplicate: true, processed: false });
      await s.markCallbackProcessed(key);
      assert.deepEqual(await s.recordCallback(key, 3), { duplicate: true, processed: true });
      assert.deepEqual(await s.recordCallback({ ...key, op: '2' }, 4), { duplicate: false, processed: false });
      assert.deepEqual(await s.recordCallback({ type: 'instance', no: 'P1', op: '' }, 5), { duplicate: false, processed: false });
      const all = await s.listCallbacks();
      assert.equal(all.length, 3);
      assert.equal(all[0]?.count, 3);
      assert.equal(all[0]?.receivedAt, 1);
      assert.deepEqual(
        (await s.listCallbacks({ processed: false })).map((c) => c.op),
        ['2', ''],
      );
      assert.deepEqual(
        (await s.listCallbacks({ processed: true })).map((c) => c.op),
        ['1'],
      );
      await s.close();
    });

    test('two handles on the same data: one callback and one intent win, usage adds up', async () => {
      const space = fresh();
      const a = await factory.open(space);
      const b = await factory.open(space);
      const key = { type: 'order', no: 'PX', op: '3' };
      const recorded = await Promise.all([a, b, a, b].map((s, i) => s.recordCallback(key, 100 + i)));
      assert.equal(recorded.filter((r) => !r.duplicate).length, 1);
      assert.equal((await b.listCallbacks())[0]?.count, 4);
      const intents = await Promise.allSettled(
        [a, b].map((s, i) => s.addIntent({ merchantNo: 'RX1', operation: 'InstanceOpen', request: {}, reqId: `q${i}` })),
      );
      assert.equal(intents.filter((r) => r.status === 'fulfilled').length, 1);
      assert.equal(intents.filter((r) => r.status === 'rejected' && r.reason instanceof StoreConflictError).length, 1);
      await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).addUsage([{ user: 'zed', bytes: 3 }])));
      assert.equal((await a.getUsage('zed'))?.usedBytes, 60);
      await a.close();
      await b.close();
    });

    test('usage: batched adds, limits, unknown users, large values', async () => {
      const s = await factory.open(fresh(), { now: () => 42 });
      await s.addUsage([
        { user: 'alice', bytes: 10 },
        { user: 'bob', bytes: 5 },
        { user: 'alice', bytes: 7 },
      ]);
      await s.addUsage([]);
      await s.setLimit('carol', 2048);
      await s.setLimit('alice', -1);
      assert.deepEqual(await s.getUsage('alice'), { user: 'alice', usedBytes: 17, limitBytes: -1, updatedAt: 42 });
      assert.equal(await s.getUsage('nobody'), undefined);
      assert.deepEqual(
        (await s.listUsage()).map((u) => [u.user, u.usedBytes, u.limitBytes]),
        [
          ['alice', 17, -1],
          ['bob', 5, -1],
          ['carol', 0, 2048],
        ],
      );
      await s.addUsage([{ user: 'bob', bytes: 10 * 2 ** 40 }]);
      assert.equal((await s.getUsage('bob'))?.usedBytes, 10 * 2 ** 40 + 5);
      await s.close();
    });

    test('usage: a failing batch leaves nothing half-applied', async () => {
      const s = await factory.open(fresh());
      await s.addUsage([{ user: 'alice', bytes: 1 }]);
      await assert.rejects(
        s.addUsage([
          { user: 'alice', bytes: 5 },
          { user: null as unknown as string, bytes: 1 },
        ]),
      );
      assert.equal((await s.getUsage('alice'))?.usedBytes, 1);
      await s.close();
    });

    test('kv: set, replace, list by prefix (literal, not a pattern), delete', async () => {
      const s = await factory.open(fresh());
      await s.kvSet('wl:a', { ip: '1' });
      await s.kvSet('wl:b', { ip: '2' });
      await s.kvSet('wl%x', 3);
      await s.kvSet('wl*y', [4]);
      await s.kvSet('wl:a', { ip: '9' });
      assert.deepEqual(await s.kvList('wl:'), [
        { key: 'wl:a', value: { ip: '9' } },
        { key: 'wl:b', value: { ip: '2' } },
      ]);
      await s.kvDelete('wl:a');
      await s.kvDelete('never-set');
      assert.equal(await s.kvGet('wl:a'), undefined);
      assert.equal((await s.kvList('wl')).length, 3);
      assert.deepEqual(await s.kvList('wl*'), [{ key: 'wl*y', value: [4] }]);
      await s.close();
    });

    test('users: put (if absent, if version), read through another handle, list, delete, follow changes', async () => {
      const space = fresh();
      const s = await factory.open(space, { now: () => 42 });
      const a = await s.putUser(
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
        s.putUser({ name: 'cust1', data: {}, passwordHash: 'h', state: 'ready' }, { ifAbsent: true }),
        (e: unknown) => e instanceof StoreConflictError,
      );
      await assert.rejects(
        s.putUser({ name: 'cust1', data: {}, passwordHash: 'h', state: 'ready' }, { ifVersion: a.version + 100 }),
        (e: unknown) => e instanceof StoreConflictError,
      );
      const b = await s.putUser(
        { name: 'cust1', data: { mainAccount: 'shop2', list: [] }, passwordHash: 'scrypt$y', state: 'ready' },
        { ifVersion: a.version },
      );
      assert.ok(b.version > a.version);
      const mark = b.version;
      await s.putUser({ name: 'bob', data: { n: 1 }, passwordHash: 'h2', state: 'ready' });

      const r = await factory.open(space);
      assert.deepEqual(await r.getUser('cust1'), {
        name: 'cust1',
        data: { mainAccount: 'shop2', list: [] },
        passwordHash: 'scrypt$y',
        state: 'ready',
        version: b.version,
        updatedAt: 42,
      });
      assert.equal(await r.getUser('nobody'), undefined);
      assert.deepEqual(
        (await r.listUsers()).map((u) => u.name),
        ['bob', 'cust1'],
      );
      const since = await r.usersChangedSince(mark);
      assert.deepEqual(
        since.changed.map((u) => u.name),
        ['bob'],
      );
      assert.deepEqual(since.deleted, []);
      assert.equal(await r.deleteUser('cust1'), true);
      assert.equal(await r.deleteUser('cust1'), false);
      const after = await s.usersChangedSince(since.version);
      assert.deepEqual(after.changed, []);
      assert.deepEqual(after.deleted, ['cust1']);
      assert.ok(after.version > since.version);
      assert.deepEqual(
        (await s.listUsers()).map((u) => u.name),
        ['bob'],
      );
      // Re-created: no longer reported deleted.
      await s.putUser({ name: 'cust1', data: {}, passwordHash: 'h', state: 'ready' }, { ifAbsent: true });
      const again = await s.usersChangedSince(since.version);
      assert.deepEqual(again.deleted, []);
      assert.deepEqual(
        again.changed.map((u) => u.name),
        ['cust1'],
      );
      await s.close();
      await r.close();
    });

    test('a closed store fails with STORE_UNAVAILABLE; close twice is fine', async () => {
      const s = await factory.open(fresh());
      await s.close();
      await s.close();
      await assert.rejects(s.kvGet('x'), (e: unknown) => e instanceof StoreError && e.code === 'STORE_UNAVAILABLE');
      await assert.rejects(s.putOrder(order('R1')), (e: unknown) => e instanceof StoreError && e.code === 'STORE_UNAVAILABLE');
    });
  });
}
