// Events end to end (issue 15 "Done when"): a webhook receiver (a real HTTP server in the test) gets
// user.quota.80 and user.quota.100 exactly once each with a valid signature, from a real daemon whose user
// downloads past its limit through the proxy; GET /v1/events lists them (token, percent-encoded path,
// absolute-form target, bad input); the same holds when the daemon is SIGKILLed between the threshold and the
// delivery (the receiver refuses until the kill, the restarted daemon delivers from the store); and two
// daemons on one Redis make each threshold event once.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { connect } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { curl, startGateway, viaSocks5h, type Gateway } from './harness.ts';
import {
  cleanup,
  rawConfig,
  spawnDaemon,
  startTarget as startBytesTarget,
  tempDir,
  writeConfigFile,
  type BytesTarget,
} from './limits-harness.ts';
import { testRedisUrl, TEST_SLICE_BYTES } from '../support/store.ts';
import { waitFor } from '../support/wait.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook.ts';

const SECRET = 'e2e-hook-secret';
const TOKEN = 'events-admin-token';
const LIMIT = 400_000;
const signed = (body: string) => `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`;

interface ListedEvent {
  id: number;
  type: string;
  data: { user: string; threshold: number };
  delivery: { delivered: boolean; attempts: number };
}

function quotaTypes(receiver: WebhookReceiver): string[] {
  return receiver
    .accepted()
    .map((e) => e.type)
    .filter((t) => t.startsWith('user.quota.'))
    .sort();
}

function assertSigned(receiver: WebhookReceiver): void {
  assert.ok(receiver.deliveries.length > 0);
  for (const d of receiver.deliveries) assert.equal(d.signature, signed(d.body), 'X-Rotor-Signature: sha256=<HMAC of the raw body>');
}

/** A raw HTTP/1.1 GET on the admin port, so the request line is exactly what the test says. */
function rawGet(port: number, target: string, token?: string, host = `127.0.0.1:${port}`): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    let text = '';
    s.on('data', (c: Buffer) => (text += c.toString('utf8')));
    s.once('error', reject);
    s.once('close', () => {
      const split = text.indexOf('\r\n\r\n');
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), body: split >= 0 ? text.slice(split + 4) : '' });
    });
    s.write(`GET ${target} HTTP/1.1\r\nHost: ${host}\r\n${token ? `Authorization: Bearer ${token}\r\n` : ''}Connection: close\r\n\r\n`);
  });
}

