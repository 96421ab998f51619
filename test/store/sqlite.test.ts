import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { openStore, SqliteStore, migrate, MIGRATIONS, StoreConflictError, StoreError, UNRESOLVED_STATES, type InstanceRecord, type OrderRecord } from '../../src/store/index.ts';

let dir: string;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'rotor-store-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

const order = (appOrderNo: string, over: Partial<OrderRecord> = {}): OrderRecord => ({
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

const instance = (instanceNo: string, over: Partial<InstanceRecord> = {}): InstanceRecord => ({
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

describe('SqliteStore on a file', () => {
  test('creates the parent folder, uses WAL and records migrations once', async () => {
    const path = join(dir, 'nested', 'a.db');
    const s = new SqliteStore(path);
    assert.equal(existsSync(path), true);
    assert.equal(s.journalMode(), 'wal');
    assert.deepEqual(s.appliedMigrations(), MIGRATIONS.map((m) => m.id));
    await s.close();
    const again = new SqliteStore(path);
    assert.deepEqual(again.appliedMigrations(), MIGRATIONS.map((m) => m.id));
    await again.close();
    // Running the migrations by hand again applies nothing.
    const db = new Database(path);
    assert.deepEqual(migrate(db), []);
    const count = db.prepare('SELECT COUNT(*) AS n FROM migrations').get() as { n: number };
    assert.equal(count.n, MIGRATIONS.length);
    db.close();
  });

  test('a later migration is applied on reopen, earlier ones are not re-run', async () => {
    const path = join(dir, 'mig.db');
    const s1 = new SqliteStore(path);
    await s1.kvSet('k', 1);
    await s1.close();
    const extra = [...MIGRATIONS, { id: 999, name: 'test column', sql: 'ALTER TABLE kv ADD COLUMN note TEXT' }];
    const s2 = new SqliteStore(path, { migrations: extra });
    assert.deepEqual(s2.appliedMigrations(), [...MIGRATIONS.map((m) => m.id), 999]);
    assert.equal(await s2.kvGet('k'), 1);
    await s2.close();
    const s3 = new SqliteStore(path, { migrations: extra });
    assert.deepEqual(s3.appliedMigrations(), [...MIGRATIONS.map((m) => m.id), 999]);
    await s3.close();
  });

  test('everything written is read back after reopening', async () => {
    const path = join(dir, 'b.db');
    let t = 5000;
    const s = new SqliteStore(path, { now: () => t });
    await s.putOrder(order('RA1', { orderNo: 'PO1', status: 3, amount: '12.50', createdAt: 1 }));
    await s.putOrder(order('RA2', { createdAt: 2 }));
    await s.putInstances([instance('I1'), instance('I2', { status: 11 })]);
    await s.addIntent({ merchantNo: 'RA2', operation: 'InstanceOpen', request: { appOrderNo: 'RA2' }, reqId: 'req-1' });
    t = 6000;
    await s.updateJournal('RA2', { state: 'sent', sent: true });
    await s.recordCallback({ type: 'order', no: 'PO1', op: '1' }, 7000);
    await s.addUsage([{ user: 'alice', bytes: 100 }]);
    await s.setLimit('alice', 1_000_000);
    await s.kvSet('whitelist:shop1:DYN', ['127.0.0.1']);
    await s.close();

    const r = openStore(path);
    assert.deepEqual(await r.getOrder('PO1'), order('RA1', { orderNo: 'PO1', status: 3, amount: '12.50', createdAt: 1 }));
    assert.equal((await r.getOrder('RA1'))?.orderNo, 'PO1');
    assert.equal(await r.getOrder('nope'), undefined);
    assert.deepEqual((await r.listOrders()).map((o) => o.appOrderNo), ['RA2', 'RA1']);
    assert.deepEqual((await r.listOrders({ open: true })).map((o) => o.appOrderNo), ['RA2']);
    assert.deepEqual((await r.listOrders({ statuses: [3] })).map((o) => o.appOrderNo), ['RA1']);
    assert.deepEqual(await r.countOrders(), [
      { type: 1, status: 1, count: 1 },
      { type: 1, status: 3, count: 1 },
    ]);
    const i1 = await r.getInstance('I1');
    assert.deepEqual(i1, instance('I1'));
    assert.deepEqual((await r.listInstances({ statuses: [3] })).map((i) => i.instanceNo), ['I1']);
    assert.deepEqual((await r.countInstances()).sort((a, b) => Number(a.status) - Number(b.status)), [
      { status: 3, count: 1 },
      { status: 11, count: 1 },
    ]);
    const j = await r.getJournal('RA2');
    assert.equal(j?.state, 'sent');
    assert.equal(j?.reqId, 'req-1');
    assert.equal(j?.attempts, 1);
    assert.equal(j?.createdAt, 5000);
    assert.equal(j?.updatedAt, 6000);
    assert.deepEqual(j?.request, { appOrderNo: 'RA2' });
    assert.deepEqual((await r.listJournal(UNRESOLVED_STATES)).map((e) => e.merchantNo), ['RA2']);
    assert.deepEqual(await r.listCallbacks({ processed: false }), [{ type: 'order', no: 'PO1', op: '1', receivedAt: 7000, count: 1, processed: false }]);
    assert.deepEqual(await r.getUsage('alice'), { user: 'alice', usedBytes: 100, limitBytes: 1_000_000, updatedAt: (await r.getUsage('alice'))!.updatedAt });
    assert.deepEqual(await r.kvGet('whitelist:shop1:DYN'), ['127.0.0.1']);
    await r.close();
  });
});

describe('SqliteStore semantics', () => {
  test('orders: upsert replaces by merchant number and keeps createdAt', async () => {
    const s = openStore(':memory:');
    await s.putOrder(order('RB1', { createdAt: 10 }));
    await s.putOrder(order('RB1', { orderNo: 'PB1', status: 2, createdAt: 99, updatedAt: 20 }));
    const o = await s.getOrder('PB1');
    assert.equal(o?.status, 2);
    assert.equal(o?.createdAt, 10);
    assert.equal(o?.updatedAt, 20);
    assert.equal((await s.listOrders()).length, 1);
    assert.equal((await s.listOrders({ limit: 0 })).length, 0);
    await s.close();
  });

  test('instances: change keeps the number and replaces the connection details', async () => {
    const s = openStore(':memory:');
    await s.putInstances([instance('I9')]);
    await s.putInstances([instance('I9', { ip: '127.0.0.2', port: 3000, pwd: 'new' })]);
    const i = await s.getInstance('I9');
    assert.equal(i?.ip, '127.0.0.2');
    assert.equal(i?.port, 3000);
    assert.equal(i?.pwd, 'new');
    assert.equal((await s.listInstances()).length, 1);
    assert.deepEqual((await s.listInstances({ expiresBefore: 1_800_000_000 })).length, 0);
    assert.deepEqual((await s.listInstances({ expiresBefore: 1_900_000_000 })).length, 1);
    await s.close();
  });

  test('journal: a merchant number is journaled once; states move; unresolved listing', async () => {
    const s = openStore(':memory:');
    await s.addIntent({ merchantNo: 'RC1', operation: 'InstanceOpen', request: {}, reqId: 'q1' });
    await assert.rejects(s.addIntent({ merchantNo: 'RC1', operation: 'InstanceOpen', request: {}, reqId: 'q2' }), (e: unknown) => e instanceof StoreConflictError && e.code === 'STORE_CONFLICT');
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
    assert.deepEqual((await s.listJournal(UNRESOLVED_STATES)).map((e) => e.merchantNo), ['RC2']);
    assert.equal((await s.listJournal()).length, 3);
    assert.deepEqual(await s.listJournal([]), []);
    await s.close();
  });

  test('callbacks: dedupe on (type, no, op), counted, processed flag', async () => {
    const s = openStore(':memory:');
    const key = { type: 'order', no: 'P1', op: '1' };
    assert.deepEqual(await s.recordCallback(key, 1), { duplicate: false, processed: false });
    assert.deepEqual(await s.recordCallback(key, 2), { duplicate: true, processed: false });
    await s.markCallbackProcessed(key);
    assert.deepEqual(await s.recordCallback(key, 3), { duplicate: true, processed: true });
    // Another op for the same number is another event.
    assert.deepEqual(await s.recordCallback({ ...key, op: '2' }, 4), { duplicate: false, processed: false });
    assert.deepEqual(await s.recordCallback({ type: 'instance', no: 'P1', op: '' }, 5), { duplicate: false, processed: false });
    const all = await s.listCallbacks();
    assert.equal(all.length, 3);
    assert.equal(all[0]?.count, 3);
    assert.equal(all[0]?.receivedAt, 1);
    assert.deepEqual((await s.listCallbacks({ processed: false })).map((c) => c.op), ['2', '']);
    await s.close();
  });

  test('usage: batched adds in one transaction, limits, unknown users', async () => {
    const s = openStore(':memory:', { now: () => 42 });
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
    // Large values beyond 2^32 survive.
    await s.addUsage([{ user: 'bob', bytes: 10 * 2 ** 40 }]);
    assert.equal((await s.getUsage('bob'))?.usedBytes, 10 * 2 ** 40 + 5);
    await s.close();
  });

  test('usage: a failing batch leaves nothing half-applied', async () => {
    const s = openStore(':memory:');
    await s.addUsage([{ user: 'alice', bytes: 1 }]);
    await assert.rejects(s.addUsage([{ user: 'alice', bytes: 5 }, { user: null as unknown as string, bytes: 1 }]));
    assert.equal((await s.getUsage('alice'))?.usedBytes, 1);
    await s.close();
  });

  test('kv: set, replace, list by prefix (literal, not a pattern), delete', async () => {
    const s = openStore(':memory:');
    await s.kvSet('wl:a', { ip: '1' });
    await s.kvSet('wl:b', { ip: '2' });
    await s.kvSet('wl%x', 3);
    await s.kvSet('wl:a', { ip: '9' });
    assert.deepEqual(await s.kvList('wl:'), [
      { key: 'wl:a', value: { ip: '9' } },
      { key: 'wl:b', value: { ip: '2' } },
    ]);
    await s.kvDelete('wl:a');
    assert.equal(await s.kvGet('wl:a'), undefined);
    assert.equal((await s.kvList('wl')).length, 2);
    await s.close();
  });

  test('closed store and redis URLs fail with stable codes', async () => {
    const s = openStore(':memory:');
    await s.close();
    await s.close();
    await assert.rejects(s.kvGet('x'), (e: unknown) => e instanceof StoreError && e.code === 'STORE_UNAVAILABLE');
    assert.throws(() => openStore('redis://127.0.0.1:6379'), (e: unknown) => e instanceof StoreError && e.code === 'STORE_UNSUPPORTED');
    assert.throws(() => openStore(join(dir, 'not-a-dir-file.db', 'x.db').replace('not-a-dir-file.db', '\0bad')), (e: unknown) => e instanceof StoreError && e.code === 'STORE_UNAVAILABLE');
  });
});
