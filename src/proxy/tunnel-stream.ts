// The metered, throttled stream every relay goes through: a tunnel (relay.ts), a kept upstream connection
// carrying forwarded requests and their bodies (http-forward.ts) and a UDP association (udp-associate.ts).
// MeteredStream counts: per chunk two number adds (its own counter and the user's meter) and the exhausted
// flag; rotor_proxy_bytes_total moves only on flush() (a timer, an exchange's or a relay's end), never per
// chunk. It is the connection record's live byte counters itself (ByteCounters). Valve throttles: one per
// direction of a byte stream (a tunnel's two sides, a request body, a response body), it pauses its source
// while the sink is full (backpressure) or the user is over its rate (admission/limiter.ts), and resumes it when
// both have cleared; an upstream socket it holds for the rate is read in paced pieces from then on
// (paced-reads.ts), so Rotor takes from the upstream no faster than the rate.
import type { Counter } from 'prom-client';
import type { ByteCounters } from '../connlog/types.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { Socket } from 'node:net';
import { paceReads } from './paced-reads.ts';
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

  /** A valve for one direction of this stream, throttled by the user's rate (see Valve). */
  valve(source: Source, credit = 0, upstream?: Socket): Valve {
    return new Valve(source, this.limiter, credit, upstream);
  }

  /** The user has a rate now: `upstream` is read in paced pieces (a rate set later paces it at its first hold). */
  pace(upstream: Socket): void {
    const limiter = this.limiter;
    if (limiter !== undefined && (limiter.rateBytesPerSec ?? 0) > 0) paceReads(upstream, limiter);
  }

  /** `n` bytes taken from the user's rate without holding anything (a body already whole in hand). */
  charge(n: number): void {
    this.limiter?.take(n);
  }

  /** Whether the user's limit is reached (by this or another of the user's connections). */
  get exhausted(): boolean {
    return this.meter.exhausted;
  }

  /**
   * rotor_proxy_bytes_total gets what was counted since the last flush. The labelled children are made at the
   * first flush with bytes to count: a short relay pays the label lookups once, at its end. Nothing when the
   * metric is written from the users' meters at scrape time (Metrics.bytesFromMeters: the daemon).
   */
  flush(): void {
    const { up, down, metric } = this;
    if (metric !== undefined && !metric.metrics.bytesFromMeters.on) {
      if (up > this.flushedUp)
        (this.upCounter ??= metric.metrics.bytesTotal.labels({ user: metric.user, direction: 'up' })).inc(up - this.flushedUp);
      if (down > this.flushedDown)
        (this.downCounter ??= metric.metrics.bytesTotal.labels({ user: metric.user, direction: 'down' })).inc(down - this.flushedDown);
    }
    this.flushedUp = up;
    this.flushedDown = down;
  }
}

/** What a valve stops and starts: a socket, a request body, a response with the socket under it. */
export interface Source {
  pause(): unknown;
  resume(): unknown;
}

/**
 * One direction of a metered stream: the chunk read from `source` is always written (nothing is dropped);
 * after it the source is paused while the sink is full or the user is over its rate, and resumed once both
 * have cleared. Per chunk a take() and a few flag operations; the wake function is made once, at the first wait.
 */
export class Valve {
  /** The sink is past its high-water mark (wait for its 'drain'). */
  sinkFull = false;
  /** The user is over its rate (wait for the limiter's wake). */
  overRate = false;
  /** Bytes passed while the bucket was in debt, since it last had tokens (see `credit`). */
  private owed = 0;
  private closed = false;
  private wakeFn: (() => void) | null = null;

  constructor(
    /** undefined: a subclass that pauses and resumes its source itself (stopSource/startSource) */
    private readonly source: Source | undefined,
    private readonly limiter: RelayLimiter | undefined,
    /** Bytes passed in debt before the rate holds the source (a tunnel's client side: its FIN is seen at once). */
    private readonly credit = 0,
    /** The upstream socket under the source: read in paced pieces once the rate holds it (paced-reads.ts). */
    private pace: Socket | undefined = undefined,
  ) {}

  /** `n` bytes read from the source went to the sink; `written` is the sink's write() answer. */
  passed(n: number, written: boolean): void {
    if (!written && !this.sinkFull) {
      this.sinkFull = true;
      this.stopSource();
    }
    const limiter = this.limiter;
    if (limiter === undefined) return;
    if (limiter.take(n)) {
      this.owed = 0;
      return;
    }
    if ((this.owed += n) <= this.credit) return;
    // Held already (a chunk let through by nudge(), or read before the pause): held again, one wait at a time.
    this.stopSource();
    if (this.overRate) return;
    this.overRate = true;
    if (this.pace !== undefined) {
      paceReads(this.pace, limiter);
      this.pace = undefined;
    }
    limiter.wait((this.wakeFn ??= () => this.wake()));
  }

  /** Paused by this valve (sink full or over the rate). */
  get held(): boolean {
    return this.sinkFull || this.overRate;
  }

  /** The sink drained. */
  drained(): void {
    this.sinkFull = false;
    if (!this.overRate && !this.closed) this.startSource();
  }

  /** One more chunk past the rate's hold (it stays held: that chunk holds the source again). */
  nudge(): void {
    if (!this.sinkFull && !this.closed) this.startSource();
  }

  /** The stream ended: a later drain or wake no longer resumes the source. */
  close(): void {
    this.closed = true;
  }

  protected stopSource(): void {
    this.source!.pause();
  }

  protected startSource(): void {
    this.source!.resume();
  }

  private wake(): void {
    this.overRate = false;
    this.owed = 0;
    if (!this.sinkFull && !this.closed) this.startSource();
  }
}
