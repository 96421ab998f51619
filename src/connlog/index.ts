// The connection log: the recorder, its stores beside the daemon's own (the store's connectionLog(): SQLite
// tables in the same file, or the fleet's Redis), the optional JSON-lines file, and the service the admin
// routes read. Assembled from config by src/daemon/connection-log.ts.
import type { ConnectionLogSource } from '../store/types.ts';
import type { ConnectionLogStore, RecordBounds } from './types.ts';

export * from './types.ts';
export { ConnectionLog, connectionIds, unrecordedConnections } from './recorder.ts';
export { ConnectionLogService, ConnectionLogOffError } from './service.ts';
export { JsonLinesFileSink } from './file-sink.ts';
export { USAGE_COLUMNS, COMPARE_COLUMNS, toCsv, amountFor, type UsageRow, type PlatformCompareRow, type PriceOf } from './usage.ts';

/** The connection-log tables next to the daemon's store, held within `bounds` (log.access.maxRecords, maxSize). */
export function connectionLogStoreFor(store: ConnectionLogSource, bounds: Partial<RecordBounds> = {}): ConnectionLogStore {
  return store.connectionLog(bounds);
}
