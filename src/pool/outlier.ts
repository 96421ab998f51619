// Outlier ejection, as Envoy does it: a node that fails `consecutiveFailures` times in a row, or whose
// failure share over `intervalMs` reaches `failurePercent` (once it carried `minRequests` attempts there), is
// ejected for baseEjectionMs × (its ejections so far), at most maxEjectionMs; never more than
// `maxEjectedPercent` of a pool at once (at least one node, as Envoy). A node that stays in service for
// maxEjectionMs after an ejection starts over at one base time. The pool keeps one OutlierState per node and
// asks here; the ejection itself is the pool's cooling (src/pool/pool.ts), so selection pays nothing more.

export interface OutlierSettings {
  /** Failures in a row that eject a node; 0 = off. Default 5. */
  consecutiveFailures?: number;
  /** Failure share (percent) over intervalMs that ejects a node; 0 = off. Default 85. */
  failurePercent?: number;
  /** Attempts a node must carry within intervalMs before its failure share counts. Default 20. */
  minRequests?: number;
  /** The failure-share window. Default 60000 ms. */
  intervalMs?: number;
  /** First ejection's length; the n-th lasts n times this. Default 30000 ms. */
  baseEjectionMs?: number;
  /** Longest ejection. Default 300000 ms. */
  maxEjectionMs?: number;
  /** Most of a pool ejected at once, percent (at least one node). 0 = never eject. Default 10. */
  maxEjectedPercent?: number;
}

/** One node's counts (kept by the pool beside its node). */
export interface OutlierState {
  consecutive: number;
  windowStart: number;
  windowOk: number;
  windowFailed: number;
  /** ejections so far (the multiplier of the next one) */
  ejections: number;
  /** epoch ms the current (or last) ejection ends; 0 = never ejected */
  ejectedUntil: number;
}

export type EjectionReason = 'consecutive' | 'failure_rate';

export function newOutlierState(): OutlierState {
  return { consecutive: 0, windowStart: 0, windowOk: 0, windowFailed: 0, ejections: 0, ejectedUntil: 0 };
}

export class OutlierDetector {
  private readonly consecutive: number;
  private readonly percent: number;
  private readonly minRequests: number;
  private readonly intervalMs: number;
  private readonly baseMs: number;
  private readonly maxMs: number;
  private readonly maxShare: number;

  constructor(settings: OutlierSettings = {}) {
    this.consecutive = Math.max(0, settings.consecutiveFailures ?? 5);
    this.percent = Math.max(0, settings.failurePercent ?? 85);
    this.minRequests = Math.max(1, settings.minRequests ?? 20);
    this.intervalMs = Math.max(1, settings.intervalMs ?? 60_000);
    this.baseMs = Math.max(1, settings.baseEjectionMs ?? 30_000);
    this.maxMs = Math.max(this.baseMs, settings.maxEjectionMs ?? 300_000);
    this.maxShare = Math.min(100, Math.max(0, settings.maxEjectedPercent ?? 10));
  }

  /** A node carried an attempt through. */
  success(s: OutlierState, now: number): void {
    s.consecutive = 0;
    this.roll(s, now);
    s.windowOk++;
  }

  /**
   * A node failed. Returns why it should be ejected now, or undefined; the pool then asks mayEject (the share)
   * and calls eject.
   */
  failure(s: OutlierState, now: number): EjectionReason | undefined {
    s.consecutive++;
    this.roll(s, now);
    s.windowFailed++;
    if (s.ejectedUntil > now) return undefined;
    if (this.consecutive > 0 && s.consecutive >= this.consecutive) return 'consecutive';
    const total = s.windowOk + s.windowFailed;
    if (this.percent > 0 && total >= this.minRequests && (s.windowFailed * 100) / total >= this.percent) return 'failure_rate';
    return undefined;
  }

  /** Whether one more node of a pool of `size`, `ejectedNow` of them out, may be ejected. */
  mayEject(size: number, ejectedNow: number): boolean {
    if (this.maxShare === 0 || size === 0) return false;
    const most = Math.max(1, Math.floor((size * this.maxShare) / 100));
    return ejectedNow < most;
  }

  /** Ejects the node: returns the epoch ms its ejection ends. */
  eject(s: OutlierState, now: number): number {
    // Back in service long enough since the last ejection: the multiplier starts over.
    if (s.ejectedUntil > 0 && now - s.ejectedUntil >= this.maxMs) s.ejections = 0;
    s.ejections++;
    s.ejectedUntil = now + Math.min(this.maxMs, this.baseMs * s.ejections);
    s.consecutive = 0;
    s.windowStart = now;
    s.windowOk = 0;
    s.windowFailed = 0;
    return s.ejectedUntil;
  }

  isEjected(s: OutlierState, now: number): boolean {
    return s.ejectedUntil > now;
  }

  private roll(s: OutlierState, now: number): void {
    if (now - s.windowStart >= this.intervalMs) {
      s.windowStart = now;
      s.windowOk = 0;
      s.windowFailed = 0;
    }
  }
}