describe('events: a daemon, a user past its quota, a webhook', () => {
  let gw: Gateway;
  let target: BytesTarget;
  let receiver: WebhookReceiver;

  before(async () => {
    receiver = await startWebhookReceiver(200);
    target = await startBytesTarget();
    gw = await startGateway({
      config: {
        admin: { token: TOKEN },
        users: [{ name: 'alice', password: 'alice-pass', mainAccount: 'shop1', limitBytes: LIMIT }],
        events: { webhookUrl: receiver.url, secret: SECRET, checkMs: 100, pollMs: 100, retryBaseMs: 50 },
      },
    });
  });
  after(async () => {
    await gw.close();
    await target.close();
    await receiver.close();
  });

  test('user.quota.80 and user.quota.100 arrive once each, signed', async () => {
    const r = await curl([...viaSocks5h(gw.ports.socks5, 'alice', 'alice-pass'), target.url(2_000_000), '-o', '/dev/null']);
    assert.notEqual(r.exitCode, 0, 'the download is cut at the limit');
    await waitFor(() => (quotaTypes(receiver).length >= 2 ? true : undefined), 15_000, 'both quota events');
    // More rounds of the watcher change nothing.
    const rounds = gw.daemon.events.quota.stats.attempts;
    await waitFor(
      async () =>
        gw.daemon.events.quota.stats.attempts === rounds &&
        (await gw.admin<ListedEvent[]>('/v1/events')).body.every((e) => e.delivery.delivered)
          ? true
          : undefined,
      5000,
      'settled',
    );
    assert.deepEqual(quotaTypes(receiver), ['user.quota.100', 'user.quota.80']);
    assertSigned(receiver);
    assert.equal(await gw.metric('rotor_events_total', { type: 'user.quota.80' }), 1);
    assert.equal(await gw.metric('rotor_events_total', { type: 'user.quota.100' }), 1);
    assert.ok((await gw.metric('rotor_webhook_deliveries_total', { result: 'delivered' })) >= 2);
    const e100 = receiver.accepted().find((e) => e.type === 'user.quota.100')!;
    assert.equal(e100.data.user, 'alice');
    assert.equal(e100.data.limitBytes, LIMIT);
    assert.ok((e100.data.usedBytes as number) >= LIMIT);
  });

  test('order.final: a static order placed through the admin API is announced once when it finishes', async () => {
    const opened = await gw.admin<{ appOrderNo: string }>('/v1/orders/open', {
      body: { productNo: 'STC-101-USA-SOCKS', count: 1, cycleTimes: 1 },
    });
    assert.equal(opened.status, 202, JSON.stringify(opened.body));
    const no = opened.body.appOrderNo;
    const mine = () => receiver.accepted().filter((e) => e.type === 'order.final' && e.data.appOrderNo === no);
    await waitFor(() => (mine().length > 0 ? true : undefined), 15_000, 'order.final at the receiver');
    // Reading the order again (a refresh from the platform) does not announce it again.
    await gw.admin(`/v1/orders/${no}`);
    await gw.admin(`/v1/orders/${no}`);
    const listed = (await gw.admin<ListedEvent[]>('/v1/events')).body.filter(
      (e) => e.type === 'order.final' && (e.data as unknown as { appOrderNo: string }).appOrderNo === no,
    );
    assert.equal(listed.length, 1);
    assert.equal(mine().length, 1);
    assert.equal(mine()[0]!.data.status, 3);
  });

  test('GET /v1/events lists them, pages with since, and keeps the admin rules', async () => {
    const all = await gw.admin<ListedEvent[]>('/v1/events');
    assert.equal(all.status, 200);
    const quota = all.body.filter((e) => e.type.startsWith('user.quota.'));
    assert.deepEqual(
      quota.map((e) => e.type),
      ['user.quota.80', 'user.quota.100'],
    );
    assert.ok(quota.every((e) => e.delivery.delivered && e.delivery.attempts === 1));
    const after80 = await gw.admin<ListedEvent[]>(`/v1/events?since=${quota[0]!.id}&limit=1`);
    assert.deepEqual(
      after80.body.map((e) => e.id),
      [all.body.find((e) => e.id > quota[0]!.id)!.id],
    );

    const port = gw.ports.admin;
    assert.equal((await rawGet(port, '/v1/events')).status, 401, 'no token');
    assert.equal((await rawGet(port, '/v1/events', 'wrong')).status, 401, 'bad token');
    const encoded = await rawGet(port, '/%76%31/events', TOKEN);
    assert.ok(encoded.status === 200 || encoded.status === 401 || encoded.status === 404, `percent-encoded path: ${encoded.status}`);
    assert.equal((await rawGet(port, '/%76%31/events')).status === 200, false, 'a percent-encoded path never skips the token');
    const absolute = await rawGet(port, `http://127.0.0.1:${port}/v1/events`, TOKEN);
    assert.equal(absolute.status, 200, 'absolute-form target');
    assert.equal(JSON.parse(absolute.body).length, all.body.length);
    assert.equal((await rawGet(port, `http://127.0.0.1:${port}/v1/events`)).status, 401, 'absolute form without a token');
    const foreign = await rawGet(port, 'http://x/v1/events', TOKEN, 'x');
    assert.ok(foreign.status >= 400 && foreign.status < 500, `absolute form naming another host: ${foreign.status}`);
    assert.notEqual((await rawGet(port, 'http://x/v1/events', undefined, 'x')).status, 200);
    const bad = await gw.admin<{ error: { code: string; message: string } }>('/v1/events?since=abc');
    assert.equal(bad.status, 400);
    assert.match(bad.body.error.message, /since/);
    assert.equal((await gw.admin('/v1/events?limit=0')).status, 400);
    assert.equal((await gw.admin('/v1/events?what=1')).status, 400);
    const doc = await gw.admin<{ paths: Record<string, { get?: { operationId?: string } }> }>('/docs/json');
    assert.equal(doc.body.paths['/v1/events']?.get?.operationId, 'listEvents');
  });
});

