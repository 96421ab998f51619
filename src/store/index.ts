// The store component's surface for tests and tools: the per-aggregate interfaces, both drivers (SQLite, and
// Redis for a fleet) and the openers that pick one from config `store.path`. The daemon imports backends.ts,
// not this file, so a daemon on SQLite never loads the Redis driver.
export * from './types.ts';
export * from './errors.ts';
export { SqliteStore, migrate } from './sqlite.ts';
export { MIGRATIONS } from './migrations.ts';
export { RedisStore, openRedisStore, type RedisStoreOptions } from './redis.ts';
export { RedisKeys, DEFAULT_REDIS_PREFIX } from './redis-keys.ts';
export { RedisConnection, type RedisConnectionOptions } from './redis-connection.ts';
export { openStore, openStoreFor, isRedisUrl } from './open.ts';
export { openBackends, backendsOf, type Backends, type BackendsOptions } from './backends.ts';
export type { FleetState } from './fleet-state.ts';
export type {
  AllowanceGrant,
  AllowanceStore,
  AllowanceSync,
  LeaseStore,
  Persistence,
  SharedSession,
  SharedSessionStore,
} from './fleet-state.ts';
export { RedisFleetState } from './redis-fleet.ts';
export { RedisAllowance } from './redis-fleet-allowance.ts';
export { Leases, type LeasesOptions } from './redis-fleet-leases.ts';
export { SharedSessions, type SharedSessionsOptions } from './redis-fleet-sessions.ts';
