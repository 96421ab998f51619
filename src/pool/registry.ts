// Pools are created on first use per (user, product, region) and live until closed. The registry owns them
// so the admin API can list them and shutdown can stop them in one place.
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
}

export class PoolRegistry {
  private readonly pools = new Map<string, Pool>();
  private closed = false;

  constructor(private readonly options: PoolRegistryOptions) {}

  /** The pool for this key, created (empty; it draws on first acquire) when absent. */
  get(key: PoolKey): Pool {
    const id = poolKeyId(key);
    let pool = this.pools.get(id);
    if (!pool) {
      if (this.closed) throw new PoolEmptyError(id, 'pool registry closed');
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

  /** Closes and forgets one pool (the user's config changed, for instance). */
  delete(key: PoolKey): boolean {
    const id = poolKeyId(key);
    const pool = this.pools.get(id);
    if (!pool) return false;
    pool.close();
    return this.pools.delete(id);
  }

  close(): void {
    this.closed = true;
    for (const p of this.pools.values()) p.close();
    this.pools.clear();
  }
}
