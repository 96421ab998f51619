// The adaptive hedge delay (config proxy.hedgeAfterMs = 0): how long a dial may go unanswered before the next
// node is dialed in parallel. A multiple of a high quantile of the pool's recent completed handshakes, so a
// pool of slow-but-working exits is not hedged on every connection, held between a floor (loopback and
// LAN upstreams answer in a millisecond; the machine's own hiccups must not trigger hedges) and a cap (a
// stalled node costs a client at most this much).

export interface HedgeDelayOptions {
  /** Fixed delay in ms; 0 (default) = adaptive. */
  fixedMs?: number;
  /** Adaptive: delay = multiplier × the quantile of recent handshakes. Defaults 3 and 0.9. */
  multiplier?: number;
  quantile?: number;
  /** Adaptive bounds; defaults 150 ms and 2000 ms. */
  floorMs?: number;
  capMs?: number;
  /** Adaptive, before any handshake was seen: the cap (no guess at a pool's normal); default 2000 ms. */
  initialMs?: number;
  /** Handshakes remembered per pool; default 64. */
  window?: number;
}

/** Recent handshake times of one pool, in a fixed ring (no allocation per sample). */
export class HandshakeTimes {
  private readonly ring: Float64Array;
  private readonly scratch: Float64Array;
  private count = 0;
  private next = 0;
  private cached = -1;
  /**
   * Samples in the ring whose multiple is at or below the floor. While more of them than the quantile's index
   * are, the quantile's multiple is too and the delay is the floor: no sort (loopback and near upstreams).
   */
  private low = 0;

  constructor(private readonly o: Required<Omit<HedgeDelayOptions, 'fixedMs'>> & { fixedMs: number }) {
    this.ring = new Float64Array(Math.max(4, o.window));
    this.scratch = new Float64Array(this.ring.length);
  }

  record(ms: number): void {
    if (!(ms >= 0)) return;
    if (this.count === this.ring.length && this.atFloor(this.ring[this.next]!)) this.low--;
    if (this.atFloor(ms)) this.low++;
    this.ring[this.next] = ms;
    this.next = (this.next + 1) % this.ring.length;
    if (this.count < this.ring.length) this.count++;
    this.cached = -1;
  }

  /** The delay after which a dial through this pool is hedged, in ms. */
  hedgeDelayMs(): number {
    if (this.o.fixedMs > 0) return this.o.fixedMs;
    if (this.count === 0) return this.o.initialMs;
    if (this.cached >= 0) return this.cached;
    const index = Math.min(this.count - 1, Math.floor(this.o.quantile * this.count));
    if (this.low > index) {
      this.cached = Math.round(Math.min(this.o.capMs, this.o.floorMs));
      return this.cached;
    }
    // Each dial records a handshake, so this would run once per new tunnel: sorted in a reused typed array
    // (numeric order natively, no comparator calls, no array per dial).
    const sorted = this.scratch.subarray(0, this.count);
    sorted.set(this.ring.subarray(0, this.count));
    sorted.sort();
    const q = sorted[index]!;
    this.cached = Math.round(Math.min(this.o.capMs, Math.max(this.o.floorMs, q * this.o.multiplier)));
    return this.cached;
  }

  private atFloor(ms: number): boolean {
    return ms * this.o.multiplier <= this.o.floorMs;
  }
}

/** One HandshakeTimes per pool (keyed by the pool object, so a closed pool's history goes with it). */
export class HedgeDelays {
  private readonly byPool = new WeakMap<object, HandshakeTimes>();
  private readonly o: Required<Omit<HedgeDelayOptions, 'fixedMs'>> & { fixedMs: number };

  constructor(options: HedgeDelayOptions = {}) {
    this.o = {
      fixedMs: Math.max(0, options.fixedMs ?? 0),
      multiplier: options.multiplier ?? 3,
      quantile: Math.min(1, Math.max(0, options.quantile ?? 0.9)),
      floorMs: options.floorMs ?? 150,
      capMs: options.capMs ?? 2000,
      initialMs: options.initialMs ?? options.capMs ?? 2000,
      window: options.window ?? 64,
    };
  }

  for(pool: object): HandshakeTimes {
    let t = this.byPool.get(pool);
    if (!t) {
      t = new HandshakeTimes(this.o);
      this.byPool.set(pool, t);
    }
    return t;
  }
}
