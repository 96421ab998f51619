// The store's aggregates as components see them: one small, coarse, Promise-returning interface per
// aggregate (orders, instances, journal, callbacks, usage, users, settings, the outbox, the connection log),
// so the SQLite driver (one daemon) and the Redis driver (a fleet) can both stand behind each. A driver
// implements them all (`Store`); a component takes only the ones it uses. Records use plain English names
// except where they mirror a platform field (orderNo, appOrderNo, instanceNo, userExpired).

import type { ConnectionLogStore, RecordBounds } from './connection-log-types.ts';
import type { StoreConflictError } from './errors.ts';

/** Where an order-placing request stands in the idempotency journal. */
export type JournalState = 'intent' | 'sent' | 'accepted' | 'rejected' | 'unknown';

/** States whose outcome Rotor does not know: they are re-sent, with the same number and reqId, on resume. */
export const UNRESOLVED_STATES: readonly JournalState[] = ['intent', 'sent', 'unknown'];

export interface JournalEntry {
  /** The merchant number (appOrderNo, release orderNo, change appOrderNo or resetNo): the idempotency key. */
  merchantNo: string;
  /** Interface name of the operation (InstanceOpen, InstanceRenew, ChangeProxy, ResetProxyPassword, …). */
  operation: string;
  /** The exact request sent (and re-sent). */
  request: unknown;
  /** The reqId used for every send of this request. */
  reqId: string;
  state: JournalState;
  /** The platform's answer (accepted) or the refusal {code, platformCode, message} (rejected, unknown). */
  result: unknown;
  /** Platform order number, once accepted. */
  orderNo: string | null;
  attempts: number;
  createdAt: number;
  updatedAt: number;
}

/** What addIntent is given: the request about to be sent. */
export type NewIntent = Pick<JournalEntry, 'merchantNo' | 'operation' | 'request' | 'reqId'>;

/** How updateJournal moves an entry on. */
export interface JournalPatch {
  state: JournalState;
  result?: unknown;
  orderNo?: string | null;
  sent?: boolean;
}

/** The entry addIntent writes and answers: not sent yet, at `at`. */
export function intentEntry(entry: NewIntent, at: number): JournalEntry {
  return { ...entry, state: 'intent', result: null, orderNo: null, attempts: 0, createdAt: at, updatedAt: at };
}

export interface OrderRecord {
  /** Merchant number; the primary key (Rotor always knows it, the platform number comes later). */
  appOrderNo: string;
  /** Platform order number; null until accepted. */
  orderNo: string | null;
  /** Seed 2.7: 1 new, 2 renew, 3 release, 5 change. */
  type: number;
  /** Seed part 3: 1 pending, 2 processing, 3 succeeded, 4 failed, 5 partial. */
  status: number;
  amount: string | null;
  count: number | null;
  request: unknown;
  createdAt: number;
  updatedAt: number;
}

export interface InstanceRecord {
  instanceNo: string;
  orderNo: string | null;
  productNo: string | null;
  /** Seed part 3: 1 to be created, 2 creating, 3 running, 6 stopped, 10 closed, 11 released. */
  status: number | null;
  ip: string | null;
  port: number | null;
  username: string | null;
  /** Stored because the gateway needs it; never logged, never in error messages. */
  pwd: string | null;
  /** Comma-separated protocol codes (1 socks5, 2 http, 3 https, 4 ssh). */
  protocol: string | null;
  /** Epoch seconds. */
  userExpired: number | null;
  /** The platform's record as last read (pwd included: treat as secret). */
  raw: unknown;
  updatedAt: number;
}

export interface CallbackKey {
  type: string;
  no: string;
  /** '' when the platform sent none (instance and product callbacks). */
  op: string;
}

export interface CallbackRecord extends CallbackKey {
  receivedAt: number;
  /** Times received (repeats included). */
  count: number;
  processed: boolean;
}

export interface UsageRecord {
  user: string;
  usedBytes: number;
  /** -1 = unlimited. */
  limitBytes: number;
  updatedAt: number;
}

