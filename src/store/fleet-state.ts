// The fleet's shared state: what several daemons on one store share beyond the aggregates — allowance leases
// (limits), order leases, sticky sessions, the heartbeat and epoch that tell a store that lost its data, and
// the putting back of users after such a loss. Only a store several daemons can share has it (Redis); the
// opener gives it as `Backends.fleet`, undefined on SQLite. src/fleet holds the logic on top of it.
import type { StoredUser } from './types.ts';

/** One allowance sync (see src/store/redis-fleet-allowance.ts for what the store does with it). */
export interface AllowanceSync {
  /** This daemon's identity. */
  instance: string;
  user: string;
  /** Cumulative bytes this reporter has spent (adopted usage included): a retried sync adds nothing twice. */
  reported: number;
  /** The lease to hold after the sync: topped up to it, or given back down to it. */
  want: number;
  /** The heartbeat's TTL: leases of a daemon silent this long go back to the fleet. */
  aliveTtlMs: number;
  now: number;
  /** The user's limit to write should the store have lost it (null: none known). */
  seedLimit: number | null;
  /** The fleet's `used` this daemon last saw (folded in once after a loss). */
  seedUsed: number;
  /** The epoch `seedUsed` was seen in ('' = none). */
  seedEpoch: string;
  /** instance:process epoch: whose cumulative figure `reported` is. */
  reporter: string;
  /** The cumulative figure this reporter last saw applied. */
  acked: number;
  /** The reporter's last sync: its figure is forgotten. */
  final: boolean;
  /** A fresh epoch id, written only when the store has none. */
  newEpoch: string;
}

export interface AllowanceGrant {
  /** Bytes this daemon holds after the sync. */
  held: number;
  /** Bytes added to the lease by this sync; -1 for an unlimited user. */
  granted: number;
  /** -1 = unlimited. */
  limit: number;
  used: number;
  /** The usage record was missing (the store came back empty) and was rebuilt from this daemon's view. */
  seeded: boolean;
  epoch: string;
  /** Bytes leased by the other live daemons. */
  others: number;
  /** Live daemons. */
  daemons: number;
}

/** The allowance's shared counters; every call fails with StoreUnavailableError when the store is unreachable. */
export interface AllowanceStore {
  /** Keeps this daemon's leases its own for aliveTtlMs; resolves to the fleet's epoch (`newEpoch` when there was none). */
  heartbeat(instance: string, aliveTtlMs: number, now: number, newEpoch: string): Promise<string | undefined>;
  /** Moves what was spent into `used` and grants the next slice, in one step no other daemon can interleave. */
  sync(request: AllowanceSync): Promise<AllowanceGrant>;
  /**
   * Many of one daemon's syncs as one step, in order, each as `sync` would do it alone (a start leases 100,000
   * users in a few hundred calls): instance, reporter, aliveTtlMs, now and newEpoch are the first request's.
   */
  syncMany(requests: readonly AllowanceSync[]): Promise<AllowanceGrant[]>;
}

/** Named leases of one owner with expiry ("one daemon of the fleet does this"). */
export interface LeaseStore {
  readonly owner: string;
  readonly ttlMs: number;
  /** Takes the lease if nobody holds it (or re-takes our own). True when we hold it now. */
  acquire(name: string): Promise<boolean>;
  /** Extends our lease by ttlMs; false when it is not ours (expired, or taken over). */
  renew(name: string): Promise<boolean>;
  /** Drops our lease (so another daemon can take it at once); false when it was not ours. */
  release(name: string): Promise<boolean>;
  /** Who holds the lease now (null: nobody). */
  holder(name: string): Promise<string | null>;
}

/** A sticky session as the fleet shares it: the node it leaves through, stored whole (credentials included). */
export interface SharedSession<N extends { id: string }> {
  node: N;
  /** Epoch ms the session began (the daemon that bound it). */
  startedAt: number;
  expiresAt: number;
}

/** Sticky sessions shared by the fleet; every call fails with StoreUnavailableError when the store is unreachable. */
export interface SharedSessionStore<N extends { id: string }> {
  /** The fleet's session, if one is live. */
  get(user: string, sessionId: string): Promise<SharedSession<N> | undefined>;
  /** Binds the session to `node` for ttlMs unless another daemon already bound it: the session in force and whether ours won. */
  claim(user: string, sessionId: string, node: N, ttlMs: number): Promise<{ session: SharedSession<N>; won: boolean }>;
  /** Puts back sessions the store lost, each unless a binding is there already; resolves to how many were put. */
  restore(sessions: readonly ({ user: string; sessionId: string } & SharedSession<N>)[]): Promise<number>;
  /** Ends the session if it is still on `nodeId` (a failed node); true when it ended it. */
  end(user: string, sessionId: string, nodeId: string): Promise<boolean>;
}

export interface Persistence {
  /** Snapshots configured (Redis `save` not empty). */
  snapshots: boolean;
  appendOnly: boolean;
}

export interface FleetState {
  allowance(): AllowanceStore;
  leases(owner: string, ttlMs: number): LeaseStore;
  sessions<N extends { id: string }>(now?: () => number): SharedSessionStore<N>;
  /** Puts back each user record the store lacks (or holds older); resolves to how many were put back. */
  restoreUsers(users: readonly StoredUser[], now: number): Promise<number>;
  /** Whether the shared store keeps its data across a restart; undefined when it will not say. */
  persistence(): Promise<Persistence | undefined>;
}
