// `user.expired`: off the data path, every `intervalMs` the watcher reads each user's expiry through an
// injected function and emits the event once the time has passed, once per (user, expiry) across restarts
// and daemons (marker `expired:<user>:<expiresAt>`; a user given a new expiry can expire again).
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
  constructor(private readonly options: ExpiryWatcherOptions) {
    super(options.intervalMs ?? 1_000);
    this.now = options.now ?? Date.now;
  }

  protected async checkOnce(): Promise<void> {
    const now = this.now();
    for (const r of this.options.read()) {
      if (r.expiresAt === null || r.expiresAt > now || this.announced.get(r.user) === r.expiresAt) continue;
      try {
        await this.options.events.emit('user.expired', { user: r.user, expiresAt: new Date(r.expiresAt).toISOString() }, { marker: `expired:${r.user}:${r.expiresAt}` });
        this.announced.set(r.user, r.expiresAt);
      } catch (err) {
        this.options.logger?.warn({ err, user: r.user }, 'expiry event could not be recorded');
        return;
      }
    }
  }
}