/** A user record as stored (src/users/ owns its shape; the store keeps it as opaque JSON). */
export interface StoredUser {
  name: string;
  /** Every field of the record except the password (src/users/record.ts UserData). */
  data: unknown;
  /** scrypt hash (src/admission/password.ts); never the password. */
  passwordHash: string;
  /** 'creating': the platform sub account may not exist yet (the creation journal); 'ready'. */
  state: 'creating' | 'ready';
  /** Grows with every write of any user: daemons of a fleet follow changes by it (usersChangedSince). */
  version: number;
  updatedAt: number;
}

export interface OrderFilter {
  type?: number;
  /** Only these statuses. */
  statuses?: number[];
  /** Only orders not yet in a final status (3, 4, 5). */
  open?: boolean;
  limit?: number;
  offset?: number;
}

export interface InstanceFilter {
  orderNo?: string;
  productNo?: string;
  statuses?: number[];
  /** Only instances expiring (userExpired, epoch seconds) at or before this. */
  expiresBefore?: number;
  limit?: number;
  offset?: number;
}

import type { EventOutbox, EventRecord, NewEvent } from './events.ts';
export type { EventOutbox, EventRecord, EventSettlement, NewEvent } from './events.ts';

/** Orders placed through Rotor, by merchant number (appOrderNo) and platform number. */
export interface OrderStore {
  /** Inserts or replaces the order with this appOrderNo. */
  putOrder(order: OrderRecord): Promise<void>;
  /**
   * putOrder and appendEvent in one transaction (SQLite) / one MULTI (Redis): a crash keeps both or neither,
   * so the order's `order.final` can be neither lost nor written twice. The event is subject to its marker
   * as in appendEvent (undefined: the marker was taken; the order is written all the same).
   */
  putOrderWithEvent(order: OrderRecord, event: NewEvent): Promise<EventRecord | undefined>;
  /** By merchant number or platform number. */
  getOrder(no: string): Promise<OrderRecord | undefined>;
  listOrders(filter?: OrderFilter): Promise<OrderRecord[]>;
  /** Counts by (type, status), for the rotor_orders gauge. */
  countOrders(): Promise<{ type: number; status: number; count: number }[]>;
}

/** The platform's instances as last read. */
export interface InstanceStore {
  /** Inserts or replaces each instance, in one transaction. */
  putInstances(instances: InstanceRecord[]): Promise<void>;
  getInstance(instanceNo: string): Promise<InstanceRecord | undefined>;
  listInstances(filter?: InstanceFilter): Promise<InstanceRecord[]>;
  /** Counts by status, for the rotor_instances gauge. */
  countInstances(): Promise<{ status: number | null; count: number }[]>;
}

/** The idempotency journal of order-placing requests. */
export interface OrderJournal {
  /** Writes a new intent; rejects with StoreConflictError if the merchant number is already journaled. */
  addIntent(entry: NewIntent): Promise<JournalEntry>;
  /** Moves an entry on; `attempts` is incremented when `sent` is true. */
  updateJournal(merchantNo: string, patch: JournalPatch): Promise<void>;
  getJournal(merchantNo: string): Promise<JournalEntry | undefined>;
  listJournal(states?: readonly JournalState[]): Promise<JournalEntry[]>;
}

/** The platform's callbacks, deduplicated. */
export interface CallbackStore {
  /** Durably records a callback; `duplicate` when (type, no, op) was seen before (its count grows). */
  recordCallback(key: CallbackKey, receivedAt: number): Promise<{ duplicate: boolean; processed: boolean }>;
  markCallbackProcessed(key: CallbackKey): Promise<void>;
  listCallbacks(filter?: { processed?: boolean }): Promise<CallbackRecord[]>;
}

/** The orders aggregate: orders, their instances, the journal that makes placing them idempotent, callbacks. */
export type OrdersBackend = OrderStore & InstanceStore & OrderJournal & CallbackStore;

/** Where a reader of the usage change feed is: the store's version and the Redis epoch it was read in. */
export interface UsageCursor {
  version: number;
  epoch: string;
}

