// Bounded per-pool series. A pool is per (user, product, region), so rotor_pool_proxies{pool,state} grew two
// series per user pool: with 10,000 active users, 20,000 lines in /metrics. The pools still set and remove
// their counts as before (src/pool/pool.ts), but the values are kept here and written into the gauge at scrape
// time for at most `max` pools (metrics.userSeriesMax, the same bound as the per-user series): pools with
// cooling nodes first (the ones an operator looks for), then the most ready nodes, then by name.
// rotor_pool_nodes{state} carries the sum over every pool, so totals never depend on the bound.
import type { Gauge } from 'prom-client';

type PoolState = 'ready' | 'cooling';

export interface PoolSeriesBound {
  /** Most pools with series of their own (default 100; the daemon sets metrics.userSeriesMax). */
  max: number;
}

interface Counts {
  ready: number;
  cooling: number;
}

/**
 * Keeps `gauge`'s values by pool and writes at most `bound.max` pools into it at each scrape; `totals` gets the
 * sums. The gauge's own set/remove are replaced (same signatures), so its writers need no change.
 */
export function boundPoolSeries(gauge: Gauge<'pool' | 'state'>, totals: Gauge<'state'>, bound: PoolSeriesBound): void {
  const pools = new Map<string, Counts>();
  const write = gauge.set.bind(gauge) as (labels: { pool: string; state: PoolState }, value: number) => void;
  const patched = gauge as unknown as {
    set: (labels: { pool?: string; state?: string }, value: number) => void;
    remove: (labels: { pool?: string; state?: string }) => void;
    collect?: () => void;
  };
  patched.set = (labels, value) => {
    if (labels.pool === undefined || (labels.state !== 'ready' && labels.state !== 'cooling')) return;
    let c = pools.get(labels.pool);
    if (c === undefined) pools.set(labels.pool, (c = { ready: 0, cooling: 0 }));
    c[labels.state] = value;
  };
  patched.remove = (labels) => {
    if (labels.pool === undefined) return;
    const c = pools.get(labels.pool);
    if (c === undefined) return;
    if (labels.state === 'ready' || labels.state === 'cooling') c[labels.state] = 0;
    if (labels.state === undefined || (c.ready === 0 && c.cooling === 0)) pools.delete(labels.pool);
  };
  patched.collect = () => {
    gauge.reset();
    for (const [pool, c] of choose(pools, bound.max)) {
      write({ pool, state: 'ready' }, c.ready);
      write({ pool, state: 'cooling' }, c.cooling);
    }
  };
  (totals as unknown as { collect?: () => void }).collect = () => {
    let ready = 0;
    let cooling = 0;
    for (const c of pools.values()) {
      ready += c.ready;
      cooling += c.cooling;
    }
    totals.set({ state: 'ready' }, ready);
    totals.set({ state: 'cooling' }, cooling);
  };
}

/** The `max` pools to show: cooling nodes first, then ready nodes, then name. */
function choose(pools: Map<string, Counts>, max: number): [string, Counts][] {
  const all = [...pools];
  if (all.length <= max) return all;
  all.sort(([an, a], [bn, b]) => b.cooling - a.cooling || b.ready - a.ready || (an < bn ? -1 : an > bn ? 1 : 0));
  return all.slice(0, Math.max(0, max));
}
