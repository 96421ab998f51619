// What one signed-in customer may cost the store through the portal. Its usage rows and its recent connections
// are read from the connection log's store, and a store may answer them by reading far more than the customer's
// own (a Redis log reads every customer's records for a filter by user). So each customer has a bucket of store
// reads: `burst` at once, then one every `everyMs` (the page polls its connections every 5 s, and reads its usage
// when shown); a read past it is refused 429 SLOW_DOWN with Retry-After, without touching the store. The same
// read asked again while one is in flight shares it, and a connections read is kept `keepMs` for the next poll
// (two tabs, or a page and a script, cost one read). Tables are bounded LRUs.
import { LRUCache } from 'lru-cache';
import { PortalError } from './errors.ts';

export interface ReadsOptions {
  burst?: number;
  everyMs?: number;
  keepMs?: number;
  now?: () => number;
}

export class SlowDownError extends PortalError {
  constructor(readonly retryAfterSeconds: number) {
    super(429, 'SLOW_DOWN', `too many reads of your usage and connections: try again in ${retryAfterSeconds} s`);
  }
}

interface Bucket {
  tokens: number;
  at: number;
}

export class CustomerReads {
  private readonly burst: number;
  private readonly everyMs: number;
  private readonly keepMs: number;
  private readonly now: () => number;
  private readonly buckets: LRUCache<string, Bucket>;
  /** Reads in flight, by customer and query: shared by whoever asks the same meanwhile. */
  private readonly inFlight = new Map<string, Promise<unknown>>();
  /** Answers kept for `keepMs` (the reads asked with `keep`). */
  private readonly kept: LRUCache<string, { at: number; value: unknown }>;

  constructor(options: ReadsOptions = {}) {
    this.burst = options.burst ?? 10;
    this.everyMs = options.everyMs ?? 2000;
    this.keepMs = options.keepMs ?? 4000;
    this.now = options.now ?? Date.now;
    this.buckets = new LRUCache({ max: 10_000 });
    this.kept = new LRUCache({ max: 256 });
  }

  /** `load()` for `user`'s query `key`, under its bucket; `keep`: the answer serves the same query for keepMs. */
  read<T>(user: string, key: string, load: () => Promise<T>, keep = false): Promise<T> {
    const k = `${user}\u0000${key}`;
    const now = this.now();
    const kept = keep ? this.kept.get(k) : undefined;
    if (kept !== undefined && now - kept.at < this.keepMs) return Promise.resolve(kept.value as T);
    const shared = this.inFlight.get(k);
    if (shared !== undefined) return shared as Promise<T>;
    this.take(user, now);
    const value = load();
    this.inFlight.set(k, value);
    const done = (): void => {
      if (this.inFlight.get(k) === value) this.inFlight.delete(k);
    };
    value.then((v) => {
      done();
      if (keep) this.kept.set(k, { at: this.now(), value: v });
    }, done);
    return value;
  }

  /** One token of `user`'s bucket, or SlowDownError. */
  private take(user: string, now: number): void {
    const b = this.buckets.get(user) ?? { tokens: this.burst, at: now };
    b.tokens = Math.min(this.burst, b.tokens + (now - b.at) / this.everyMs);
    b.at = now;
    if (b.tokens < 1) {
      this.buckets.set(user, b);
      throw new SlowDownError(Math.max(1, Math.ceil(((1 - b.tokens) * this.everyMs) / 1000)));
    }
    b.tokens -= 1;
    this.buckets.set(user, b);
  }
}
