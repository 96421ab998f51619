// Bounded per-user metric series. rotor_proxy_bytes_total{user,direction}, rotor_user_used_bytes{user} and
// rotor_user_limit_bytes{user} are written at scrape time (prom-client `collect`) for at most `max` users:
// those marked (`metrics: true` on the record) first, then the busiest by bytes relayed since this process
// started. So /metrics carries at most 4 × max per-user series whatever the number of users (10,000 users
// with max 100: 400, not 40,000); every user's figures stay in GET /v1/users. A user who leaves the chosen
// set loses its series (a counter that comes back starts again, as after a restart).
// Values come from accounting's meters, which count every relayed byte; the relays' own increments between
// scrapes are replaced by them, so the set stays bounded in memory too.
import type { Metrics } from '../telemetry/metrics.ts';

export interface SeriesSource {
  snapshot(): Iterable<{ name: string; up: number; down: number; used: number; limit: number }>;
}

export interface SeriesOptions {
  metrics: Metrics;
  source: SeriesSource;
  /** Users always chosen (within the bound). */
  marked: () => Set<string>;
  /** Most users with per-user series. */
  max: number;
}

type Row = { name: string; up: number; down: number; used: number; limit: number };

/** Installs the scrape-time collection; returns the function that picks the users (for tests). */
export function boundUserSeries(options: SeriesOptions): () => Row[] {
  const { metrics, source, max } = options;
  let chosen: Row[] = [];
  let pickedAt = -Infinity;
  const pick = (): Row[] => {
    const marked = options.marked();
    const first: Row[] = [];
    const rest: Row[] = [];
    // The meters themselves, not copies: the pick is reused for 250 ms, the values are read at each collect.
    for (const r of source.snapshot()) (marked.has(r.name) ? first : rest).push(r);
    first.sort((a, b) => b.up + b.down - (a.up + a.down));
    rest.sort((a, b) => b.up + b.down - (a.up + a.down));
    return [...first, ...rest].slice(0, max);
  };
  // One pick per scrape (the three metrics are collected one after the other); values stay live.
  const current = (): Row[] => {
    const t = Date.now();
    if (t - pickedAt > 250) {
      chosen = pick();
      pickedAt = t;
    }
    return chosen;
  };
  setCollect(metrics.bytesTotal, () => {
    metrics.bytesTotal.reset();
    for (const r of current()) {
      if (r.up > 0) metrics.bytesTotal.inc({ user: r.name, direction: 'up' }, r.up);
      if (r.down > 0) metrics.bytesTotal.inc({ user: r.name, direction: 'down' }, r.down);
    }
  });
  setCollect(metrics.userUsedBytes, () => {
    metrics.userUsedBytes.reset();
    for (const r of current()) metrics.userUsedBytes.set({ user: r.name }, r.used);
  });
  setCollect(metrics.userLimitBytes, () => {
    metrics.userLimitBytes.reset();
    for (const r of current()) metrics.userLimitBytes.set({ user: r.name }, r.limit);
  });
  return pick;
}

/** prom-client runs a metric's `collect` before each scrape of it. */
function setCollect(metric: object, collect: () => void): void {
  (metric as { collect?: () => void }).collect = collect;
}
