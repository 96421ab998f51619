// The connection log: the recorder, its stores beside the daemon's own (SQLite tables in the same file, or the
// fleet's Redis), the optional JSON-lines file, and the service the admin routes read. Assembled from config by
// src/daemon/connection-log.ts.
import type { RedisStore } from '../store/redis.ts';
import { SqliteStore } from '../store/sqlite.ts';
import type { Store } from '../store/types.ts';
import { RedisConnectionLog } from './redis-store.ts';
import { SqliteConnectionLog } from './sqlite-store.ts';
import type { ConnectionLogStore, RecordBounds } from './types.ts';
import { InternalError } from '../errors/rotor-error.ts';

export * from './types.ts';
export { ConnectionLog, connectionIds, unrecordedConnections } from './recorder.ts';
export { ConnectionLogService, ConnectionLogOffError } from './service.ts';
export { SqliteConnectionLog } from './sqlite-store.ts';
export { RedisConnectionLog } from './redis-store.ts';
export { JsonLinesFileSink } from './file-sink.ts';
export { USAGE_COLUMNS, COMPARE_COLUMNS, toCsv, amountFor, type UsageRow, type PlatformCompareRow, type PriceOf } from './usage.ts';

/** The connection-log tables next to the daemon's store. */
export function connectionLogStoreFor(store: Store, bounds: Partial<RecordBounds> = {}): ConnectionLogStore {
  if (store instanceof SqliteStore) return new SqliteConnectionLog(store.database(), bounds);
  if (isRedisStore(store)) return new RedisConnectionLog(store.connection, store.keys.prefix, bounds);
  throw new InternalError('the connection log needs the SQLite or the Redis store');
}

/** The Redis driver, told apart by its shape: an instanceof test would load it (and ioredis) into every daemon. */
function isRedisStore(store: Store): store is RedisStore {
  return 'connection' in store && 'keys' in store;
}
