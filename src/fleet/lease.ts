// A named lease with expiry in Redis, for "one daemon of the fleet does this" (e.g. follows a given order).
// Taking it is SET key owner NX PX ttl; renewing and releasing compare the owner first (one Lua script
// each), so a daemon whose lease ran out can never extend or drop the lease another daemon took over. A
// holder that dies stops renewing and the lease expires after at most `ttlMs`: then another daemon's
// acquire succeeds. LeaseKeeper renews what it holds every ttl/3 and reports leases it lost.
import type { Redis } from 'ioredis';
import type { OrderClaims } from '../orders/types.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { RedisConnection } from '../store/redis-connection.ts';
import { DEFAULT_REDIS_PREFIX, RedisKeys } from '../store/redis-keys.ts';
import { callScript, defineScripts } from '../store/redis.ts';
import { InternalError } from '../errors/rotor-error.ts';

const RENEW = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`;
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;
const SCRIPTS = {
  rotorLeaseRenew: { numberOfKeys: 1, lua: RENEW },
  rotorLeaseRelease: { numberOfKeys: 1, lua: RELEASE },
};

export interface LeasesOptions {
  /** This daemon's identity (unique in the fleet, e.g. hostname:pid:random). */
  owner: string;
  /** How long a lease lives without renewal (ms). */
  ttlMs: number;
  prefix?: string;
}

/** Leases of one owner. Every method fails with StoreUnavailableError when Redis cannot be reached. */
export class Leases {
  readonly owner: string;
  readonly ttlMs: number;
  private readonly keys: RedisKeys;

  constructor(
    private readonly connection: RedisConnection,
    options: LeasesOptions,
  ) {
    if (!(options.ttlMs > 0)) throw new InternalError('ttlMs must be positive');
    this.owner = options.owner;
    this.ttlMs = Math.ceil(options.ttlMs);
    this.keys = new RedisKeys(options.prefix ?? DEFAULT_REDIS_PREFIX);
    defineScripts(connection.client, SCRIPTS);
  }

  /** Takes the lease if nobody holds it (or re-takes our own). True when we hold it now. */
  async acquire(name: string): Promise<boolean> {
    return this.connection.run(`lease ${name}`, async (c: Redis) => {
      if ((await c.set(this.keys.lease(name), this.owner, 'PX', this.ttlMs, 'NX')) === 'OK') return true;
      return (await callScript(c, 'rotorLeaseRenew', [this.keys.lease(name), this.owner, this.ttlMs])) === 1;
    });
  }

  /** Extends our lease by ttlMs; false when it is not ours (expired, or taken over). */
  async renew(name: string): Promise<boolean> {
    return this.connection.run(
      `lease ${name}`,
      async (c) => (await callScript(c, 'rotorLeaseRenew', [this.keys.lease(name), this.owner, this.ttlMs])) === 1,
    );
  }

  /** Drops our lease (so another daemon can take it at once); false when it was not ours. */
  async release(name: string): Promise<boolean> {
    return this.connection.run(
      `lease ${name}`,
      async (c) => (await callScript(c, 'rotorLeaseRelease', [this.keys.lease(name), this.owner])) === 1,
    );
  }

  /** Who holds the lease now (null: nobody). */
  async holder(name: string): Promise<string | null> {
    return this.connection.run(`lease ${name}`, (c) => c.get(this.keys.lease(name)));
  }
}

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
    readonly leases: Leases,
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
