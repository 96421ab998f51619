// The schedule both watchers share (quota thresholds, expiries): one round every `intervalMs` on an unref'd
// timer, rounds never overlapping (a slow store makes the next one wait rather than pile up), and a stop that
// waits for the round in progress so the store is never closed under it.
export abstract class PeriodicRound {
  private timer: NodeJS.Timeout | undefined;
  private round: Promise<void> | undefined;

  constructor(private intervalMs: number) {}

  /** A new interval (SIGHUP, events.checkMs): a running schedule restarts on it. */
  setIntervalMs(ms: number): void {
    if (ms === this.intervalMs) return;
    this.intervalMs = ms;
    if (this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
      this.start();
    }
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.check(), this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.round;
  }

  /** One round now, or the one already running. */
  check(): Promise<void> {
    this.round ??= this.checkOnce().finally(() => (this.round = undefined));
    return this.round;
  }

  protected abstract checkOnce(): Promise<void>;
}