/** Per-user byte counters and limits (src/accounting/). */
export interface UsageStore {
  /**
   * Adds every delta in one transaction (users unknown so far start at 0 bytes, unlimited). `batchId`: the
   * writer's id of this batch, `<writer><seq>` (src/store/batch-marks.ts: a name unique across daemons and
   * restarts, and a sequence number the writer writes in increasing order), marked in the same transaction
   * (SQLite) or script (Redis) as the increments; a batch at or below its writer's mark changes nothing, so a
   * write that landed although its caller saw it fail can be written again, after an outage of any length within
   * BATCH_WRITER_TTL_MS of the writer's last write. Redis writes a batch 1,000 rows per script, each part marked
   * (seq, part), so a batch that failed part-way adds, written again, only the parts not taken.
   */
  addUsage(deltas: { user: string; bytes: number }[], batchId?: string): Promise<void>;
  getUsage(user: string): Promise<UsageRecord | undefined>;
  listUsage(): Promise<UsageRecord[]>;
  setLimit(user: string, limitBytes: number): Promise<void>;
  /** The rows of these keys that exist (one read for a batch of users, not one round trip each). */
  getUsages(users: readonly string[]): Promise<UsageRecord[]>;
  /** setLimit for many keys as one write (SQLite: one transaction; Redis: one MULTI per page). */
  setLimits(limits: readonly { user: string; limitBytes: number }[]): Promise<void>;
  /**
   * The rows written after `since` (a cursor this returned) and where to ask from next time. `full`: every
   * row, because there was no cursor or the store cannot tell what changed since it (Redis lost its data or
   * restarted: a new epoch; a store without a feed). A row may come twice; none written after `since` is
   * left out.
   */
  usageChangedSince(since: UsageCursor | undefined): Promise<{ rows: UsageRecord[]; cursor: UsageCursor | undefined; full: boolean }>;
}

/** Users as data (src/users/). */
/** One write of UserStore.putUsers: putUser's arguments. */
export interface UserWrite {
  user: Omit<StoredUser, 'version' | 'updatedAt'>;
  ifAbsent?: boolean;
  ifVersion?: number;
}

export interface UserStore {
  /**
   * Writes the user (version assigned by the store). `ifAbsent`: rejects with StoreConflictError when the
   * name exists; `ifVersion`: only when the stored version is that one (else StoreConflictError).
   */
  putUser(user: Omit<StoredUser, 'version' | 'updatedAt'>, options?: { ifAbsent?: boolean; ifVersion?: number }): Promise<StoredUser>;
  /**
   * Many putUser writes as one unit (SQLite: one transaction; Redis: one script, one round trip), in order; a
   * write that conflicts gives its StoreConflictError in its place and the others are made. A failure of the
   * store itself rejects the whole call with nothing written.
   */
  putUsers(writes: readonly UserWrite[]): Promise<(StoredUser | StoreConflictError)[]>;
  getUser(name: string): Promise<StoredUser | undefined>;
  /** Every user, by name. */
  listUsers(): Promise<StoredUser[]>;
  /** false when there was none. */
  deleteUser(name: string): Promise<boolean>;
  /** Users written and names deleted after `version`, and the newest version now. */
  usersChangedSince(version: number): Promise<{ changed: StoredUser[]; deleted: string[]; version: number }>;
  /** The names among `names` that were deleted and not written since (a tombstone): one read for all. */
  deletedAmong(names: readonly string[]): Promise<Set<string>>;
}

/** Small key/value state (JSON values): settings a component keeps across restarts. */
export interface SettingsStore {
  kvGet<T = unknown>(key: string): Promise<T | undefined>;
  kvSet(key: string, value: unknown): Promise<void>;
  kvDelete(key: string): Promise<void>;
  /** Entries whose key starts with the prefix. */
  kvList<T = unknown>(prefix: string): Promise<{ key: string; value: T }[]>;
}

/** The event outbox (events.ts). */
export type OutboxStore = EventOutbox;

/** Where the connection log's stores come from. */
export interface ConnectionLogSource {
  /**
   * The connection log's records and usage rollups on this store (SQLite tables in the same file, or the
   * fleet's Redis), held within `bounds` at every moment. Each call makes a new handle on the same data.
   */
  connectionLog(bounds?: Partial<RecordBounds>): ConnectionLogStore;
}

/**
 * What each driver implements: every aggregate's store on one connection (one SQLite file, or one Redis).
 * Components outside src/store never take it: they take the aggregate they use (backends.ts).
 */
export interface Store
  extends OrderStore, InstanceStore, OrderJournal, CallbackStore, UsageStore, UserStore, SettingsStore, EventOutbox, ConnectionLogSource {
  close(): Promise<void>;
}
