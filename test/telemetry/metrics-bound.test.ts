// /metrics stays bounded whatever the number of users and pools (issue 24): 10,000 users that each moved
// bytes, each with a pool holding a node (as src/pool/pool.ts reports them), some nodes cooling. The real
// registry is scraped: the page stays under 64 KB, per-user and per-pool series stay at the bound, and the
// totals over every pool are still exact.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Accounting } from '../../src/accounting/accounting.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import { createMetrics } from '../../src/telemetry/metrics.ts';
import { boundUserSeries } from '../../src/users/series.ts';

test('10,000 active users with a pool each: /metrics ≤ 64 KB, at most 100 users and 100 pools with series, exact pool totals', async () => {
  const metrics = createMetrics();
  const store = new SqliteStore(':memory:');
  const accounting = new Accounting({ store, flushIntervalMs: 3_600_000 });
  try {
    await accounting.start([]);
    const users = 10_000;
    for (let i = 0; i < users; i++) await accounting.upsertUser({ name: `user${i}`, limitBytes: -1 });
    boundUserSeries({ metrics, source: accounting, marked: () => new Set(), max: 100 });
    metrics.poolSeries.max = 100;
    for (let i = 0; i < users; i++) {
      accounting.meter(`user${i}`).add(100 + i, 1000 + i);
      // What Pool.census writes for a pool with one node (every 50th pool has one cooling too).
      metrics.poolProxies.set({ pool: `user${i}/DYN-105-FLOW/any`, state: 'ready' }, 1);
      metrics.poolProxies.set({ pool: `user${i}/DYN-105-FLOW/any`, state: 'cooling' }, i % 50 === 0 ? 1 : 0);
    }
    // A closed pool's series go (Pool.close removes both states).
    metrics.poolProxies.remove({ pool: 'user1/DYN-105-FLOW/any', state: 'ready' });
    metrics.poolProxies.remove({ pool: 'user1/DYN-105-FLOW/any', state: 'cooling' });

    const text = await metrics.registry.metrics();
    const lines = text.split('\n').filter((l) => l !== '' && !l.startsWith('#'));
    const bytes = Buffer.byteLength(text);
    assert.ok(bytes <= 64 * 1024, `/metrics is ${bytes} bytes, ${lines.length} samples`);
    const perUser = lines.filter((l) => /[{,]user="/.test(l));
    const perPool = lines.filter((l) => l.startsWith('rotor_pool_proxies{'));
    assert.ok(perUser.length <= 4 * 100, `${perUser.length} per-user series`);
    assert.ok(perPool.length <= 2 * 100, `${perPool.length} per-pool series`);
    assert.ok(perPool.length > 0);
    // The pools with a cooling node are the ones shown first.
    const cooling = lines.filter((l) => l.startsWith('rotor_pool_proxies{') && l.includes('state="cooling"') && l.endsWith(' 1'));
    assert.equal(cooling.length, 100);
    // Totals over all 9,999 remaining pools, whatever the bound.
    assert.match(text, /^rotor_pool_nodes\{state="ready"\} 9999$/m);
    assert.match(text, /^rotor_pool_nodes\{state="cooling"\} 200$/m);
  } finally {
    await accounting.close();
    await store.close();
  }
});
