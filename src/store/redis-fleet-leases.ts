// A named lease with expiry in Redis, for "one daemon of the fleet does this" (e.g. follows a given order).
// Taking it is SET key owner NX PX ttl; renewing and releasing compare the owner first (one Lua script
// each), so a daemon whose lease ran out can never extend or drop the lease another daemon took over. A
// holder that dies stops renewing and the lease expires after at most `ttlMs`: then another daemon's
// acquire succeeds (src/fleet/lease.ts LeaseKeeper renews what it holds).
import type { Redis } from 'ioredis';
import { InternalError } from '../errors/rotor-error.ts';
import type { LeaseStore } from './fleet-state.ts';
import type { RedisConnection } from './redis-connection.ts';
import { DEFAULT_REDIS_PREFIX, RedisKeys } from './redis-keys.ts';
import { callScript, defineScripts } from './redis-scripts.ts';

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
export class Leases implements LeaseStore {
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
