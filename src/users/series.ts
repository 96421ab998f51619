// Bounded per-user metric series. rotor_proxy_bytes_total{user,direction}, rotor_user_used_bytes{user} and
// rotor_user_limit_bytes{user} are written at scrape time (prom-client `collect`) for at most `max` users:
// those marked (`metrics: true` on the record) first, then the busiest by bytes relayed since this process
// started. So /metrics carries at most 4 × max per-user series whatever the number of users (10,000 users
// with max 100: 400, not 40,000); every user's figures stay in GET /v1/users. A user who leaves the chosen
// set loses its series (a counter that comes back starts again, as after a restart).
// Values come from accounting's meters, which count every relayed byte; the relays' own increments between
// scrapes are replaced by them, so the set stays bounded in memory too.
// The choice is kept up to date from what changed (the source's change feed), not by sorting every user at
// each scrape: bytes only grow, so a user outside the chosen set that moved no byte cannot have overtaken
// one inside it. The whole set is sorted again only when a user was removed or the marked users changed.
import type { Metrics } from '../telemetry/metrics.ts';

export interface SeriesSource {
  snapshot(): Iterable<{ name: string; up: number; down: number; used: number; limit: number }>;
  /** What changed since the feed's previous take (its first: everything), and a count of removed users. */
  changeFeed?(): { take: () => Iterable<Row & { configured: boolean }>; removals: () => number };
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
  const feed = source.changeFeed?.();
  let basis: { marked: Set<string>; removals: number } | undefined;
  const rank = (rows: Iterable<Row>, marked: Set<string>): Row[] => {
    const first: Row[] = [];
    const rest: Row[] = [];
    for (const r of rows) (marked.has(r.name) ? first : rest).push(r);
    first.sort((a, b) => b.up + b.down - (a.up + a.down));
    rest.sort((a, b) => b.up + b.down - (a.up + a.down));
    return [...first, ...rest].slice(0, max);
  };
  const pick = (): Row[] => {
    const marked = options.marked();
    if (feed !== undefined) {
      const removals = feed.removals();
      const changed = feed.take();
      if (basis !== undefined && basis.marked === marked && basis.removals === removals) {
        // The chosen set and the users that moved: nobody else can have entered it (see the top of the file).
        const candidates = new Map<string, Row>();
        for (const r of chosen) candidates.set(r.name, r);
        let moved = false;
        for (const r of changed) {
          if (!r.configured) continue;
          candidates.set(r.name, r);
          moved = true;
        }
        return moved ? rank(candidates.values(), marked) : chosen;
      }
      basis = { marked, removals };
    }
    // The meters themselves, not copies: the pick is reused for 250 ms, the values are read at each collect.
    return rank(source.snapshot(), marked);
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
  metrics.bytesFromMeters.on = true;
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
  return () => {
    chosen = pick();
    pickedAt = Date.now();
    return chosen;
  };
}

/** prom-client runs a metric's `collect` before each scrape of it. */
function setCollect(metric: object, collect: () => void): void {
  (metric as { collect?: () => void }).collect = collect;
}
