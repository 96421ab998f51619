// The connection log, put together from config `log.access` and `billing` (the composition root calls
// createConnectionLog): the store beside the daemon's own (SQLite tables in the same file, or the fleet's
// Redis), the optional JSON-lines file, the recorder and the service the admin routes read.
import type { Config } from '../config/schema.ts';
import type { RedisStore } from '../store/redis.ts';
import { SqliteStore } from '../store/sqlite.ts';
import type { Store } from '../store/types.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { JsonLinesFileSink } from './file-sink.ts';
import { ConnectionLog } from './recorder.ts';
import { RedisConnectionLog } from './redis-store.ts';
import { ConnectionLogService } from './service.ts';
import { SqliteConnectionLog } from './sqlite-store.ts';
import type { ConnectionLogStore, RecordSink } from './types.ts';
import type { PlatformFlow, PriceOf, UserAccount } from './usage.ts';

export * from './types.ts';
export { ConnectionLog, connectionIds, unrecordedConnections } from './recorder.ts';
export { ConnectionLogService, ConnectionLogOffError } from './service.ts';
export { SqliteConnectionLog } from './sqlite-store.ts';
export { RedisConnectionLog } from './redis-store.ts';
export { JsonLinesFileSink } from './file-sink.ts';
export { USAGE_COLUMNS, COMPARE_COLUMNS, toCsv, amountFor, type UsageRow, type PlatformCompareRow, type PriceOf } from './usage.ts';

/** The connection-log tables next to the daemon's store. */
export function connectionLogStoreFor(store: Store): ConnectionLogStore {
  if (store instanceof SqliteStore) return new SqliteConnectionLog(store.database());
  if (isRedisStore(store)) return new RedisConnectionLog(store.connection, store.keys.prefix);
  throw new Error('the connection log needs the SQLite or the Redis store');
}

/** The Redis driver, told apart by its shape: an instanceof test would load it (and ioredis) into every daemon. */
function isRedisStore(store: Store): store is RedisStore {
  return 'connection' in store && 'keys' in store;
}

export interface ConnectionLogSetup {
  config: Pick<Config, 'log' | 'billing'>;
  store: Store;
  priceOf: PriceOf;
  accountOf: (user: string) => UserAccount | undefined;
  platformFlow?: PlatformFlow;
  metrics?: Metrics;
  logger?: Logger;
  ids?: () => string;
  now?: () => number;
}

export function createConnectionLog(setup: ConnectionLogSetup): ConnectionLogService {
  const access = setup.config.log.access;
  const store = access.store ? connectionLogStoreFor(setup.store) : undefined;
  const sinks: RecordSink[] = [];
  if (access.file !== '') sinks.push(new JsonLinesFileSink({ file: access.file, maxSize: access.fileMaxSize, rotate: access.fileRotate }));
  const recorder = new ConnectionLog({
    store,
    sinks,
    targets: access.targets,
    flushIntervalMs: access.flushIntervalMs,
    checkpointMs: access.checkpointMs,
    batchSize: access.batchSize,
    queueMax: access.queueMax,
    ...(setup.ids ? { ids: setup.ids } : {}),
    ...(setup.now ? { now: setup.now } : {}),
    ...(setup.metrics ? { metrics: setup.metrics } : {}),
    ...(setup.logger ? { logger: setup.logger } : {}),
  });
  return new ConnectionLogService({
    recorder,
    store,
    targets: access.targets,
    retention: { retentionDays: access.retentionDays, maxRecords: access.maxRecords, usageRetentionDays: setup.config.billing.usageRetentionDays },
    priceOf: setup.priceOf,
    accountOf: setup.accountOf,
    ...(setup.platformFlow ? { platformFlow: setup.platformFlow } : {}),
    ...(setup.now ? { now: setup.now } : {}),
    ...(setup.logger ? { logger: setup.logger } : {}),
  });
}
