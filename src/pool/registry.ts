// Pools are created on first use per (user, product, region). The registry owns them so the admin API can
// list them and shutdown can stop them in one place. A client chooses the region (and product) in its user
// name, so pools are bounded (issue 13): each user holds at most `maxPerUser` pools (making room evicts that
// user's least recently used idle pool; with none idle the new pool is refused), and a pool unused for
// `idleEvictMs` (longer than any sticky session lasts: 120 minutes) is closed, which removes its metric
// series too. The region codes themselves are checked against the platform's dictionaries by the gateway.
// A user at its bound who keeps naming other regions would close a pool and open (and draw for) another with
// every connection: a platform call per connection. So replacing a pool is rationed per user (a token bucket:
// `replacePerMinute`, a burst of twice maxPerUser: a working set moved whole, twice); past it the new pool is
// refused (PoolChurnError, 403 at the gateway) and the user's pools stay as they are. Opening a pool below
// the bound costs nothing.
import { RotorError } from '../errors/rotor-error.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { Drawer } from './drawer.ts';
import { Pool, type PoolSnapshot, type PoolTuning } from './pool.ts';
import { PoolEmptyError, poolKeyId, type PoolKey } from './types.ts';

export interface PoolRegistryOptions {
  /** Builds the drawer for a new pool (PwdDrawer or ApiDrawer from the user's config). */
  drawerFor: (key: PoolKey) => Drawer;
  /** Tuning for every pool; `tuningFor` may override per key. */
  tuning?: PoolTuning;
  tuningFor?: (key: PoolKey) => PoolTuning | undefined;
  now?: () => number;
  random?: () => number;
  metrics?: Metrics;
  logger?: Logger;
  /** Pools per user at most (config pool.maxPerUser). Default 32. */
  maxPerUser?: number;
  /** A pool not asked for this long, with nothing in use, is closed (config pool.idleEvictMs). Default 130 min. */
  idleEvictMs?: number;
  /**
   * Pools a user at maxPerUser may open per minute in place of others (config pool.replacePerMinute), with a burst
   * of 2 × maxPerUser. Default 6.
   */
  replacePerMinute?: number;
}

const DEFAULT_MAX_PER_USER = 32;
const DEFAULT_IDLE_EVICT_MS = 130 * 60_000;
const DEFAULT_REPLACE_PER_MINUTE = 6;

/** A new pool refused: the user holds maxPerUser pools and has replaced them too often lately. */
export class PoolChurnError extends RotorError {
  constructor(
    readonly user: string,
    maxPerUser: number,
    perMinute: number,
  ) {
    super(
      'POOL_CHURN',
      `too many regions or products at once: user ${user} holds ${maxPerUser} pools (pool.maxPerUser) and may replace ` +
        `${perMinute} a minute (pool.replacePerMinute); use one of its regions or try again shortly`,
      { httpStatus: 429 },
    );
  }
}

/** A user's pools, the one it was given last, and the bucket its replacements take from. */
interface UserPools {
  ids: Set<string>;
  /**
   * The pool the user was last given (gone with its pool): every tunnel asks, and most ask for their user's same
   * pool again, which is then found without joining the key into its id and hashing that new string (2.5 k
   * instructions per tunnel, a third of them the join, docs/benchmarks.md).
   */
  last: Pool | undefined;
  tokens: number;
  /** registry clock of the last refill */
  at: number;
}

