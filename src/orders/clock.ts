// Time and timers for the order surface, injectable so tests run fast and deterministic.

export interface OrdersClock {
  /** Epoch milliseconds. */
  now(): number;
  /** Runs fn after ms; returns a cancel function. Timers never keep the process alive by themselves. */
  schedule(ms: number, fn: () => void): () => void;
}

export const realClock: OrdersClock = {
  now: () => Date.now(),
  schedule(ms, fn) {
    const t = setTimeout(fn, Math.max(0, ms));
    t.unref();
    return () => clearTimeout(t);
  },
};
