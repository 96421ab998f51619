// Store.putOrderWithEvent on both drivers: an order and its order.final event are written together or not at
// all (SQLite transaction, one Redis script), the event still obeys its once-only marker, and a refused order
// (its platform number belongs to another order) leaves no event behind.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';
import { StoreConflictError, type OrderRecord, type Store } from '../../src/store/index.ts';
import { openTestStore, type TestDriver } from '../support/store.ts';

const order = (appOrderNo: string, orderNo: string, status: number, updatedAt = 1): OrderRecord => ({
  appOrderNo,
  orderNo,
  type: 1,
  status,
  amount: '1.00',
  count: 1,
  request: { productNo: 'P' },
  createdAt: 0,
  updatedAt,
});
const finalEvent = (appOrderNo: string, status: number) => ({
  type: 'order.final',
  time: 5,
  data: { appOrderNo, status },
  marker: `order.final:${appOrderNo}`,
});

for (const driver of ['sqlite', 'redis'] satisfies TestDriver[])
  describe(`an order with its event (${driver})`, () => {
    let store: Store;
    beforeEach(async () => {
      store = await openTestStore(':memory:', { driver });
    });
    afterEach(async () => {
      await store.close();
    });

    test('both are written; the marker keeps the event single; the order is written all the same', async () => {
      await store.putOrder(order('A1', 'O1', 1));
      const e = await store.putOrderWithEvent(order('A1', 'O1', 3, 2), finalEvent('A1', 3));
      assert.ok(e, 'the event was written');
      assert.equal(e.type, 'order.final');
      assert.deepEqual(e.data, { appOrderNo: 'A1', status: 3 });
      assert.equal((await store.getOrder('A1'))?.status, 3);
      assert.equal((await store.getOrder('O1'))?.appOrderNo, 'A1', 'the platform number still finds it');
      assert.deepEqual(
        (await store.listOrders({ open: true })).map((o) => o.appOrderNo),
        [],
        'final: no longer open',
      );
      const again = await store.putOrderWithEvent(order('A1', 'O1', 3, 9), finalEvent('A1', 3));
      assert.equal(again, undefined, 'marker taken: no second event');
      assert.equal((await store.getOrder('A1'))?.updatedAt, 9);
      const listed = await store.listEvents();
      assert.equal(listed.length, 1);
      assert.equal(listed[0]!.id, e.id);
    });

    test('a refused order writes no event', async () => {
      await store.putOrder(order('A1', 'O1', 3));
      // Redis names it StoreConflictError; SQLite's putOrder has always surfaced the UNIQUE constraint itself.
      await assert.rejects(
        store.putOrderWithEvent(order('A2', 'O1', 3), finalEvent('A2', 3)),
        (err: unknown) => err instanceof StoreConflictError || /UNIQUE constraint failed: orders.order_no/.test(String(err)),
      );
      assert.deepEqual(await store.listEvents(), []);
      assert.equal(await store.getOrder('A2'), undefined);
      // The marker was not taken either: the order, once right, is announced.
      assert.ok(await store.putOrderWithEvent(order('A2', 'O2', 3), finalEvent('A2', 3)));
    });
  });
