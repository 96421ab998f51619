// Opens the store named by config `store.path`: a file path (or ':memory:') selects SQLite, a redis:// URL
// the fleet's Redis driver, which implements the same Store interface (openStoreFor picks; openStore is the
// synchronous SQLite-only opener).
import { SqliteStore, type SqliteStoreOptions } from './sqlite.ts';
import { StoreError } from './errors.ts';
import type { Store } from './types.ts';
import { openRedisStore, type RedisStoreOptions } from './redis.ts';

export * from './types.ts';
export * from './errors.ts';
export { SqliteStore, migrate } from './sqlite.ts';
export { MIGRATIONS } from './migrations.ts';
export { RedisStore, openRedisStore, type RedisStoreOptions } from './redis.ts';
export { RedisKeys, DEFAULT_REDIS_PREFIX } from './redis-keys.ts';
export { RedisConnection, type RedisConnectionOptions } from './redis-connection.ts';

/** SQLite only, opened synchronously; StoreError STORE_UNSUPPORTED for a redis:// URL (use openStoreFor). */
export function openStore(path: string, options: SqliteStoreOptions = {}): Store {
  if (isRedisUrl(path)) throw new StoreError('STORE_UNSUPPORTED', 'store.path: a redis:// URL is opened by openStoreFor (the Redis driver connects asynchronously)');
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
  if (isRedisUrl(path)) return openRedisStore(path, options);
  return new SqliteStore(path, options);
}
