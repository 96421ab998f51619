// The dashboard's series: readings of the real metrics registry turned into per-interval rates and counts,
// kept for the window, per-user rates from the last two readings only.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Counter, Registry } from 'prom-client';
import { createMetrics } from '../../src/telemetry/metrics.ts';
import { StatsSampler } from '../../src/telemetry/sampler.ts';
import { waitFor } from '../support/wait.ts';

function setup(windowMs = 60_000) {
  const metrics = createMetrics({ defaultMetrics: false });
  let now = 1_000_000;
  const sampler = new StatsSampler({ source: metrics.registry, intervalMs: 5000, windowMs, now: () => now });
  return { metrics, sampler, advance: (ms: number) => (now += ms), now: () => now };
}

describe('StatsSampler', () => {
  test('rates and counts per interval from counters; gauges as read', async () => {
    const { metrics, sampler, advance } = setup();
    metrics.bytesTotal.inc({ user: 'alice', direction: 'down' }, 1000);
    await sampler.sample();
    assert.deepEqual(sampler.view().points, [], 'one reading is no interval yet');

    advance(5000);
    metrics.bytesTotal.inc({ user: 'alice', direction: 'down' }, 50_000);
    metrics.bytesTotal.inc({ user: 'alice', direction: 'up' }, 5_000);
    metrics.bytesTotal.inc({ user: 'bob', direction: 'down' }, 10_000);
    metrics.connectionsTotal.inc({ listener: 'http', result: 'ok' }, 3);
    metrics.connectionsTotal.inc({ listener: 'socks5', result: 'limited' }, 2);
    metrics.upstreamFailures.inc({ reason: 'timeout' });
    metrics.connectionsActive.set({ listener: 'http' }, 4);
    metrics.connectionsActive.set({ listener: 'socks5' }, 1);
    metrics.sessionsActive.set(2);
    metrics.flowBalance.set({ account: 'shop1', product: 'DYN' }, 123);
    await sampler.sample();

    const v = sampler.view();
    assert.equal(v.points.length, 1);
    const p = v.points[0]!;
    assert.equal(p.downBytesPerSec, 12_000, '(50,000 + 10,000) bytes over 5 s');
    assert.equal(p.upBytesPerSec, 1_000);
    assert.equal(p.connectionsActive, 5);
    assert.equal(p.sessionsActive, 2);
    assert.deepEqual(p.connections, { ok: 3, limited: 2 });
    assert.deepEqual(p.failures, { timeout: 1 });
    assert.deepEqual(p.hedges, {}, 'no hedge metric in this registry: empty');
    assert.deepEqual(v.users, [
      { name: 'alice', bytesPerSec: 11_000 },
      { name: 'bob', bytesPerSec: 2_000 },
    ]);
    assert.equal(v.totals.bytesDown, 61_000);
    assert.deepEqual(v.totals.connections, { ok: 3, limited: 2 });
    assert.equal(v.balances.length, 1);
    assert.equal(v.balances[0]!.account, 'shop1');
    assert.equal(v.balances[0]!.value, 123);

    // A quiet interval: zero rates, no counts, users without traffic left out.
    advance(5000);
    await sampler.sample();
    const quiet = sampler.view().points[1]!;
    assert.equal(quiet.downBytesPerSec, 0);
    assert.deepEqual(quiet.connections, {});
    assert.deepEqual(sampler.view().users, []);
  });

  test('points older than the window are dropped; `since` returns only newer points', async () => {
    const { sampler, advance } = setup(20_000);
    await sampler.sample();
    for (let i = 0; i < 8; i++) {
      advance(5000);
      await sampler.sample();
    }
    const all = sampler.view().points;
    assert.equal(all.length, 4, 'a 20 s window at 5 s holds four points');
    assert.equal(all[3]!.t - all[0]!.t, 15_000);
    const newer = sampler.view(all[1]!.t).points;
    assert.deepEqual(newer, [all[2], all[3]]);
  });

  test('hedges are read when the registry has them', async () => {
    const registry = new Registry();
    const hedges = new Counter({ name: 'rotor_upstream_hedges_total', help: 'h', labelNames: ['outcome'], registers: [registry] });
    let now = 0;
    const sampler = new StatsSampler({ source: registry, now: () => now });
    await sampler.sample();
    hedges.inc({ outcome: 'won' }, 2);
    now += 5000;
    await sampler.sample();
    assert.deepEqual(sampler.view().points[0]!.hedges, { won: 2 });
  });

  test('start() samples at once and on its timer; stop() ends it', async () => {
    const fast = new StatsSampler({ source: createMetrics({ defaultMetrics: false }).registry, intervalMs: 10 });
    await fast.start();
    await waitFor(() => fast.view().points.length >= 2, 5000, 'two points from the timer');
    fast.stop();
    assert.ok(fast.view().points.length >= 2);
  });
});
