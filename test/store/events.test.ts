// The event outbox of both store drivers (src/store/events.ts): once-only markers under concurrency, listing
// since an id, claims that keep a second worker off an event, retries, delivery, markers forgotten, pruning.
// Runs on both drivers (test/store/ files pick their drivers themselves).
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';
import type { Store } from '../../src/store/index.ts';
import { openTestStore, type TestDriver } from '../support/store.ts';

for (const driver of ['sqlite', 'redis'] satisfies TestDriver[])
  describe(`event outbox (${driver})`, () => {
    let store: Store;
    beforeEach(async () => {
      store = await openTestStore(':memory:', { driver });
    });
    afterEach(async () => {
      await store.close();
    });

    test('a marker admits one event, also when 20 appends race', async () => {
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          store.appendEvent({ type: 'user.quota.80', time: 1000 + i, data: { i }, marker: 'quota:80:alice:total' }),
        ),
      );
      const written = results.filter((r) => r !== undefined);
      assert.equal(written.length, 1);
      assert.equal((await store.listEvents()).length, 1);
      // A marker is per key: another threshold is another event.
      assert.ok(await store.appendEvent({ type: 'user.quota.100', time: 2000, data: {}, marker: 'quota:100:alice:total' }));
      // Forgotten, the marker admits again.
      await store.clearMarker('quota:80:alice:total');
      assert.ok(await store.appendEvent({ type: 'user.quota.80', time: 3000, data: {}, marker: 'quota:80:alice:total' }));
    });

    test('list since an id, oldest first, bounded; data round-trips', async () => {
      const ids: number[] = [];
      for (let i = 0; i < 5; i++)
        ids.push((await store.appendEvent({ type: 'order.final', time: 10 + i, data: { n: i, list: [], big: 2 ** 40 } }))!.id);
      assert.deepEqual(
        ids,
        [...ids].sort((a, b) => a - b),
      );
      const page = await store.listEvents({ since: ids[1], limit: 2 });
      assert.deepEqual(
        page.map((e) => e.id),
        [ids[2], ids[3]],
      );
      assert.deepEqual(page[0]!.data, { n: 2, list: [], big: 2 ** 40 });
      assert.equal(page[0]!.type, 'order.final');
      assert.equal(page[0]!.time, 12);
      assert.equal(page[0]!.deliveredAt, null);
    });

    test('claims: a claimed event is not handed out again until its claim ends; failures retry; delivered is done', async () => {
      const a = (await store.appendEvent({ type: 't', time: 100, data: 1 }))!;
      const b = (await store.appendEvent({ type: 't', time: 100, data: 2 }))!;
      const notSent = (await store.appendEvent({ type: 't', time: 100, data: 3, deliver: false }))!;
      const first = await store.claimEvents(200, 1000, 10);
      assert.deepEqual(
        first.map((e) => e.id),
        [a.id, b.id],
        'due, oldest first; never-to-send excluded',
      );
      assert.deepEqual(await store.claimEvents(300, 1000, 10), [], 'claimed by someone else');
      await store.settleEvent(a.id, { deliveredAt: 400 });
      await store.settleEvent(b.id, { error: 'HTTP 500', nextAttemptAt: 2000 });
      assert.deepEqual(await store.claimEvents(1500, 1000, 10), [], 'b waits for its retry time');
      const again = await store.claimEvents(2000, 1000, 10);
      assert.deepEqual(
        again.map((e) => e.id),
        [b.id],
      );
      assert.equal(again[0]!.attempts, 1);
      assert.equal(again[0]!.lastError, 'HTTP 500');
      // A claim whose worker died runs out: due again.
      assert.deepEqual(
        (await store.claimEvents(3001, 1000, 10)).map((e) => e.id),
        [b.id],
      );
      const listed = await store.listEvents();
      assert.equal(listed.find((e) => e.id === a.id)!.deliveredAt, 400);
      assert.equal(listed.find((e) => e.id === a.id)!.attempts, 1);
      assert.equal(listed.find((e) => e.id === notSent.id)!.nextAttemptAt, null);
    });

    test('prune drops old delivered and never-sent events and expired markers; keeps what is pending', async () => {
      const delivered = (await store.appendEvent({ type: 't', time: 100, data: 1 }))!;
      const pending = (await store.appendEvent({ type: 't', time: 100, data: 2 }))!;
      await store.appendEvent({ type: 't', time: 100, data: 3, deliver: false });
      await store.settleEvent(delivered.id, { deliveredAt: 150 });
      const now = Date.now();
      assert.ok(await store.appendEvent({ type: 'm', time: now, data: null, marker: 'short', markerExpiresAt: now + 1 }));
      assert.ok(await store.appendEvent({ type: 'm', time: now, data: null, marker: 'kept' }));
      await new Promise((r) => setTimeout(r, 5));
      const dropped = await store.pruneEvents({ deliveredBefore: 200, now: now + 10 });
      assert.equal(dropped, 2);
      const left = (await store.listEvents()).map((e) => e.id);
      assert.ok(left.includes(pending.id));
      assert.ok(!left.includes(delivered.id));
      assert.ok(await store.appendEvent({ type: 'm', time: now, data: null, marker: 'short' }), 'an expired marker is gone');
      assert.equal(await store.appendEvent({ type: 'm', time: now, data: null, marker: 'kept' }), undefined);
    });
  });
