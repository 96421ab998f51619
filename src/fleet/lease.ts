// Leases held for "one daemon of the fleet does this" (e.g. follows a given order), on the fleet's shared
// state (Backends.fleet leases(); in Redis, src/store/redis-fleet-leases.ts): a lease another daemon took
// over can never be extended or dropped by the one whose lease ran out. LeaseKeeper renews what it holds every
// ttl/3 and reports leases it lost.
import type { OrderClaims } from '../orders/types.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { LeaseStore } from '../store/fleet-state.ts';

export interface LeaseKeeperOptions {
  logger?: Logger;
  /** Called once for each held lease that could not be renewed because another owner has it or it expired. */
  onLost?: (name: string) => void;
  /** Renewal period; default ttl/3 (two missed renewals still keep the lease). */
  renewEveryMs?: number;
}

/**
 * Holds a set of leases and renews them on a timer. When Redis is unreachable the renewals fail and are
 * retried on the next tick; leases whose TTL passes meanwhile are found lost at the first renewal after
 * Redis returns (the holder must then stop the work: another daemon may have taken it over).
 */
export class LeaseKeeper implements OrderClaims {
  private readonly held = new Set<string>();
  private readonly timer: NodeJS.Timeout;
  private renewing: Promise<void> | undefined;

  constructor(
    readonly leases: LeaseStore,
    private readonly options: LeaseKeeperOptions = {},
  ) {
    this.timer = setInterval(() => void this.renewAll(), options.renewEveryMs ?? Math.max(10, Math.floor(leases.ttlMs / 3)));
    this.timer.unref();
  }

  /** Tries to take the lease; when taken it is kept renewed until release/close. */
  async acquire(name: string): Promise<boolean> {
    const ok = await this.leases.acquire(name);
    if (ok) this.held.add(name);
    return ok;
  }

  isHeld(name: string): boolean {
    return this.held.has(name);
  }

  heldNames(): string[] {
    return [...this.held];
  }

  async release(name: string): Promise<void> {
    this.held.delete(name);
    await this.leases.release(name);
  }

  /** One renewal round (the timer calls it; tests may too). */
  renewAll(): Promise<void> {
    this.renewing ??= this.renewRound().finally(() => {
      this.renewing = undefined;
    });
    return this.renewing;
  }

  /** Stops renewing and releases everything still held (best effort when Redis is down). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.renewing;
    const names = [...this.held];
    this.held.clear();
    await Promise.allSettled(names.map((n) => this.leases.release(n)));
  }

  private async renewRound(): Promise<void> {
    for (const name of [...this.held]) {
      let ok: boolean;
      try {
        ok = await this.leases.renew(name);
      } catch {
        // Redis unreachable: already logged by the connection; try again next tick.
        return;
      }
      if (!ok && this.held.delete(name)) {
        this.options.logger?.warn({ lease: name }, 'lease lost (expired or taken over by another instance)');
        this.options.onLost?.(name);
      }
    }
  }
}
