// Opens the store named by config `store.path`: a file path (or ':memory:') selects SQLite, a redis:// URL
// the fleet's Redis driver. The Redis driver (and ioredis under it) is imported only when a redis:// URL is
// opened, so a daemon on SQLite never loads it (docs/benchmarks.md "Idle RSS").
import { SqliteStore, type SqliteStoreOptions } from './sqlite.ts';
import { StoreError } from './errors.ts';
import type { Store } from './types.ts';
import type { RedisStore, RedisStoreOptions } from './redis.ts';
import type { RedisConnection } from './redis-connection.ts';
import type { FleetState } from './fleet-state.ts';

/** SQLite only, opened synchronously; StoreError STORE_UNSUPPORTED for a redis:// URL (use openStoreFor). */
export function openStore(path: string, options: SqliteStoreOptions = {}): Store {
  if (isRedisUrl(path))
    throw new StoreError(
      'STORE_UNSUPPORTED',
      'store.path: a redis:// URL is opened by openStoreFor (the Redis driver connects asynchronously)',
    );
  return new SqliteStore(path, options);
}

/** Whether `store.path` names Redis (redis:// or rediss://) rather than a SQLite file. */
export function isRedisUrl(path: string): boolean {
  return /^rediss?:\/\//i.test(path);
}

/**
 * Opens either driver from `store.path`: a redis:// or rediss:// URL selects the Redis driver (connected
 * before it resolves; StoreUnavailableError when Redis cannot be reached), anything else SQLite.
 */
export async function openStoreFor(path: string, options: SqliteStoreOptions & RedisStoreOptions = {}): Promise<Store> {
  if (isRedisUrl(path)) {
    const { openRedisStore } = await import('./redis.ts');
    return openRedisStore(path, options);
  }
  return new SqliteStore(path, options);
}

/**
 * The Redis connection a fleet shares with the store, or undefined for a store that is not shared (SQLite).
 * Told apart by shape: an instanceof test would load the Redis driver (and ioredis) into every daemon.
 */
export function sharedConnection(store: Store): RedisConnection | undefined {
  const s = store as Partial<Pick<RedisStore, 'connection' | 'keys'>>;
  return s.connection !== undefined && s.keys !== undefined ? s.connection : undefined;
}

/** The fleet's shared state on this store, or undefined for a store that is not shared (SQLite). */
export function sharedFleetState(store: Store): FleetState | undefined {
  const s = store as Partial<Pick<RedisStore, 'connection' | 'keys'>>;
  return s.connection !== undefined && s.keys !== undefined ? { connection: s.connection, prefix: s.keys.prefix } : undefined;
}
