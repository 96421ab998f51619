// Opens the store named by config `store.path`: a file path (or ':memory:') selects SQLite, a redis:// URL
// the fleet's Redis driver. The Redis driver (and ioredis under it) is imported only when a redis:// URL is
// opened, so a daemon on SQLite never loads it (docs/benchmarks.md "Idle RSS").
import { SqliteStore, type SqliteStoreOptions } from './sqlite.ts';
import { StoreError } from './errors.ts';
import type { Store } from './types.ts';
import type { RedisStoreOptions } from './redis.ts';

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
