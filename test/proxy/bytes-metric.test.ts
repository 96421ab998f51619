// rotor_proxy_bytes_total from real relays (real sockets): counted by the relays themselves when nothing else
// writes it (tests, tools), and left to the users' meters when the bounded per-user series write it at every
// scrape (src/users/series.ts, as the daemon runs): the relays' counts would be thrown away there, after costing
// two labelled children per connection and a series per user held until the next scrape.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { describe, test } from 'node:test';
import { relay, type RelayStats } from '../../src/proxy/relay.ts';
import { createMetrics, type Metrics } from '../../src/telemetry/metrics.ts';
import { boundUserSeries } from '../../src/users/series.ts';
import { UnlimitedMeters } from '../support/meters.ts';

async function socketPair(): Promise<{ a: Socket; b: Socket; close: () => void }> {
  const server = createServer({ allowHalfOpen: true });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const accepted = once(server, 'connection');
  const a = connect({ host: '127.0.0.1', port: (server.address() as AddressInfo).port, allowHalfOpen: true });
  const [b] = (await accepted) as [Socket];
  if (a.connecting) await once(a, 'connect');
  return { a, b, close: () => server.close() };
}

/** One relay for `user`: 5 bytes up, 7 down, then both ends close; resolves with its stats. */
async function relayOnce(metrics: Metrics, meters: UnlimitedMeters, user: string): Promise<RelayStats> {
  const client = await socketPair();
  const upstream = await socketPair();
  const ended = new Promise<RelayStats>((resolve) =>
    relay(client.b, upstream.a, { meter: meters.meter(user), idleTimeoutMs: 5000, bytes: { metrics, user }, end: { relayEnded: resolve } }),
  );
  const upGot = once(upstream.b, 'data');
  client.a.write('hello');
  await upGot;
  const downGot = once(client.a, 'data');
  upstream.b.write('goodbye');
  await downGot;
  client.a.end();
  upstream.b.end();
  client.a.resume();
  upstream.b.resume();
  const stats = await ended;
  client.a.destroy();
  upstream.b.destroy();
  client.close();
  upstream.close();
  return stats;
}

/** Series prom-client holds for the metric now (its internal table: the memory between scrapes). */
const held = (metrics: Metrics): number => Object.keys((metrics.bytesTotal as unknown as { hashMap: object }).hashMap).length;

describe('rotor_proxy_bytes_total and the relays', () => {
  test('without the meters writing it, the relays count it', async () => {
    const metrics = createMetrics();
    const meters = new UnlimitedMeters();
    const stats = await relayOnce(metrics, meters, 'alice');
    assert.deepEqual({ up: stats.up, down: stats.down }, { up: 5, down: 7 });
    const values = (await metrics.bytesTotal.get()).values;
    assert.equal(values.find((v) => v.labels.user === 'alice' && v.labels.direction === 'up')?.value, 5);
    assert.equal(values.find((v) => v.labels.user === 'alice' && v.labels.direction === 'down')?.value, 7);
  });

  test('written from the meters (the bounded series): relays add no series between scrapes; the scrape shows the meters', async () => {
    const metrics = createMetrics();
    const meters = new UnlimitedMeters();
    boundUserSeries({
      metrics,
      source: {
        snapshot: () =>
          ['u0', 'u1', 'u2', 'u3'].map((name) => {
            const u = meters.usage(name);
            return { name, up: u.up, down: u.down, used: u.up + u.down, limit: -1 };
          }),
      },
      marked: () => new Set(),
      max: 2,
    });
    for (const user of ['u0', 'u1', 'u2', 'u3']) await relayOnce(metrics, meters, user);
    assert.equal(held(metrics), 0, 'no series made by the relays');
    const values = (await metrics.bytesTotal.get()).values;
    // At most `max` users, with exactly what their meters counted.
    assert.equal(values.length, 4);
    for (const v of values) assert.equal(v.value, v.labels.direction === 'up' ? 5 : 7);
  });
});
