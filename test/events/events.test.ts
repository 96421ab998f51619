// The events component over a real store (SQLite, and Redis in the runner's redis pass) and a real HTTP
// receiver: quota thresholds once per (user, period, threshold) even across a second watcher (a restart or
// another daemon), signed bodies, retries until a 2xx, expiry and low-balance events, the order.final emitter.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { afterEach, beforeEach, describe, test } from 'node:test';
import {
  balanceLowListener,
  Events,
  ExpiryWatcher,
  orderFinalEmitter,
  QuotaWatcher,
  verifySignature,
  WebhookDelivery,
  type QuotaReading,
} from '../../src/events/index.ts';
import type { Store } from '../../src/store/index.ts';
import { openTestStore } from '../support/store.ts';
import { waitFor } from '../support/wait.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook.ts';

const SECRET = 'hook-secret-9c1e';
const hmac = (body: string) => `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`;

describe('events', () => {
  let store: Store;
  let receiver: WebhookReceiver;
  let delivery: WebhookDelivery;
  let events: Events;

  beforeEach(async () => {
    store = await openTestStore();
    receiver = await startWebhookReceiver(500);
    delivery = new WebhookDelivery({
      store,
      url: receiver.url,
      secret: SECRET,
      retryBaseMs: 20,
      retryMaxMs: 100,
      pollMs: 20,
      timeoutMs: 2000,
    });
    events = new Events({ store, deliver: true, onAppended: () => delivery.nudge() });
    delivery.start();
  });
  afterEach(async () => {
    await delivery.stop();
    await receiver.close();
    await store.close();
  });

  test('user.quota.80 and .100: retried until a 2xx, delivered once each, signed; a second watcher adds nothing', async () => {
    const readings: QuotaReading[] = [{ user: 'alice', periodKey: 'total', usedBytes: 0, limitBytes: 1000 }];
    const watcher = new QuotaWatcher({ read: () => readings, events, intervalMs: 10 });
    await watcher.check();
    readings[0]!.usedBytes = 850;
    await watcher.check();
    await waitFor(() => (receiver.deliveries.length >= 2 ? true : undefined), 5000, 'failed attempts at the receiver');
    readings[0]!.usedBytes = 1000;
    await watcher.check();
    await watcher.check();
    receiver.answer = 200;
    // Settled in the store after the receiver answered: wait for the store, not the receiver.
    await waitFor(
      async () => ((await store.listEvents()).filter((e) => e.deliveredAt !== null).length >= 2 ? true : undefined),
      5000,
      'both events delivered',
    );
    // A second watcher (another daemon, or this one restarted) sees the same usage: the markers hold.
    const second = new QuotaWatcher({ read: () => readings, events, intervalMs: 10 });
    await second.check();
    assert.deepEqual(second.stats, { attempts: 2, emitted: 0 });
    assert.deepEqual(watcher.stats, { attempts: 2, emitted: 2 });
    // Nothing more arrives: no redelivery of a delivered event.
    const settledCount = receiver.deliveries.length;
    await delivery.runOnce();
    assert.equal(receiver.deliveries.length, settledCount);

    const accepted = receiver.accepted();
    assert.deepEqual(accepted.map((e) => e.type).sort(), ['user.quota.100', 'user.quota.80']);
    assert.equal(new Set(accepted.map((e) => e.id)).size, 2);
    for (const d of receiver.deliveries) {
      assert.equal(d.signature, hmac(d.body), 'X-Rotor-Signature is the HMAC-SHA256 of the raw body');
      assert.ok(verifySignature(d.body, SECRET, d.signature));
    }
    assert.ok(
      receiver.deliveries.some((d) => d.status === 500),
      'the receiver refused first',
    );
    const e80 = accepted.find((e) => e.type === 'user.quota.80')!;
    assert.deepEqual(e80.data, { user: 'alice', period: 'total', threshold: 80, usedBytes: 850, limitBytes: 1000 });
    assert.match(e80.time, /^\d{4}-\d\d-\d\dT/);
    const listed = await store.listEvents();
    assert.ok(listed.every((e) => e.deliveredAt !== null));
    assert.ok(listed.find((e) => e.type === 'user.quota.80')!.attempts >= 2);
  });

  test('a new period arms the thresholds again; unlimited users never cross', async () => {
    receiver.answer = 200;
    const readings: QuotaReading[] = [
      { user: 'bob', periodKey: '2026-11-23', usedBytes: 900, limitBytes: 1000 },
      { user: 'carol', periodKey: 'total', usedBytes: 10 ** 12, limitBytes: -1 },
    ];
    const watcher = new QuotaWatcher({ read: () => readings, events, intervalMs: 10 });
    await watcher.check();
    readings[0] = { user: 'bob', periodKey: '2026-11-24', usedBytes: 950, limitBytes: 1000 };
    await watcher.check();
    const types = (await store.listEvents()).map((e) => `${e.type}/${(e.data as { period: string }).period}`);
    assert.deepEqual(types, ['user.quota.80/2026-11-23', 'user.quota.80/2026-11-24']);
  });

  test('user.expired once per expiry; balance.low once per low spell; order.final once per order', async () => {
    receiver.answer = 200;
    let now = 1_000_000;
    const users = [{ user: 'dave', expiresAt: 1_000_500 as number | null }];
    const expiry = new ExpiryWatcher({ read: () => users, events, now: () => now });
    await expiry.check();
    now = 1_000_600;
    await expiry.check();
    await expiry.check();
    await new ExpiryWatcher({ read: () => users, events, now: () => now }).check();
    users[0]!.expiresAt = 1_000_700;
    now = 1_000_800;
    await expiry.check();

    const low = balanceLowListener(events, 100);
    const balance = (mb: number) => ({
      account: 'shop1',
      productNo: 'P1',
      balanceMb: mb,
      balanceBytes: mb * 1_048_576,
      hasBalance: mb > 0,
      ipTotal: undefined,
    });
    low(balance(500));
    low(balance(50));
    low(balance(40));
    await waitFor(async () => ((await store.listEvents()).some((e) => e.type === 'balance.low') ? true : undefined), 5000, 'balance.low');
    // Another daemon (its own listener) sees the same low spell: no second event.
    balanceLowListener(events, 100)(balance(30));
    low(balance(800));
    await new Promise((r) => setTimeout(r, 30));
    low(balance(0));

    const final = orderFinalEmitter(events);
    const order = {
      appOrderNo: 'm1',
      orderNo: 'o1',
      type: 1,
      status: 3,
      amount: '1.00',
      count: 1,
      request: {},
      createdAt: 0,
      updatedAt: 0,
    };
    await final(order);
    await final(order);

    await waitFor(
      async () => ((await store.listEvents()).every((e) => e.deliveredAt !== null) ? true : undefined),
      5000,
      'every event delivered',
    );
    const list = await store.listEvents();
    const expired = list.filter((e) => e.type === 'user.expired').map((e) => (e.data as { expiresAt: string }).expiresAt);
    assert.deepEqual(expired, [new Date(1_000_500).toISOString(), new Date(1_000_700).toISOString()]);
    const lows = list.filter((e) => e.type === 'balance.low').map((e) => e.data as { balanceMb: number; exhausted: boolean });
    assert.deepEqual(
      lows.map((l) => [l.balanceMb, l.exhausted]),
      [
        [50, false],
        [0, true],
      ],
    );
    assert.equal(list.filter((e) => e.type === 'order.final').length, 1);
    assert.equal(receiver.accepted().length, list.length);
  });
});
