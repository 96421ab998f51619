// `user.expired`: off the data path, every `intervalMs` the watcher reads expiries through an injected
// function and emits the event once the time has passed, once per (user, expiry) across restarts and daemons
// (marker `expired:<user>:<expiresAt>`; a user given a new expiry can expire again). The source may give every
// user each round or only the users whose expiry came due since its last call (the daemon's: the users
// directory's expiry queue, so the round costs nothing while nobody expires); a reading a failed store write
// left unchecked is kept for the next round.
import type { Logger } from '../telemetry/logger.ts';
import { PeriodicRound } from './periodic-round.ts';
import type { EventSink } from './types.ts';

export interface ExpiryReading {
  user: string;
  /** epoch ms; null = never */
  expiresAt: number | null;
}

export interface ExpiryWatcherOptions {
  read: () => Iterable<ExpiryReading>;
  events: EventSink;
  /** Default 1000 ms. */
  intervalMs?: number;
  now?: () => number;
  logger?: Logger;
}

export class ExpiryWatcher extends PeriodicRound {
  private readonly now: () => number;
  /** user -> the expiry already announced */
  private readonly announced = new Map<string, number>();
  private pending: ExpiryReading[] = [];
  constructor(private readonly options: ExpiryWatcherOptions) {
    super(options.intervalMs ?? 1_000);
    this.now = options.now ?? Date.now;
  }

  protected async checkOnce(): Promise<void> {
    const now = this.now();
    const readings = [...this.pending, ...this.options.read()];
    this.pending = [];
    for (let i = 0; i < readings.length; i++) {
      const r = readings[i]!;
      if (r.expiresAt === null || r.expiresAt > now || this.announced.get(r.user) === r.expiresAt) continue;
      try {
        await this.options.events.emit(
          'user.expired',
          { user: r.user, expiresAt: new Date(r.expiresAt).toISOString() },
          { marker: `expired:${r.user}:${r.expiresAt}` },
        );
        this.announced.set(r.user, r.expiresAt);
      } catch (err) {
        this.options.logger?.warn({ err, user: r.user }, 'expiry event could not be recorded');
        this.pending = readings.slice(i);
        return;
      }
    }
  }
}
