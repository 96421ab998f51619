// Counts taken on the data path (per connection, per request) without prom-client's per-call work: its
// inc({label: value}) hashes the label object (sorted keys, a string built) and validates it on every call,
// and its labels() child does the same per call. A cell is one label set's pending count as a plain number,
// made once where the labels are known (per listener, per outcome); prom-client is told at scrape time (the
// metric's collect hook runs before every read of its values: /metrics, metric.get()), so every reader still
// sees exact figures.
import type { Counter, Gauge } from 'prom-client';
import type { ConnectionResult, Metrics } from '../telemetry/metrics.ts';

type Batchable = Counter<string> | Gauge<string>;
type Labels = Record<string, string>;

/** One label set's count since the last scrape (a gauge's net change). */
export class MetricCell {
  n = 0;
  /** Told to prom-client at least once: its series exists (with 0 when the changes cancelled out). */
  told = false;

  constructor(readonly labels: Labels) {}

  inc(by = 1): void {
    this.n += by;
  }

  dec(by = 1): void {
    this.n -= by;
  }
}

const cellsOf = new WeakMap<Batchable, Map<string, MetricCell>>();

/** The cell of `labels` on `metric` (one per metric and label set, shared by every caller). */
export function metricCell(metric: Batchable, labels: Labels): MetricCell {
  let cells = cellsOf.get(metric);
  if (cells === undefined) {
    cells = new Map();
    cellsOf.set(metric, cells);
    hook(metric, cells);
  }
  const key = Object.keys(labels)
    .sort()
    .map((k) => `${k}\u0000${labels[k]}`)
    .join('\u0001');
  let cell = cells.get(key);
  if (cell === undefined) {
    cell = new MetricCell({ ...labels });
    cells.set(key, cell);
  }
  return cell;
}

/** Pending counts go into the metric before it is read (after any collect hook it already had). */
function hook(metric: Batchable, cells: Map<string, MetricCell>): void {
  const m = metric as unknown as { collect?: () => unknown; inc(labels: Labels, value: number): void };
  const before = m.collect;
  m.collect = function collect(this: unknown) {
    for (const cell of cells.values()) {
      if (cell.n === 0 && cell.told) continue;
      const n = cell.n;
      cell.n = 0;
      cell.told = true;
      m.inc(cell.labels, n);
    }
    return before?.call(this);
  };
}

/**
 * A listener's rotor_proxy_connections_total, one cell per result made on first use (no label hashing per
 * connection). An object the pipeline hands down (to the forwarder, to tunnel-record's endBeforeRelay), so
 * counting calls nothing back up. Without metrics it counts nothing.
 */
export class ResultCounter {
  private readonly cells = new Map<string, MetricCell>();

  constructor(
    private readonly metrics: Metrics | undefined,
    private readonly listener: string,
  ) {}

  count(result: ConnectionResult): void {
    const metrics = this.metrics;
    if (metrics === undefined) return;
    let cell = this.cells.get(result);
    if (cell === undefined) {
      cell = metricCell(metrics.connectionsTotal, { listener: this.listener, result });
      this.cells.set(result, cell);
    }
    cell.inc();
  }
}