describe('events: SIGKILL between the threshold and the delivery', () => {
  after(cleanup);

  test('the receiver refuses, the daemon is killed, the restarted one delivers each event once', async () => {
    const receiver = await startWebhookReceiver(503);
    const target = await startBytesTarget();
    const dir = tempDir();
    const file = join(dir, 'rotor.yaml');
    writeConfigFile(file, {
      ...rawConfig(dir, [{ name: 'alice', password: 'alice-pass', mainAccount: 'shop1', limitBytes: LIMIT }], {
        accounts: { flushIntervalMs: 100 },
      }),
      // A POST's timeout bounds the claim a killed daemon leaves on an event (batch × timeout + 2 s).
      events: { webhookUrl: receiver.url, secret: SECRET, checkMs: 100, pollMs: 100, retryBaseMs: 100, retryMaxMs: 200, timeoutMs: 1000 },
    });
    const log = join(dir, 'daemon.log');
    let daemon = await spawnDaemon(file, log);
    try {
      const r = await curl([...viaSocks5h(daemon.ports.socks5, 'alice', 'alice-pass'), target.url(2_000_000), '-o', '/dev/null']);
      assert.notEqual(r.exitCode, 0);
      // Both events are in the outbox and have been offered (and refused) at least once.
      await waitFor(
        () => {
          const types = new Set(receiver.deliveries.map((d) => (JSON.parse(d.body) as { type: string }).type));
          return types.has('user.quota.80') && types.has('user.quota.100') ? true : undefined;
        },
        15_000,
        'both events offered',
      );
      assert.equal(receiver.accepted().length, 0);
      daemon.signal('SIGKILL');
      const gone = await daemon.exited;
      assert.equal(gone.signal, 'SIGKILL');

      receiver.answer = 200;
      daemon = await spawnDaemon(file, join(dir, 'daemon-restarted.log'));
      await waitFor(() => (quotaTypes(receiver).length >= 2 ? true : undefined), 15_000, 'delivery after the restart');
      // The restarted daemon's watcher sees the usage again (it was flushed) and finds the markers taken.
      await waitFor(
        async () => {
          const res = await fetch(`http://127.0.0.1:${daemon.ports.admin}/v1/users`);
          const users = (await res.json()) as Array<{ name: string; usedBytes: number }>;
          return users.find((u) => u.name === 'alice')!.usedBytes >= LIMIT ? true : undefined;
        },
        10_000,
        'usage restored from the store',
      );
      const settled = async () => {
        const res = await fetch(`http://127.0.0.1:${daemon.ports.admin}/v1/events`);
        const list = (await res.json()) as ListedEvent[];
        return list.filter((e) => e.type.startsWith('user.quota.')).every((e) => e.delivery.delivered) ? list : undefined;
      };
      const list = await waitFor(settled, 10_000, 'events settled');
      // Timed on purpose: the claim is that nothing more is sent, so give the child daemon's watcher (checkMs
      // 100) two rounds after usage came back to send a duplicate, then count.
      await new Promise((r) => setTimeout(r, 250));
      assert.deepEqual(quotaTypes(receiver), ['user.quota.100', 'user.quota.80'], 'each exactly once');
      assert.deepEqual(
        list.filter((e) => e.type.startsWith('user.quota.')).map((e) => e.type),
        ['user.quota.80', 'user.quota.100'],
        'no second pair recorded',
      );
      assertSigned(receiver);
    } catch (err) {
      process.stderr.write(`daemon log:\n${daemon.logText().slice(-4000)}\n`);
      throw err;
    } finally {
      await daemon.stop();
      await target.close();
      await receiver.close();
    }
  });
});

describe('events: two daemons on one Redis', () => {
  test('each threshold event is made once; both daemons tried', async () => {
    const receiver = await startWebhookReceiver(200);
    const target = await startBytesTarget();
    const url = await testRedisUrl();
    const prefix = `t:ev2:${process.pid}:${Date.now()}:`;
    const config = {
      store: { path: url },
      fleet: { prefix, sliceBytes: TEST_SLICE_BYTES },
      admin: { token: TOKEN },
      users: [{ name: 'alice', password: 'alice-pass', mainAccount: 'shop1', limitBytes: LIMIT }],
      events: { webhookUrl: receiver.url, secret: SECRET, checkMs: 100, pollMs: 100 },
    };
    const a = await startGateway({ config });
    const b = await startGateway({ config });
    try {
      const r = await curl([...viaSocks5h(a.ports.socks5, 'alice', 'alice-pass'), target.url(2_000_000), '-o', '/dev/null']);
      assert.notEqual(r.exitCode, 0);
      await waitFor(() => (quotaTypes(receiver).length >= 2 ? true : undefined), 15_000, 'both events');
      // Both watchers got past both thresholds: one wrote each event, the other found the marker taken.
      await waitFor(
        () => (a.daemon.events.quota.stats.attempts === 2 && b.daemon.events.quota.stats.attempts === 2 ? true : undefined),
        15_000,
        'both daemons saw the thresholds',
      );
      assert.equal(a.daemon.events.quota.stats.emitted + b.daemon.events.quota.stats.emitted, 2);
      for (const gw of [a, b]) {
        const list = (await gw.admin<ListedEvent[]>('/v1/events')).body.filter((e) => e.type.startsWith('user.quota.'));
        assert.deepEqual(
          list.map((e) => e.type),
          ['user.quota.80', 'user.quota.100'],
        );
      }
      await waitFor(
        async () => ((await a.admin<ListedEvent[]>('/v1/events')).body.every((e) => e.delivery.delivered) ? true : undefined),
        10_000,
        'delivered',
      );
      assert.deepEqual(quotaTypes(receiver), ['user.quota.100', 'user.quota.80']);
      assertSigned(receiver);
    } finally {
      await a.close();
      await b.close();
      await target.close();
      await receiver.close();
    }
  });
});
