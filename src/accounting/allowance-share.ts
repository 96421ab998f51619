// One user's share of a fleet-wide allowance as the data path reads it: data held here, below the gateway, and
// kept up to date by the fleet (src/fleet/allowance.ts, whose UserAllowance extends it) off the path. A
// connection's admission and every chunk read and spend it without running the fleet's code; a share that
// runs low is put on its RefillRequests, and the fleet is woken in a task of its own (not on the chunk's turn).
// See src/fleet/allowance.ts for the lease, the overdraft and the overshoot bound.

/** One user's share: `exhausted` and `spend` are the data path's; everything else is the fleet's books. */
export class AllowanceShare {
  /** Lease held as of the last sync (bytes), plus any offline allowance taken since. */
  held = 0;
  /** Spent since the last sync. */
  spent = 0;
  /** Bytes spent by traffic since the accounting layer last flushed (to find its non-traffic deltas). */
  unflushed = 0;
  unlimited = false;
  /** A sync with the shared store in flight (the fleet's). */
  syncing: Promise<void> | undefined;
  /** On the refill requests, not yet taken by the fleet. */
  queued = false;
  /** The last sync granted the whole lease it asked for: the fleet is not near this user's limit. */
  roomy = false;
  /** No data-path refill before this (epoch ms): after a failed sync or one that granted nothing. */
  quietUntil = 0;
  /**
   * The user's limit and fleet usage as this daemon last saw them (kept by the accounting layer): when a
   * sync finds the shared store without the user's usage (it restarted empty), it rebuilds it from these
   * instead of letting the user run unlimited. null: nothing to rebuild from.
   */
  seedLimit: number | null = null;
  seedUsed = 0;
  /**
   * Its first lease on this daemon is still on its way (taken after ready, src/fleet/allowance.ts lendAtStart):
   * `held` is the start share meanwhile, a bounded amount this daemon lends on its own as in an outage.
   */
  pending = false;

  constructor(
    readonly user: string,
    /** Refill when what is left of the lease falls to this. */
    protected readonly lowWater: number,
    private readonly requests: RefillRequests,
  ) {}

  /** Bytes this daemon may still relay for the user without asking the shared store (Infinity when unlimited). */
  get available(): number {
    return this.unlimited ? Infinity : this.held - this.spent;
  }

  /**
   * While a refill is on its way the user may run up to `lowWater` past the lease (the overdraft), so a fast
   * connection is not cut for the length of one round trip; the refill then reports the overdraft as used.
   * Only while the fleet has room (the last sync granted all it was asked): near the limit, or with no
   * refill asked for or in flight, the lease is the limit.
   */
  get exhausted(): boolean {
    return !this.unlimited && this.held - this.spent <= this.floor();
  }

  /** How far below zero the lease may go now: the overdraft while a refill is on its way (see above). */
  private floor(): number {
    return (this.syncing !== undefined || this.queued) && this.roomy ? -this.lowWater : 0;
  }

  /**
   * Admission of a connection while the first lease is on its way: asks for it ahead of the start's background
   * leases (once: the request's `queued` flag, then `syncing`); no store call here, the fleet's task sends it.
   */
  wanted(): void {
    if (this.pending && this.syncing === undefined && !this.queued) this.requests.add(this);
  }

  /** Counts relayed bytes; returns false once the allowance is spent (the caller stops the user). Sync, allocates nothing. */
  spend(bytes: number): boolean {
    this.spent += bytes;
    this.unflushed += bytes;
    if (this.unlimited) return true;
    const left = this.held - this.spent;
    if (left <= this.lowWater && this.syncing === undefined && !this.queued) this.requests.add(this);
    return left > this.floor();
  }
}

/**
 * The shares that ran low, for the fleet to refill: each is on it at most once (its `queued` flag), and the
 * fleet's refill runs from one setImmediate per batch, so the chunk that asked returns at once.
 */
export class RefillRequests {
  private waiting: AllowanceShare[] = [];
  private scheduled = false;
  private readonly drain = (): void => {
    this.scheduled = false;
    const batch = this.waiting;
    this.waiting = [];
    for (const share of batch) {
      share.queued = false;
      this.refill(share);
    }
  };

  constructor(
    private readonly now: () => number,
    /** The fleet's refill (a sync asking for a slice), run in a task of its own. */
    private readonly refill: (share: AllowanceShare) => void,
  ) {}

  add(share: AllowanceShare): void {
    // After a failed sync, or one that granted nothing, the data path waits for the fleet's timer.
    if (this.now() < share.quietUntil) return;
    share.queued = true;
    this.waiting.push(share);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.drain);
    }
  }
}
