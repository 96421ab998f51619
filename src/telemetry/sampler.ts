// A small in-memory time series for the dashboard: every `intervalMs` the sampler reads a handful of metrics
// from the registry (bytes, connections by result, upstream failures, hedges, sessions, balances) and keeps one
// point per interval for `windowMs` (an hour by default, 720 points at 5 s). It reads only the metrics it
// names, on a timer, off the data path; nothing is kept per user beyond the last two readings (enough for a
// current rate), so the memory stays bounded however many users there are.
import { METRIC } from './metrics.ts';

/** One metric as prom-client's `Metric.get()` answers it (only what the sampler reads). */
export interface MetricReading {
  values: { value: number; labels: Record<string, string | number | undefined> }[];
}

/** The part of prom-client's Registry the sampler reads. */
export interface MetricSource {
  getSingleMetric(name: string): { get(): Promise<MetricReading> | MetricReading } | undefined;
}

/** Counter totals and gauges at one instant. */
interface Reading {
  at: number;
  bytesUp: number;
  bytesDown: number;
  connectionsActive: number;
  sessionsActive: number;
  /** rotor_proxy_connections_total by result */
  connections: Record<string, number>;
  /** rotor_upstream_failures_total by reason */
  failures: Record<string, number>;
  /** rotor_upstream_hedges_total by outcome (absent metric: empty) */
  hedges: Record<string, number>;
  /** rotor_proxy_bytes_total by user, both directions */
  userBytes: Record<string, number>;
  balances: { account: string; product: string; value: number }[];
}

/** One point of the series: rates over the interval that ends at `t`. */
export interface StatsPoint {
  /** epoch ms */
  t: number;
  upBytesPerSec: number;
  downBytesPerSec: number;
  connectionsActive: number;
  sessionsActive: number;
  /** new connections in the interval by result (ok, auth_failed, limited, …) */
  connections: Record<string, number>;
  /** upstream failures in the interval by reason */
  failures: Record<string, number>;
  /** hedged dials in the interval by outcome */
  hedges: Record<string, number>;
}

export interface StatsView {
  intervalMs: number;
  windowMs: number;
  /** points after `since`, oldest first */
  points: StatsPoint[];
  /** totals since the daemon started */
  totals: {
    connections: Record<string, number>;
    failures: Record<string, number>;
    hedges: Record<string, number>;
    bytesUp: number;
    bytesDown: number;
  };
  /** bytes per second per user over the last interval (users with traffic in it) */
  users: { name: string; bytesPerSec: number }[];
  /** dynamic balances as the balance watcher last read them */
  balances: { account: string; product: string; value: number; unit: 'bytes' | 'MB' }[];
}

export interface StatsSamplerOptions {
  source: MetricSource;
  intervalMs?: number;
  windowMs?: number;
  now?: () => number;
}

const HEDGES = 'rotor_upstream_hedges_total';

function byLabel(reading: MetricReading | undefined, label: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of reading?.values ?? []) {
    const key = String(v.labels[label] ?? '');
    out[key] = (out[key] ?? 0) + v.value;
  }
  return out;
}

function sum(reading: MetricReading | undefined): number {
  let s = 0;
  for (const v of reading?.values ?? []) s += v.value;
  return s;
}

/** Per-key increase from `before` to `after`; a key new in `after` counts from 0; zero deltas left out. */
function delta(after: Record<string, number>, before: Record<string, number> | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) {
    const d = v - (before?.[k] ?? 0);
    if (d > 0) out[k] = d;
  }
  return out;
}

export class StatsSampler {
  readonly intervalMs: number;
  readonly windowMs: number;
  private readonly source: MetricSource;
  private readonly now: () => number;
  private readonly points: StatsPoint[] = [];
  private last: Reading | undefined;
  private previous: Reading | undefined;
  private timer: NodeJS.Timeout | undefined;
  private sampling: Promise<void> | undefined;

