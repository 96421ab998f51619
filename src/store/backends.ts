// The one opener: `store.path` names SQLite (a file, or ':memory:') or Redis (a redis:// URL), and what comes
// back is one backend per aggregate. Components take the backend they use; none of them learns which driver
// stands behind it. The fleet's shared state exists only on a store several daemons share (Redis): `fleet` is
// undefined on SQLite, and that is the only place the difference shows.
import type { ConnectionLogStore, RecordBounds } from './connection-log-types.ts';
import type { FleetState } from './fleet-state.ts';
import { openStoreFor } from './open.ts';
import type { SqliteStoreOptions } from './sqlite.ts';
import type { RedisStoreOptions } from './redis.ts';
import type { OrdersBackend, OutboxStore, SettingsStore, Store, UsageStore, UserStore } from './types.ts';

export interface Backends {
  /** Orders, their instances, the idempotency journal and the platform's callbacks. */
  readonly orders: OrdersBackend;
  readonly users: UserStore;
  readonly usage: UsageStore;
  readonly settings: SettingsStore;
  readonly outbox: OutboxStore;
  /** The connection log's records and rollups, held within `bounds`; each call makes a new handle on the same data. */
  connectionLog(bounds?: Partial<RecordBounds>): ConnectionLogStore;
  /** The fleet's shared state (several daemons on one store); undefined for a store of this daemon's own. */
  readonly fleet: FleetState | undefined;
  /** Closes the connection (or file) every backend shares: last, after every component that writes has stopped. */
  close(): Promise<void>;
}

export type BackendsOptions = SqliteStoreOptions & RedisStoreOptions;

/**
 * Opens the backends named by `store.path`. Redis is connected before this resolves (StoreUnavailableError
 * when it cannot be reached); the Redis driver is loaded only for a redis:// URL.
 */
export async function openBackends(path: string, options: BackendsOptions = {}): Promise<Backends> {
  return backendsOf(await openStoreFor(path, options));
}

/** A driver's store; one several daemons can share (Redis) also gives the fleet's shared state. */
type DriverStore = Store & { fleetState?(): FleetState };

/** The backends of a store already open (tests open theirs through test/support/store.ts). */
export function backendsOf(store: DriverStore): Backends {
  return {
    orders: store,
    users: store,
    usage: store,
    settings: store,
    outbox: store,
    connectionLog: (bounds) => store.connectionLog(bounds),
    fleet: store.fleetState?.(),
    close: () => store.close(),
  };
}
