// The fleet's shared state: what several daemons on one store share beyond the aggregates (allowance leases,
// sticky sessions, order leases, the heartbeat and epoch that tell a Redis that lost its data). Only a store
// several daemons can share has it (Redis); the opener gives it as `Backends.fleet`, undefined on SQLite.
import type { RedisConnection } from './redis-connection.ts';

export interface FleetState {
  /** The connection the fleet's parts run their commands on (the store's own). */
  readonly connection: RedisConnection;
  /** The key prefix the store was opened with. */
  readonly prefix: string;
}
