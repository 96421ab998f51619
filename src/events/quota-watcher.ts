// Quota thresholds: off the data path, every `intervalMs` the watcher reads current-period usage and limits
// through an injected function and emits `user.quota.80` and `user.quota.100` the first time usage reaches
// 80 % and 100 % of the limit in that period. Once per (user, period, threshold) across restarts and
// daemons: each event carries the marker `quota:<threshold>:<user>:<periodKey>`, written with it atomically
// (src/store/events.ts). The source may give every user each round or only those whose usage, limit or
// period moved (the daemon's: accounting's change feed, so 10,000 idle users cost nothing per round); a user
// it stops mentioning keeps its entry until `forget` (a deleted user). Memory holds one small entry per user
// that crossed a threshold in its current period (the period and a bit per threshold settled), none for the
// others, and a store write happens only when a threshold is crossed.
import type { Logger } from '../telemetry/logger.ts';
import { PeriodicRound } from './periodic-round.ts';
import type { EventSink } from './types.ts';

/** One user's standing in its current quota period. */
export interface QuotaReading {
  user: string;
  /** Names the period: 'total' for a lifetime quota, else a key that changes at the period's boundary. */
  periodKey: string;
  usedBytes: number;
  /** -1 (or 0) = no quota: nothing to cross */
  limitBytes: number;
}

export type QuotaSource = () => Iterable<QuotaReading>;

export interface QuotaWatcherOptions {
  read: QuotaSource;
  events: EventSink;
  /** Default 1000 ms. */
  intervalMs?: number;
  logger?: Logger;
}

const THRESHOLDS = [80, 100] as const;
/** A marker of a bounded period is kept well past any calendar period (a month at most), then pruned. */
const PERIOD_MARKER_TTL_MS = 62 * 86_400_000;

export function quotaMarker(threshold: number, user: string, periodKey: string): string {
  return `quota:${threshold}:${user}:${periodKey}`;
}

export class QuotaWatcher extends PeriodicRound {
  /** user -> the period seen and the thresholds settled (emitted here, or found already emitted) in it */
  private readonly settled = new Map<string, { periodKey: string; done: number }>();
  /** Readings a failed store write left unchecked: checked first next round. */
  private pending: QuotaReading[] = [];
  /** Emit attempts and events actually written (the rest found their marker taken). */
  readonly stats = { attempts: 0, emitted: 0 };

  constructor(private readonly options: QuotaWatcherOptions) {
    super(options.intervalMs ?? 1_000);
  }

  /** The user is gone: drop what is remembered of it. */
  forget(user: string): void {
    this.settled.delete(user);
  }

  protected async checkOnce(): Promise<void> {
    const readings = [...this.pending, ...this.options.read()];
    this.pending = [];
    for (let i = 0; i < readings.length; i++) {
      const r = readings[i]!;
      if (!(r.limitBytes > 0)) continue;
      let state = this.settled.get(r.user);
      if (state !== undefined && state.periodKey !== r.periodKey) {
        this.settled.delete(r.user);
        state = undefined;
      }
      for (let t = 0; t < THRESHOLDS.length; t++) {
        const threshold = THRESHOLDS[t]!;
        const bit = 1 << t;
        if ((state?.done ?? 0) & bit || r.usedBytes * 100 < r.limitBytes * threshold) continue;
        this.stats.attempts++;
        try {
          const written = await this.options.events.emit(
            threshold === 80 ? 'user.quota.80' : 'user.quota.100',
            { user: r.user, period: r.periodKey, threshold, usedBytes: r.usedBytes, limitBytes: r.limitBytes },
            {
              marker: quotaMarker(threshold, r.user, r.periodKey),
              ...(r.periodKey === 'total' ? {} : { markerTtlMs: PERIOD_MARKER_TTL_MS }),
            },
          );
          if (written) this.stats.emitted++;
          if (state === undefined) {
            state = { periodKey: r.periodKey, done: 0 };
            this.settled.set(r.user, state);
          }
          state.done |= bit;
        } catch (err) {
          // Not settled: the next round tries again.
          this.options.logger?.warn({ err, user: r.user, threshold }, 'quota event could not be recorded');
          this.pending = readings.slice(i);
          return;
        }
      }
    }
  }
}
