// The metered stream every relay counts through: a tunnel (relay.ts), a kept upstream connection carrying
// forwarded requests (http-forward.ts) and a UDP association (udp-associate.ts). Per chunk: two number adds
// (its own counter and the user's meter) and the exhausted flag; the user's rate bucket (users/limiter.ts) is
// here for the relay to take from; rotor_proxy_bytes_total moves only on flush() (a timer, an exchange's or a
// relay's end), never per chunk. It is the connection record's live byte counters itself (ByteCounters).
import type { Counter } from 'prom-client';
import type { ByteCounters } from '../connlog/types.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { RelayLimiter, UserMeter } from './types.ts';

type CounterChild = ReturnType<Counter<'user' | 'direction'>['labels']>;

/** Where rotor_proxy_bytes_total is counted, and for whom. */
export interface ByteMetric {
  metrics: Metrics;
  user: string;
}

export class MeteredStream implements ByteCounters {
  /** client → upstream, as counted into the user's meter */
  up = 0;
  /** upstream → client */
  down = 0;
  private flushedUp = 0;
  private flushedDown = 0;
  private upCounter: CounterChild | undefined;
  private downCounter: CounterChild | undefined;

  constructor(
    readonly meter: UserMeter,
    /** the user's rate and relay registry; undefined = no rate */
    readonly limiter: RelayLimiter | undefined,
    private readonly metric: ByteMetric | undefined,
  ) {}

  /** `n` bytes went (or go) upstream: counted; true when the user's limit is reached (the relay ends). */
  sent(n: number): boolean {
    this.up += n;
    const meter = this.meter;
    meter.add(n, 0);
    return meter.exhausted;
  }

  /** `n` bytes came from the upstream: counted; true when the user's limit is reached. */
  received(n: number): boolean {
    this.down += n;
    const meter = this.meter;
    meter.add(0, n);
    return meter.exhausted;
  }

  /** Whether the user's limit is reached (by this or another of the user's connections). */
  get exhausted(): boolean {
    return this.meter.exhausted;
  }

  /**
   * rotor_proxy_bytes_total gets what was counted since the last flush. The labelled children are made at the
   * first flush with bytes to count: a short relay pays the label lookups once, at its end.
   */
  flush(): void {
    const { up, down, metric } = this;
    if (metric !== undefined) {
      if (up > this.flushedUp)
        (this.upCounter ??= metric.metrics.bytesTotal.labels({ user: metric.user, direction: 'up' })).inc(up - this.flushedUp);
      if (down > this.flushedDown)
        (this.downCounter ??= metric.metrics.bytesTotal.labels({ user: metric.user, direction: 'down' })).inc(down - this.flushedDown);
    }
    this.flushedUp = up;
    this.flushedDown = down;
  }
}