  constructor(options: StatsSamplerOptions) {
    this.source = options.source;
    this.intervalMs = options.intervalMs ?? 5000;
    this.windowMs = options.windowMs ?? 3_600_000;
    this.now = options.now ?? Date.now;
  }

  /** Takes a first reading now, then one every interval. */
  start(): Promise<void> {
    if (!this.timer) {
      this.timer = setInterval(() => void this.sample(), this.intervalMs);
      this.timer.unref();
    }
    return this.sample();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One reading (concurrent calls share it); a point is added from the second reading on. */
  sample(): Promise<void> {
    this.sampling ??= this.read()
      .then((r) => this.add(r))
      .finally(() => (this.sampling = undefined));
    return this.sampling;
  }

  view(since = 0): StatsView {
    const last = this.last;
    const prev = this.previous;
    const seconds = last && prev ? Math.max(0.001, (last.at - prev.at) / 1000) : 1;
    const users = last
      ? Object.entries(delta(last.userBytes, prev?.userBytes))
          .map(([name, bytes]) => ({ name, bytesPerSec: Math.round(bytes / seconds) }))
          .sort((a, b) => b.bytesPerSec - a.bytesPerSec)
      : [];
    const unit = METRIC.flowBalance.endsWith('_bytes') ? 'bytes' : 'MB';
    return {
      intervalMs: this.intervalMs,
      windowMs: this.windowMs,
      points: this.points.filter((p) => p.t > since),
      totals: {
        connections: last?.connections ?? {},
        failures: last?.failures ?? {},
        hedges: last?.hedges ?? {},
        bytesUp: last?.bytesUp ?? 0,
        bytesDown: last?.bytesDown ?? 0,
      },
      users,
      balances: (last?.balances ?? []).map((b) => ({ ...b, unit })),
    };
  }

  private async get(name: string): Promise<MetricReading | undefined> {
    const metric = this.source.getSingleMetric(name);
    return metric ? await metric.get() : undefined;
  }

  private async read(): Promise<Reading> {
    const [bytes, active, sessions, connections, failures, hedges, balances] = await Promise.all([
      this.get(METRIC.bytesTotal),
      this.get(METRIC.connectionsActive),
      this.get(METRIC.sessionsActive),
      this.get(METRIC.connectionsTotal),
      this.get(METRIC.upstreamFailures),
      this.get(HEDGES),
      this.get(METRIC.flowBalance),
    ]);
    const byDirection = byLabel(bytes, 'direction');
    return {
      at: this.now(),
      bytesUp: byDirection.up ?? 0,
      bytesDown: byDirection.down ?? 0,
      connectionsActive: sum(active),
      sessionsActive: sum(sessions),
      connections: byLabel(connections, 'result'),
      failures: byLabel(failures, 'reason'),
      hedges: byLabel(hedges, 'outcome'),
      userBytes: byLabel(bytes, 'user'),
      balances: (balances?.values ?? []).map((v) => ({
        account: String(v.labels.account ?? ''),
        product: String(v.labels.product ?? ''),
        value: v.value,
      })),
    };
  }

  private add(r: Reading): void {
    const before = this.last;
    this.previous = before;
    this.last = r;
    if (!before) return;
    const seconds = Math.max(0.001, (r.at - before.at) / 1000);
    this.points.push({
      t: r.at,
      upBytesPerSec: Math.round(Math.max(0, r.bytesUp - before.bytesUp) / seconds),
      downBytesPerSec: Math.round(Math.max(0, r.bytesDown - before.bytesDown) / seconds),
      connectionsActive: r.connectionsActive,
      sessionsActive: r.sessionsActive,
      connections: delta(r.connections, before.connections),
      failures: delta(r.failures, before.failures),
      hedges: delta(r.hedges, before.hedges),
    });
    const oldest = r.at - this.windowMs;
    while (this.points.length > 0 && (this.points[0] as StatsPoint).t <= oldest) this.points.shift();
  }
}
