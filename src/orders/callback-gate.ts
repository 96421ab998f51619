// Between a callback and the platform reads it causes. Anyone who can reach the callback port can send
// callbacks, and each would cost a platform call without a gate. The gate makes one (type, no) cost at most
// one read per `minIntervalMs`: a callback that arrives
// while that key's read runs, or within the interval after it, folds into one trailing read at the end of the
// interval (so the last state the platform announced is still read). The keys remembered are bounded (LRU).
import { LRUCache } from 'lru-cache';
import type { OrdersClock } from './clock.ts';

export interface CallbackGateOptions {
  clock: OrdersClock;
  /** Shortest time between two reads for one (type, no). Default 2000 ms. */
  minIntervalMs?: number;
  /** How many keys' last-read times are kept. Default 10,000. */
  maxKeys?: number;
}

interface KeyState {
  running: boolean;
  /** a trailing read is due (scheduled, or to follow the running one) */
  pending: boolean;
  lastStart: number;
}

export class CallbackGate {
  private readonly clock: OrdersClock;
  private readonly minIntervalMs: number;
  private readonly keys: LRUCache<string, KeyState>;

  constructor(options: CallbackGateOptions) {
    this.clock = options.clock;
    this.minIntervalMs = options.minIntervalMs ?? 2000;
    this.keys = new LRUCache<string, KeyState>({ max: options.maxKeys ?? 10_000 });
  }

  /** A read for `key` is already due: another callback for it changes nothing. */
  isPending(key: string): boolean {
    return this.keys.get(key)?.pending === true;
  }

  /**
   * Runs `read` for `key` now, later (folded with others), or not at all when a read is already due.
   * Returns what it did: 'run', 'deferred' (a trailing read will run) or 'coalesced' (one already will).
   */
  submit(key: string, read: () => Promise<void>): 'run' | 'deferred' | 'coalesced' {
    const now = this.clock.now();
    let s = this.keys.get(key);
    if (!s) {
      s = { running: false, pending: false, lastStart: -Infinity };
      this.keys.set(key, s);
    }
    if (s.pending) return 'coalesced';
    const state = s;
    const start = (): void => {
      state.pending = false;
      state.running = true;
      state.lastStart = this.clock.now();
      void read().finally(() => {
        state.running = false;
      });
    };
    if (s.running || now - s.lastStart < this.minIntervalMs) {
      s.pending = true;
      const wait = Math.max(0, s.lastStart + this.minIntervalMs - now);
      const fire = (): void => {
        // Still running after its interval (a slow platform): wait once more rather than run two at a time.
        if (state.running) {
          this.clock.schedule(this.minIntervalMs, fire);
          return;
        }
        start();
      };
      this.clock.schedule(wait, fire);
      return 'deferred';
    }
    start();
    return 'run';
  }
}
