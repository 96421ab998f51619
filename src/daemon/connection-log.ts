// The connection log put together from config `log.access` and `billing`: the store beside the daemon's own,
// the optional JSON-lines file, the recorder and the service the admin routes read.
import type { Config } from '../config/schema.ts';
import { ConnectionLog, ConnectionLogService, JsonLinesFileSink, type PriceOf, type RecordSink } from '../connlog/index.ts';
import type { PlatformFlow, UserAccount } from '../connlog/usage.ts';
import type { Backends } from '../store/backends.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';

export interface ConnectionLogSetup {
  config: Pick<Config, 'log' | 'billing'>;
  backends: Pick<Backends, 'connectionLog'>;
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
  const store = access.store
    ? setup.backends.connectionLog({ maxRecords: access.maxRecords, maxBytes: sizeInBytes(access.maxSize) })
    : undefined;
  // Before any connection of this process is checkpointed as `open`: those left by a daemon killed are `lost`.
  store
    ?.settleOpen()
    .then((n) => {
      if (n > 0) setup.logger?.warn({ records: n }, 'connections open when the daemon last ended without a stop are recorded as lost');
    })
    .catch((err: unknown) => setup.logger?.warn({ err }, 'open records of the last run could not be settled'));
  const sinks: RecordSink[] = [];
  if (access.file !== '') sinks.push(new JsonLinesFileSink({ file: access.file, maxSize: access.fileMaxSize, rotate: access.fileRotate }));
  const recorder = new ConnectionLog({
    store,
    sinks,
    targets: access.targets,
    clients: access.clients,
    flushIntervalMs: access.flushIntervalMs,
    checkpointMs: access.checkpointMs,
    batchSize: access.batchSize,
    queueMax: access.queueMax,
    refusals: { windowMs: access.refusalWindowMs, maxSources: access.refusalMaxSources },
    ...(setup.ids ? { ids: setup.ids } : {}),
    ...(setup.now ? { now: setup.now } : {}),
    ...(setup.metrics ? { metrics: setup.metrics } : {}),
    ...(setup.logger ? { logger: setup.logger } : {}),
  });
  return new ConnectionLogService({
    recorder,
    store,
    targets: access.targets,
    clients: access.clients,
    retention: {
      retentionDays: access.retentionDays,
      maxRecords: access.maxRecords,
      usageRetentionDays: setup.config.billing.usageRetentionDays,
    },
    priceOf: setup.priceOf,
    accountOf: setup.accountOf,
    ...(setup.platformFlow ? { platformFlow: setup.platformFlow } : {}),
    ...(setup.now ? { now: setup.now } : {}),
    ...(setup.logger ? { logger: setup.logger } : {}),
  });
}

const UNITS: Record<string, number> = { B: 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3 };

/** A size as config writes it (schema-checked: digits and one of B, K, M, G) in bytes. */
export function sizeInBytes(text: string): number {
  return Number(text.slice(0, -1)) * (UNITS[text.slice(-1)] ?? 1);
}
