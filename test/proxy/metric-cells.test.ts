// Data-path counts as metric cells (src/proxy/metric-cells.ts): nothing of prom-client runs per connection,
// and every read of the metrics (the text a scrape gets, metric.get()) still shows exact figures.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Counter, Gauge, Registry } from 'prom-client';
import { HttpListener } from '../../src/proxy/http.ts';
import { metricCell } from '../../src/proxy/metric-cells.ts';
import { Router } from '../../src/proxy/router.ts';
import { Socks5Listener } from '../../src/proxy/socks5.ts';
import { createMetrics } from '../../src/telemetry/metrics.ts';
import { UnlimitedMeters } from '../support/meters.ts';
import { waitFor } from '../support/wait.ts';
import { FixedPool, FixedPools, MapSessions, Users, curl, node, startMicrosocks, startTarget, user, type Child } from './fixtures.ts';

describe('metric cells', () => {
  test('counts reach a counter and a gauge at every read, exactly, one series per label set', async () => {
    const registry = new Registry();
    const total = new Counter({ name: 't_total', help: 'h', labelNames: ['listener', 'result'], registers: [registry] });
    const active = new Gauge({ name: 't_active', help: 'h', labelNames: ['listener'], registers: [registry] });
    const ok = metricCell(total, { listener: 'http', result: 'ok' });
    assert.equal(metricCell(total, { result: 'ok', listener: 'http' }), ok, 'the same label set is the same cell');
    const open = metricCell(active, { listener: 'http' });
    for (let i = 0; i < 5; i++) ok.inc();
    open.inc();
    open.inc();
    open.dec();
    assert.match(await registry.metrics(), /t_total\{listener="http",result="ok"\} 5/);
    assert.match(await registry.metrics(), /t_active\{listener="http"\} 1/);
    open.dec();
    ok.inc(2);
    const values = (await total.get()).values;
    assert.deepEqual(
      values.map((v) => [v.labels, v.value]),
      [[{ listener: 'http', result: 'ok' }, 7]],
    );
    assert.equal((await active.get()).values[0]?.value, 0);
    // A cell whose changes cancel out before its first read still has its series, at 0.
    const socks = metricCell(active, { listener: 'socks5' });
    socks.inc();
    socks.dec();
    assert.match(await registry.metrics(), /t_active\{listener="socks5"\} 0/);
  });

  test("a metric's own collect hook still runs", async () => {
    const registry = new Registry();
    let collected = 0;
    const g = new Gauge({
      name: 'g_hooked',
      help: 'h',
      labelNames: ['k'],
      registers: [registry],
      collect() {
        collected++;
        this.set({ k: 'own' }, 3);
      },
    });
    metricCell(g, { k: 'cell' }).inc(4);
    const text = await registry.metrics();
    assert.equal(collected, 1);
    assert.match(text, /g_hooked\{k="own"\} 3/);
    assert.match(text, /g_hooked\{k="cell"\} 4/);
  });
});

describe('listeners count through cells', () => {
  let target: Awaited<ReturnType<typeof startTarget>>;
  let socksUp: Child;
  before(async () => {
    target = await startTarget();
    socksUp = await startMicrosocks('up', 'uppass');
  });
  after(async () => {
    await socksUp.stop();
    await target.close();
  });

  test('20 tunnels call prom-client 0 times on their path; the scrape shows 20 ok and 0 active', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const router = new Router({
      users: new Users([user('alice', 'alice-pass')]),
      meters: new UnlimitedMeters(),
      pools: new FixedPools(new FixedPool([node('socks5', socksUp.port, 'up', 'uppass')])),
      sessions: new MapSessions(),
      metrics,
    });
    const http = new HttpListener({ router, port: 0, metrics, responseTimeoutMs: 3000 });
    const socks = new Socks5Listener({ router, port: 0, metrics, handshakeTimeoutMs: 2000 });
    const h = await http.listen();
    const s = await socks.listen();
    // Counted from here: every call the data path makes into these metrics.
    let calls = 0;
    for (const m of [metrics.connectionsTotal, metrics.connectionsActive] as const) {
      const record = m as unknown as Record<string, (...args: unknown[]) => unknown>;
      for (const method of ['inc', 'dec', 'set', 'labels']) {
        const original = record[method];
        if (typeof original !== 'function') continue;
        record[method] = function (this: unknown, ...args: unknown[]) {
          calls++;
          return original.apply(this, args);
        };
      }
    }
    try {
      const url = `http://127.0.0.1:${target.port}/hello`;
      for (let i = 0; i < 10; i++) {
        const viaConnect = await curl(['-p', '-x', `http://alice:alice-pass@127.0.0.1:${h.port}`, url]);
        assert.equal(viaConnect.stdout, 'hello from target', viaConnect.stderr);
        const viaSocks = await curl(['-x', `socks5h://alice:alice-pass@127.0.0.1:${s.port}`, url]);
        assert.equal(viaSocks.stdout, 'hello from target', viaSocks.stderr);
      }
      // The listeners see their clients' sockets close a moment after curl exits.
      await waitFor(() => http.connections === 0 && socks.connections === 0);
      assert.equal(calls, 0, 'prom-client calls on the data path');
      const text = await metrics.registry.metrics();
      assert.match(text, /rotor_proxy_connections_total\{listener="http",result="ok"\} 10/);
      assert.match(text, /rotor_proxy_connections_total\{listener="socks5",result="ok"\} 10/);
      assert.match(text, /rotor_proxy_connections_active\{listener="http"\} 0/);
      assert.match(text, /rotor_proxy_connections_active\{listener="socks5"\} 0/);
    } finally {
      await http.close();
      await socks.close();
    }
  });
});
