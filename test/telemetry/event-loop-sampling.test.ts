// The event-loop delay gauges sample the loop every EVENT_LOOP_SAMPLE_MS, not prom-client's 10 ms: that timer
// woke an idle daemon 100 times a second (bench:idle-rss: idle CPU after a warm-up 13.5-24 ms/s at 10 ms,
// 9-12.5 at 100 ms). prom-client's own histogram is started as usual; the test reads the resolution it asks for.
import { createRequire } from 'node:module';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { EventLoopMonitorOptions, IntervalHistogram } from 'node:perf_hooks';

test('the default metrics sample the event loop at EVENT_LOOP_SAMPLE_MS, not 10 ms', async () => {
  // The module object prom-client reads monitorEventLoopDelay from (it requires 'perf_hooks').
  const perfHooks = createRequire(import.meta.url)('node:perf_hooks') as {
    monitorEventLoopDelay: (o?: EventLoopMonitorOptions) => IntervalHistogram;
  };
  const original = perfHooks.monitorEventLoopDelay;
  const asked: Array<number | undefined> = [];
  perfHooks.monitorEventLoopDelay = (o) => {
    asked.push(o?.resolution);
    return original(o);
  };
  try {
    const { createMetrics, EVENT_LOOP_SAMPLE_MS } = await import('../../src/telemetry/metrics.ts');
    const metrics = createMetrics();
    assert.deepEqual(asked, [EVENT_LOOP_SAMPLE_MS]);
    assert.ok(EVENT_LOOP_SAMPLE_MS >= 50, `${EVENT_LOOP_SAMPLE_MS} ms`);
    // The gauges are still there and read a number.
    const text = await metrics.registry.metrics();
    assert.match(text, /^rotor_nodejs_eventloop_lag_p99_seconds \d/m);
    metrics.registry.clear();
  } finally {
    perfHooks.monitorEventLoopDelay = original;
  }
});
