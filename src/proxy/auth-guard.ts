// Back-off for failed proxy logins, per client address and per user name (known or not: the same rules for
// both, so the refusals say nothing about which names exist). Failures inside `failureWindowMs` are counted;
// at `sourceFailures` (per address) or `userFailures` (per name) the address or name is blocked for `blockMs`:
// its attempts are refused without a password check (a credential already verified in this process still
// passes — src/proxy/auth-check.ts — so a customer behind the same address as an attacker keeps working).
// Every failure is answered no sooner than `failureDelayMs` after it arrived (a floor that also hides what
// the check cost), and one log line per address per `logIntervalMs` says how many failures came from it.
// Both tables are bounded (least recently used dropped first), as are the answers waiting for their delay.
import { LRUCache } from 'lru-cache';
export { sourceKey } from '../connlog/refusals.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';

export interface AuthSettings {
  /**
   * Credential pairs answered lately (each answered again with one look-up), and as many refused ones by
   * digest. Verified passwords are kept one per user under them (auth-check.ts), whatever this says.
   */
  cacheSize: number;
  /** Password checks waiting for the hash queue from one address at most; beyond, refused at once. */
  maxPendingPerSource: number;
  /** A failed login is answered no sooner than this after it arrived. */
  failureDelayMs: number;
  /** Failures from one address (IPv6: its /64) within failureWindowMs that block it. */
  sourceFailures: number;
  /** Failures for one user name within failureWindowMs that block it. */
  userFailures: number;
  failureWindowMs: number;
  /** How long a blocked address or name is refused without a check. */
  blockMs: number;
  /** Addresses and names tracked at most. */
  trackedMax: number;
  /** One log line per address per this interval. */
  logIntervalMs: number;
}

export const AUTH_DEFAULTS: AuthSettings = {
  cacheSize: 10_000,
  maxPendingPerSource: 8,
  failureDelayMs: 250,
  sourceFailures: 20,
  userFailures: 50,
  failureWindowMs: 60_000,
  blockMs: 60_000,
  trackedMax: 10_000,
  logIntervalMs: 60_000,
};

/** rotor_auth_failures_total's reasons. */
export type AuthFailureReason = 'credentials' | 'blocked_source' | 'blocked_user' | 'busy';

interface Tally {
  windowStart: number;
  failures: number;
  blockedUntil: number;
}

interface SourceTally extends Tally {
  /** Failures since the last log line, and when that line was written. */
  unlogged: number;
  loggedAt: number;
}

/** Answers waiting for their delay at most; beyond, answered at once (a timer each, so bounded). */
const MAX_DELAYED = 4096;

export class AuthGuard {
  private readonly sources: LRUCache<string, SourceTally>;
  private readonly names: LRUCache<string, Tally>;
  private readonly pending = new Map<string, number>();
  private delayed = 0;

  constructor(
    readonly settings: AuthSettings,
    private readonly options: { metrics?: Metrics | undefined; logger?: Logger | undefined; now?: () => number } = {},
  ) {
    this.sources = new LRUCache({ max: Math.max(1, settings.trackedMax) });
    this.names = new LRUCache({ max: Math.max(1, settings.trackedMax) });
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }

  /** Why an attempt from `source` for `name` is refused without a check now, or undefined. */
  blocked(source: string, name: string): 'blocked_source' | 'blocked_user' | undefined {
    const now = this.now();
    if ((this.sources.get(source)?.blockedUntil ?? 0) > now) return 'blocked_source';
    if ((this.names.get(name)?.blockedUntil ?? 0) > now) return 'blocked_user';
    return undefined;
  }

  /** Reserves one of the address's pending checks; false: it has too many waiting already. */
  enter(source: string): boolean {
    const n = this.pending.get(source) ?? 0;
    if (n >= this.settings.maxPendingPerSource) return false;
    this.pending.set(source, n + 1);
    return true;
  }

  leave(source: string): void {
    const n = (this.pending.get(source) ?? 1) - 1;
    if (n <= 0) this.pending.delete(source);
    else this.pending.set(source, n);
  }

  /** Counts a failed attempt (metric, back-off, the address's log line). */
  failed(source: string, name: string, reason: AuthFailureReason): void {
    this.options.metrics?.authFailures.inc({ reason });
    const now = this.now();
    // Refusals of a blocked address or name do not extend its block: it ends on time, and the next
    // `failures` attempts decide again.
    // Only a wrong password counts towards a block: a check shed for a full queue proves nothing.
    if (reason === 'credentials') {
      this.tally(this.names, name, () => ({ windowStart: now, failures: 0, blockedUntil: 0 }), this.settings.userFailures, now);
    }
    let s = this.sources.get(source);
    if (!s) {
      s = { windowStart: now, failures: 0, blockedUntil: 0, unlogged: 0, loggedAt: -Infinity };
      this.sources.set(source, s);
    }
    if (reason === 'credentials') this.tally(this.sources, source, () => s, this.settings.sourceFailures, now);
    s.unlogged++;
    if (now - s.loggedAt >= this.settings.logIntervalMs) {
      this.options.logger?.warn(
        { source, failures: s.unlogged, ...(s.blockedUntil > now ? { blockedUntil: new Date(s.blockedUntil).toISOString() } : {}) },
        'failed proxy logins from this address',
      );
      s.unlogged = 0;
      s.loggedAt = now;
    }
  }

  private tally<T extends Tally>(table: LRUCache<string, T>, key: string, make: () => T, limit: number, now: number): void {
    let t = table.get(key);
    if (!t) {
      t = make();
      table.set(key, t);
    }
    if (now - t.windowStart >= this.settings.failureWindowMs || (t.blockedUntil !== 0 && t.blockedUntil <= now)) {
      t.windowStart = now;
      t.failures = 0;
      t.blockedUntil = 0;
    }
    t.failures++;
    if (limit > 0 && t.failures >= limit && t.blockedUntil <= now) t.blockedUntil = now + this.settings.blockMs;
  }

  /** `value` once failureDelayMs have passed since `startedAt` (at once when too many answers wait). */
  late<T>(value: T, startedAt: number): T | Promise<T> {
    const wait = startedAt + this.settings.failureDelayMs - this.now();
    if (wait <= 0 || this.delayed >= MAX_DELAYED) return value;
    this.delayed++;
    return new Promise<T>((resolve) => {
      setTimeout(() => {
        this.delayed--;
        resolve(value);
      }, wait).unref();
    });
  }
}
