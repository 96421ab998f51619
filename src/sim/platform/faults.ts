// Fault knobs for tests, applied to calls on the seed's paths only (never to /sim routes).

export interface CallFault {
  /** how many matching calls the fault still applies to (Infinity = until cleared) */
  count: number;
  /** only calls of this operation (interface name); absent = every operation */
  operation?: string;
  /** for failures: the fraction of matching calls that fail (default 1) */
  fraction?: number;
}

export type OrderOutcome = 'fail' | 'partial';

/**
 * How DrawByPwd lays out its answer (the seed does not say what `proxyUrl` holds; every reading is possible):
 * - 'lines' (default): one item, proxyUrl = the first drawn line, list = every line (form by product)
 * - 'line': one item per node, proxyUrl = the full line, list empty
 * - 'gateway-urls': per gateway port, proxyUrl = host:port, list = socks5://user:pass@host:port lines
 * - 'gateway-colon': per gateway port, proxyUrl = host:port, list = host:port:user:pass
 * - 'gateway-pairs': per gateway port, proxyUrl = host:port, list = user:pass to be joined with it
 * - 'link': one item, proxyUrl = an extraction link whose body lists host:port:user:pass lines
 */
export type PwdDrawShape = 'lines' | 'line' | 'gateway-urls' | 'gateway-colon' | 'gateway-pairs' | 'link';
export const PWD_DRAW_SHAPES: readonly PwdDrawShape[] = ['lines', 'line', 'gateway-urls', 'gateway-colon', 'gateway-pairs', 'link'];

export interface FaultSettings {
  latencyMs?: number;
  /**
   * A platform that limits how much a merchant asks of it at once: a call on the seed's paths that arrives
   * while this many are being handled (latency included) is answered code 500 without doing anything
   * (counted in `busyRefused`); null ends it.
   */
  maxInFlight?: number | null;
  /** answer code 500 without doing anything */
  fail?: CallFault | null;
  /** do the work, change state, then destroy the socket without a reply */
  drop?: CallFault | null;
  callbacks?: boolean;
  /** the next `count` orders to finish end this way (partial: the later half of the lines fail) */
  orderOutcome?: { outcome: OrderOutcome; count: number } | null;
  /** the layout of DrawByPwd answers (not a fault: a reading of the seed another platform may choose) */
  pwdDrawShape?: PwdDrawShape;
  /**
   * Products whose DrawByPwd answers like a backconnect gateway: the same line on every draw (one gateway
   * credential per sub account and region), the exit rotating at the gateway on every connection. Replaces
   * the set; [] ends it.
   */
  backconnect?: string[];
  /**
   * Whether a retried reqId (same operation and params) gets its first answer again (replays.ts; default true).
   * Not a fault: the seed only asks the merchant to keep the reqId on a retry; false plays a platform that
   * processes every retry again.
   */
  replayReqIds?: boolean;
}

export class Faults {
  latencyMs = 0;
  fail: CallFault | null = null;
  drop: CallFault | null = null;
  orderOutcome: { outcome: OrderOutcome; count: number } | null = null;
  pwdDrawShape: PwdDrawShape = 'lines';
  backconnect: ReadonlySet<string> = new Set();
  replayReqIds = true;
  /** Calls waiting out `latencyMs` right now: a test can wait for a held call to land instead of sleeping. */
  held = 0;
  /** The `maxInFlight` knob: null = no limit. */
  maxInFlight: number | null = null;
  /** Calls on the seed's paths being handled now, the most there were at once, and those refused as too many. */
  inFlight = 0;
  peakInFlight = 0;
  busyRefused = 0;

  /** What reset() returns to: the sandbox's configured backconnect products. */
  private readonly initialBackconnect: ReadonlySet<string>;

  constructor(
    private readonly random: () => number,
    options: { backconnect?: readonly string[]; latencyMs?: number } = {},
  ) {
    this.initialBackconnect = new Set(options.backconnect ?? []);
    this.backconnect = this.initialBackconnect;
    this.initialLatencyMs = Math.max(0, options.latencyMs ?? 0);
    this.latencyMs = this.initialLatencyMs;
  }

  private readonly initialLatencyMs: number;

  set(settings: FaultSettings): void {
    if (settings.latencyMs !== undefined) this.latencyMs = Math.max(0, settings.latencyMs);
    if (settings.maxInFlight !== undefined) this.maxInFlight = settings.maxInFlight === null ? null : Math.max(1, settings.maxInFlight);
    if (settings.fail !== undefined) this.fail = settings.fail ? { ...settings.fail, count: settings.fail.count ?? Infinity } : null;
    if (settings.drop !== undefined) this.drop = settings.drop ? { ...settings.drop, count: settings.drop.count ?? Infinity } : null;
    if (settings.orderOutcome !== undefined) this.orderOutcome = settings.orderOutcome;
    if (settings.pwdDrawShape !== undefined && PWD_DRAW_SHAPES.includes(settings.pwdDrawShape)) this.pwdDrawShape = settings.pwdDrawShape;
    if (typeof settings.replayReqIds === 'boolean') this.replayReqIds = settings.replayReqIds;
    if (Array.isArray(settings.backconnect)) this.backconnect = new Set(settings.backconnect.filter((p) => typeof p === 'string'));
  }

  reset(): void {
    this.latencyMs = this.initialLatencyMs;
    this.maxInFlight = null;
    this.fail = null;
    this.drop = null;
    this.orderOutcome = null;
    this.pwdDrawShape = 'lines';
    this.backconnect = this.initialBackconnect;
    this.replayReqIds = true;
  }

  /** A call arrives: false when it is one too many (the `maxInFlight` knob); else it counts until `leave()`. */
  enter(): boolean {
    if (this.maxInFlight !== null && this.inFlight >= this.maxInFlight) {
      this.busyRefused += 1;
      return false;
    }
    this.inFlight += 1;
    if (this.inFlight > this.peakInFlight) this.peakInFlight = this.inFlight;
    return true;
  }

  leave(): void {
    this.inFlight -= 1;
  }

  /** Waits out the latency knob (read when the call arrives), counted in `held` meanwhile. */
  async hold(): Promise<void> {
    const ms = this.latencyMs;
    if (ms <= 0) return;
    this.held += 1;
    try {
      await new Promise((r) => setTimeout(r, ms));
    } finally {
      this.held -= 1;
    }
  }

  /** Consumes one use of the failure knob when it applies to this call. */
  takeFail(operation: string): boolean {
    return take(this.fail, operation, this.random) && this.spend('fail');
  }

  takeDrop(operation: string): boolean {
    // `fraction` applies to drops too (reliability tests drop 10% of replies); without it every matching call
    // drops, and no random number is drawn, so seeded runs without a fraction see the same sequence as before.
    return take(this.drop, operation, () => (this.drop?.fraction === undefined ? 0 : this.random())) && this.spend('drop');
  }

  takeOrderOutcome(): OrderOutcome | null {
    const o = this.orderOutcome;
    if (!o || o.count <= 0) return null;
    o.count -= 1;
    if (o.count <= 0) this.orderOutcome = null;
    return o.outcome;
  }

  private spend(which: 'fail' | 'drop'): boolean {
    const f = this[which];
    if (!f) return false;
    f.count -= 1;
    if (f.count <= 0) this[which] = null;
    return true;
  }
}

function take(f: CallFault | null, operation: string, random: () => number): boolean {
  if (!f || f.count <= 0) return false;
  if (f.operation && f.operation !== operation) return false;
  return random() < (f.fraction ?? 1);
}