export class PoolRegistry {
  private readonly pools = new Map<string, Pool>();
  /** user → its pools' ids: a user's pools without a pass over every user's (100,000 users). */
  private readonly byUser = new Map<string, UserPools>();
  /** pool id → when it was last asked for (registry clock) */
  private readonly lastUsed = new Map<string, number>();
  private readonly maxPerUser: number;
  private readonly idleEvictMs: number;
  private readonly replacePerMinute: number;
  /** the bucket's size: replacements a user may make at once */
  private readonly replaceBurst: number;
  private readonly now: () => number;
  private readonly sweeper: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly options: PoolRegistryOptions) {
    this.maxPerUser = Math.max(1, options.maxPerUser ?? DEFAULT_MAX_PER_USER);
    this.idleEvictMs = options.idleEvictMs ?? DEFAULT_IDLE_EVICT_MS;
    this.replacePerMinute = Math.max(0, options.replacePerMinute ?? DEFAULT_REPLACE_PER_MINUTE);
    this.replaceBurst = 2 * this.maxPerUser;
    this.now = options.now ?? Date.now;
    this.sweeper = setInterval(() => this.evictIdle(), Math.min(this.idleEvictMs, 60_000));
    this.sweeper.unref();
  }

  /** Closes every pool unused for idleEvictMs that has nothing in use. Returns how many it closed. */
  evictIdle(): number {
    const cutoff = this.now() - this.idleEvictMs;
    let n = 0;
    for (const [id, pool] of this.pools) {
      if ((this.lastUsed.get(id) ?? 0) <= cutoff && !pool.busy) {
        this.forget(id, pool, 'idle');
        n++;
      }
    }
    return n;
  }

  private forget(id: string, pool: Pool, why: string): void {
    this.remove(id, pool);
    this.options.logger?.debug({ pool: id, why }, 'pool closed');
  }

  private remove(id: string, pool: Pool): void {
    pool.close();
    this.pools.delete(id);
    this.lastUsed.delete(id);
    const mine = this.byUser.get(pool.key.user);
    if (mine?.last === pool) mine.last = undefined;
    mine?.ids.delete(id);
    if (mine?.ids.size === 0) this.byUser.delete(pool.key.user);
  }

  /**
   * Makes room for one more pool of `user`: at its bound, closes its least recently used idle pool if its bucket
   * allows a replacement now; throws when all of them are in use (PoolEmptyError) or it replaced too many
   * lately (PoolChurnError).
   */
  private makeRoom(user: string, id: string): void {
    const mine = this.byUser.get(user);
    const count = mine?.ids.size ?? 0;
    if (count < this.maxPerUser) return;
    let oldest: { id: string; pool: Pool; at: number } | undefined;
    for (const pid of mine!.ids) {
      const pool = this.pools.get(pid)!;
      const at = this.lastUsed.get(pid) ?? 0;
      if (!pool.busy && (!oldest || at < oldest.at)) oldest = { id: pid, pool, at };
    }
    if (!oldest) throw new PoolEmptyError(id, `user ${user} has ${count} pools in use (pool.maxPerUser)`);
    const now = this.now();
    const tokens = Math.min(this.replaceBurst, mine!.tokens + ((now - mine!.at) * this.replacePerMinute) / 60_000);
    mine!.at = now;
    if (tokens < 1) {
      mine!.tokens = tokens;
      throw new PoolChurnError(user, this.maxPerUser, this.replacePerMinute);
    }
    mine!.tokens = tokens - 1;
    this.forget(oldest.id, oldest.pool, 'room for another region');
    // Its last pool closed (maxPerUser 1): the bucket stays with the user for the pool about to open.
    if (!this.byUser.has(user)) this.byUser.set(user, mine!);
  }

  /** The gateway's PoolProvider (src/proxy/types.ts): the registry itself, so a dial calls nothing above it. */
  pool(key: PoolKey): Pool {
    return this.get(key);
  }

  /** The pool for this key, created (empty; it draws on first acquire) when absent. */
  get(key: PoolKey): Pool {
    const last = this.byUser.get(key.user)?.last;
    let pool: Pool;
    if (last !== undefined && last.key.productNo === key.productNo && last.key.region === key.region) pool = last;
    else {
      pool = this.lookup(key);
      // The user's entry exists now (lookup made it with the pool if it had none).
      this.byUser.get(key.user)!.last = pool;
    }
    // By the pool's own id: its hash is kept with the string.
    this.lastUsed.set(pool.id, this.now());
    return pool;
  }

  /** The pool for this key by its id, created when absent. */
  private lookup(key: PoolKey): Pool {
    const id = poolKeyId(key);
    let pool = this.pools.get(id);
    if (!pool) {
      if (this.closed) throw new PoolEmptyError(id, 'pool registry closed');
      this.makeRoom(key.user, id);
      const o = this.options;
      pool = new Pool({
        ...o.tuning,
        ...o.tuningFor?.(key),
        key,
        drawer: o.drawerFor(key),
        ...(o.now ? { now: o.now } : {}),
        ...(o.random ? { random: o.random } : {}),
        ...(o.metrics ? { metrics: o.metrics } : {}),
        ...(o.logger ? { logger: o.logger.child({ pool: id }) } : {}),
      });
      this.pools.set(id, pool);
      let mine = this.byUser.get(key.user);
      if (!mine) this.byUser.set(key.user, (mine = { ids: new Set(), last: undefined, tokens: this.replaceBurst, at: this.now() }));
      mine.ids.add(id);
    }
    return pool;
  }

  /** By id (`user/productNo/region`). */
  find(id: string): Pool | undefined {
    return this.pools.get(id);
  }

  list(): Pool[] {
    return [...this.pools.values()];
  }

  snapshot(): PoolSnapshot[] {
    return this.list().map((p) => p.snapshot());
  }

  /** The pools of one user. */
  ofUser(user: string): Pool[] {
    const mine = this.byUser.get(user);
    return mine ? [...mine.ids].map((id) => this.pools.get(id)!) : [];
  }

  /** Closes and forgets one pool (the user's config changed, for instance). */
  delete(key: PoolKey): boolean {
    const id = poolKeyId(key);
    const pool = this.pools.get(id);
    if (!pool) return false;
    this.remove(id, pool);
    return true;
  }

  close(): void {
    this.closed = true;
    clearInterval(this.sweeper);
    for (const p of this.pools.values()) p.close();
    this.pools.clear();
    this.byUser.clear();
  }
}
