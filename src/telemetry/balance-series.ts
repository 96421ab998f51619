// Bounded balance series. rotor_flow_balance_bytes{account,product} has one series per (main account,
// product) users draw from, so a reseller giving each customer a main account of its own had one per customer.
// The balance watcher still sets each pair (src/accounts/balances.ts), but the values are kept here and
// written into the gauge at scrape time for at most `max` pairs (metrics.userSeriesMax, the bound of the
// per-user and per-pool series): the lowest balances first (what a "balance running out" alert looks for),
// then by name. rotor_flow_balance_pairs{state} counts every pair (empty: 0 bytes or less; funded), so an
// operator knows how many are not shown; any pair's figure is at GET /v1/accounts/:name/balance.
import type { Gauge } from 'prom-client';

export interface BalanceSeriesBound {
  /** Most (account, product) pairs with a series (default 100; the daemon sets metrics.userSeriesMax). */
  max: number;
}

type Labels = { account?: string | number; product?: string | number };

/**
 * Keeps `gauge`'s values by (account, product) and writes at most `bound.max` of them at each scrape; `pairs`
 * gets the counts. The gauge's own set/remove are replaced (same signatures), so its writer needs no change.
 */
export function boundBalanceSeries(gauge: Gauge<'account' | 'product'>, pairs: Gauge<'state'>, bound: BalanceSeriesBound): void {
  const values = new Map<string, { account: string; product: string; value: number }>();
  const write = gauge.set.bind(gauge) as (labels: { account: string; product: string }, value: number) => void;
  const patched = gauge as unknown as {
    set: (labels: Labels, value: number) => void;
    remove: (labels: Labels) => void;
    reset: () => void;
    collect?: () => void;
  };
  const reset = gauge.reset.bind(gauge);
  const keyOf = (l: Labels): string => `${String(l.account ?? '')}\u0000${String(l.product ?? '')}`;
  patched.set = (labels, value) => {
    values.set(keyOf(labels), { account: String(labels.account ?? ''), product: String(labels.product ?? ''), value });
  };
  patched.remove = (labels) => {
    values.delete(keyOf(labels));
  };
  patched.reset = () => {
    values.clear();
    reset();
  };
  patched.collect = () => {
    reset();
    for (const v of lowest([...values.values()], bound.max)) write({ account: v.account, product: v.product }, v.value);
  };
  (pairs as unknown as { collect?: () => void }).collect = () => {
    let empty = 0;
    for (const v of values.values()) if (v.value <= 0) empty++;
    pairs.set({ state: 'empty' }, empty);
    pairs.set({ state: 'funded' }, values.size - empty);
  };
}

/** The `max` pairs with the lowest balances (then by account and product). */
function lowest<T extends { account: string; product: string; value: number }>(all: T[], max: number): T[] {
  if (all.length <= max) return all;
  const by = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
  all.sort((a, b) => a.value - b.value || by(a.account, b.account) || by(a.product, b.product));
  return all.slice(0, Math.max(0, max));
}
