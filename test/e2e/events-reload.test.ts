// events.* follow a reload (SIGHUP): a webhook configured after start starts delivering, a new URL and secret
// take over for the next POST, a removed URL stops delivery (events are then listed only), and checkMs and
// balanceLowMb apply without a restart. A real daemon, real HTTP receivers, users made through the admin API
// with an expiry in the past (the expiry watcher's `user.expired`).
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Config } from '../../src/config/index.ts';
import { startGateway, waitFor, type Gateway } from './harness.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook.ts';

const signed = (body: string, secret: string) => `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
const PAST = '2020-01-01T00:00:00Z';

interface ListedEvent {
  type: string;
  data: { user?: string };
  delivery: { delivered: boolean; attempts: number };
}

function expiredFor(r: WebhookReceiver, user: string): { body: string; signature: string | undefined } | undefined {
  return r.deliveries.find((d) => {
    const e = JSON.parse(d.body) as { type: string; data: { user?: string } };
    return e.type === 'user.expired' && e.data.user === user;
  });
}

describe('events settings follow a reload', () => {
  let gw: Gateway;
  let one: WebhookReceiver;
  let two: WebhookReceiver;
  before(async () => {
    one = await startWebhookReceiver();
    two = await startWebhookReceiver();
    // Checked once a minute at start: an event seen within seconds shows the reloaded checkMs at work.
    gw = await startGateway({ config: { events: { checkMs: 60_000 } } });
  });
  after(async () => {
    await gw?.close();
    await one?.close();
    await two?.close();
  });

  const reload = (events: Partial<Config['events']>): Promise<void> =>
    gw.daemon.reload({ ...gw.daemon.config, events: { ...gw.daemon.config.events, ...events } });
  const expiredUser = async (name: string): Promise<void> => {
    const r = await gw.admin('/v1/users', { body: { name, password: `${name}-pass`, mainAccount: 'shop1', expiresAt: PAST } });
    assert.equal(r.status, 201, JSON.stringify(r.body));
  };

  test('a webhook set, changed and removed by reloads', async () => {
    assert.equal(gw.daemon.events.delivery, undefined, 'no webhook at start');

    await reload({ webhookUrl: one.url, secret: 'secret-one', checkMs: 50 });
    assert.ok(gw.daemon.events.delivery, 'the reload started a worker');
    await expiredUser('exp1');
    const d1 = await waitFor('user.expired of exp1 at the first URL', () => expiredFor(one, 'exp1'), 10_000, 25);
    assert.equal(d1.signature, signed(d1.body, 'secret-one'));

    await reload({ webhookUrl: two.url, secret: 'secret-two', checkMs: 50 });
    await expiredUser('exp2');
    const d2 = await waitFor('user.expired of exp2 at the second URL', () => expiredFor(two, 'exp2'), 10_000, 25);
    assert.equal(d2.signature, signed(d2.body, 'secret-two'), 'signed with the new secret');
    assert.equal(expiredFor(one, 'exp2'), undefined, 'the old URL gets nothing more');

    await reload({ webhookUrl: '', secret: '', checkMs: 50 });
    assert.equal(gw.daemon.events.delivery, undefined, 'the reload stopped the worker');
    await expiredUser('exp3');
    const listed = await waitFor(
      'user.expired of exp3 listed',
      async () => (await gw.admin<ListedEvent[]>('/v1/events')).body.find((e) => e.type === 'user.expired' && e.data.user === 'exp3'),
      10_000,
      25,
    );
    assert.equal(listed.delivery.delivered, false);
    assert.equal(listed.delivery.attempts, 0, 'listed only: nothing tried to send it');
    assert.equal(expiredFor(one, 'exp3') ?? expiredFor(two, 'exp3'), undefined);
  });
});
