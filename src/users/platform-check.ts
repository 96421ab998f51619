// The start's look at every user's platform side (the platform-side limit sync's first pass: GetProxyUserInfo
// per user, usage adopted, a drifted limit set again), run in the background with bounded concurrency so the
// daemon is ready in seconds whatever the number of users: /readyz does not wait for it, the proxy serves
// from the store's figures meanwhile (Rotor's own counters are the limit it enforces; the platform's figure
// only ever raises them). Progress: an info line every `progressMs` and at the end, and the gauge
// rotor_users_platform_check{state="checked"|"failed"|"pending"}.
// At 100,000 users and 20 ms of platform latency a one-at-a-time pass took ~35 minutes before the daemon
// was ready; 16 at a time it takes ~2 minutes in the background.
import type { SyncedUser, UserSyncResult } from '../accounting/platform-sync.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { Logger } from '../telemetry/logger.ts';

export interface PlatformCheckOptions {
  /** The per-user check (PlatformLimitSync.syncUser). */
  check: (user: SyncedUser) => Promise<UserSyncResult>;
  /** Calls at once; default 16. */
  concurrency?: number;
  metrics?: Pick<Metrics, 'usersPlatformCheck'>;
  logger?: Logger;
  /** Progress line interval; default 10 s. */
  progressMs?: number;
}

export interface PlatformCheckProgress {
  total: number;
  checked: number;
  failed: number;
  done: boolean;
}

export class PlatformCheck {
  private total = 0;
  private checked = 0;
  private failed = 0;
  private finished = false;
  private stopped = false;
  private running: Promise<void> | undefined;
  /** Users for a pass asked for while one runs (a reload): it follows when the running one ends. */
  private again: readonly SyncedUser[] | undefined;

  constructor(private readonly options: PlatformCheckOptions) {}

  /**
   * Starts a pass over `users` and returns at once; `done()` resolves at its end. Asked again while a pass
   * runs (a reload), the new pass follows that one.
   */
  start(users: readonly SyncedUser[]): void {
    if (this.running) {
      this.again = users;
      return;
    }
    this.total = users.length;
    this.checked = 0;
    this.failed = 0;
    this.finished = false;
    this.publish();
    const started = Date.now();
    const log = this.options.logger;
    log?.info({ users: this.total, concurrency: this.concurrency() }, 'checking every user against the platform in the background');
    const timer = setInterval(
      () => log?.info({ ...this.progress(), ms: Date.now() - started }, 'platform check of users: progress'),
      this.options.progressMs ?? 10_000,
    );
    timer.unref();
    let next = 0;
    const worker = async (): Promise<void> => {
      while (!this.stopped && next < users.length) {
        const u = users[next++]!;
        let outcome: UserSyncResult['outcome'] = 'error';
        try {
          outcome = (await this.options.check(u)).outcome;
        } catch {
          // syncUser answers its failures; anything thrown is counted as one.
        }
        if (outcome === 'error') this.failed++;
        else this.checked++;
        if ((this.checked + this.failed) % 256 === 0) this.publish();
      }
    };
    this.running = Promise.all(Array.from({ length: Math.min(this.concurrency(), Math.max(1, users.length)) }, worker)).then(async () => {
      clearInterval(timer);
      this.finished = !this.stopped;
      this.publish();
      if (this.finished) log?.info({ ...this.progress(), ms: Date.now() - started }, 'platform check of users finished');
      this.running = undefined;
      const again = this.again;
      this.again = undefined;
      if (again !== undefined && !this.stopped) {
        this.start(again);
        await this.running;
      }
    });
  }

  progress(): PlatformCheckProgress {
    return { total: this.total, checked: this.checked, failed: this.failed, done: this.finished };
  }

  /** Resolves when the pass ended (or was stopped). */
  done(): Promise<void> {
    return this.running ?? Promise.resolve();
  }

  /** Stops taking users (calls in flight end on their own). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.again = undefined;
    await this.running;
  }

  private concurrency(): number {
    return Math.max(1, this.options.concurrency ?? 16);
  }

  private publish(): void {
    const g = this.options.metrics?.usersPlatformCheck;
    if (!g) return;
    g.set({ state: 'checked' }, this.checked);
    g.set({ state: 'failed' }, this.failed);
    g.set({ state: 'pending' }, this.total - this.checked - this.failed);
  }
}
