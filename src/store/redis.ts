// The Redis store (ioredis): the same Store contract as SQLite, for a fleet of daemons sharing one Redis.
// Every write that reads before it writes (order upsert keeping createdAt and the orderNo index, journal
// intent/update, callback dedupe) is one Lua script, so two daemons racing see the same outcome SQLite's
// transactions give one daemon. Batches (instances, usage) are one MULTI. Payloads (request, result, raw)
// are JSON encoded by Node and stored as opaque strings: Lua never re-encodes them (its cjson would turn []
// into {} and round large numbers). Scripts build a few keys from the prefix, so this targets one Redis (or
// a primary with replicas), not Redis Cluster. Listings read everything of a kind and filter in Node, like
// the SQLite driver's small tables; open orders and journal states have their own index sets.
import type { ChainableCommander, Redis } from 'ioredis';
import type { ConnectionLogStore, RecordBounds } from './connection-log-types.ts';
import { RedisConnectionLog } from './redis-connection-log.ts';
import { OpenRecordOwner } from './redis-open-records.ts';
import type { FleetState } from './fleet-state.ts';
import { RedisFleetState } from './redis-fleet.ts';
import { FINAL_ORDER_STATUS } from '../platform/order-status.ts';
import type { Logger } from '../telemetry/logger.ts';
import { StoreConflictError, StoreError } from './errors.ts';
import {
  ADD_INTENT,
  ADD_USAGE,
  DELETE_USER,
  HASHES,
  MARK_CALLBACK,
  PUT_ORDER,
  PUT_USER,
  PUT_USERS,
  RECORD_CALLBACK,
  UPDATE_JOURNAL,
  USAGE_CHANGED,
  USAGE_PAGE,
  USER_PAGE,
  callScript,
  defineScripts,
} from './redis-scripts.ts';
import { RedisConnection, type RedisConnectionOptions } from './redis-connection.ts';
import { DEFAULT_REDIS_PREFIX, RedisKeys } from './redis-keys.ts';
import * as outbox from './redis-events.ts';
// S: the records and the interface both drivers implement (src/store/types.ts).
import type * as S from './types.ts';
import { intentEntry } from './types.ts';
import { parseBatchId, redisBatchMark } from './batch-marks.ts';

/** Rows written per MULTI when many are (setLimits). */
const HASH_PAGE = 500;
/**
 * Records read per script call when many are listed (users, usage, orders): see `records`. One call's whole
 * reply must arrive within the command timeout: 200 user records are ~40 KB, a sixth of a second on a 250 KB/s
 * link (500 were ~100 KB, and timed out at 2 s on a loaded machine).
 */
const READ_PAGE = 200;
/**
 * Pages of a listing asked for at once: Redis builds the next while the daemon decodes one (one page at a
 * time, each waited for the other). Two replies in flight are ~80 KB, still well within a command's timeout.
 */
export const READ_PAGES_IN_FLIGHT = 2;

export interface RedisStoreOptions extends Omit<RedisConnectionOptions, 'name'> {
  /** Key prefix shared by every daemon of the fleet; default `rotor:`. */
  prefix?: string;
  /** Clock for timestamps (epoch ms); default Date.now. */
  now?: () => number;
  logger?: Logger;
  /** The lease on this daemon's open connection records (fleet.aliveTtlMs); default 10 s. */
  aliveTtlMs?: number;
}

const JOURNAL_STATES: readonly S.JournalState[] = ['intent', 'sent', 'accepted', 'rejected', 'unknown'];

type Hash = Record<string, string>;

const json = (v: unknown): string => JSON.stringify(v ?? null);
const parse = (s: string | undefined): unknown => (s === undefined ? null : JSON.parse(s));
const optNum = (s: string | undefined): number | null => (s === undefined ? null : Number(s));
const byKey = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Rows per ADD_USAGE call (3 arguments each, spread into the call; ~5 ms of Redis each). */
const ADD_USAGE_ROWS = 1000;

const SCRIPTS = {
  rotorPutUser: { numberOfKeys: 4, lua: PUT_USER },
  // Keys counted per call (the first argument): 3 + one per write.
  rotorPutUsers: { lua: PUT_USERS },
  rotorDeleteUser: { numberOfKeys: 4, lua: DELETE_USER },
  rotorPutOrder: { numberOfKeys: 4, lua: PUT_ORDER },
  rotorAddIntent: { numberOfKeys: 3, lua: ADD_INTENT },
  rotorUpdateJournal: { numberOfKeys: 1, lua: UPDATE_JOURNAL },
  rotorRecordCallback: { numberOfKeys: 4, lua: RECORD_CALLBACK },
  rotorMarkCallback: { numberOfKeys: 2, lua: MARK_CALLBACK },
  rotorUsageChanged: { numberOfKeys: 2, lua: USAGE_CHANGED },
  // Keys counted per call (the first argument): 4 + one per delta.
  rotorAddUsage: { lua: ADD_USAGE },
  // Keys counted per call (the first argument): one per record.
  rotorHashes: { lua: HASHES },
  rotorUserPage: { lua: USER_PAGE },
  rotorUsagePage: { lua: USAGE_PAGE },
} as const;

type ScriptName = keyof typeof SCRIPTS;

function toOrder(appOrderNo: string, h: Hash): S.OrderRecord {
  return {
    appOrderNo,
    orderNo: h.orderNo ?? null,
    type: Number(h.type),
    status: Number(h.status),
    amount: h.amount ?? null,
    count: optNum(h.count),
    request: parse(h.request),
    createdAt: Number(h.createdAt),
    updatedAt: Number(h.updatedAt),
  };
}

function toJournal(merchantNo: string, h: Hash): S.JournalEntry {
  return {
    merchantNo,
    operation: String(h.operation),
    request: parse(h.request),
    reqId: String(h.reqId),
    state: h.state as S.JournalState,
    result: parse(h.result),
    orderNo: h.orderNo ?? null,
    attempts: Number(h.attempts),
    createdAt: Number(h.createdAt),
    updatedAt: Number(h.updatedAt),
  };
}

function toUsage(user: string, h: Hash): S.UsageRecord {
  return { user, usedBytes: Number(h.used ?? 0), limitBytes: Number(h.limit ?? -1), updatedAt: Number(h.updatedAt ?? 0) };
}

/** A USAGE_PAGE entry: [used, limit, updatedAt], numbers (or the field's text, or null when absent). */
type UsageEntry = [number | string | null, number | string | null, number | string | null];

function usageOf(user: string, e: UsageEntry): S.UsageRecord {
  return { user, usedBytes: Number(e[0] ?? 0), limitBytes: Number(e[1] ?? -1), updatedAt: Number(e[2] ?? 0) };
}

/** A USER_PAGE entry: [data (parsed with the page), passwordHash, state, version, updatedAt]. */
type UserEntry = [unknown, string, string, string, string];

function userOf(name: string, e: UserEntry): S.StoredUser {
  return {
    name,
    data: e[0],
    passwordHash: e[1],
    state: e[2] === 'creating' ? 'creating' : 'ready',
    version: Number(e[3]),
    updatedAt: Number(e[4]),
  };
}

function toUser(name: string, h: Hash): S.StoredUser {
  return {
    name,
    data: parse(h.data),
    passwordHash: String(h.passwordHash ?? ''),
    state: h.state === 'creating' ? 'creating' : 'ready',
    version: Number(h.version ?? 0),
    updatedAt: Number(h.updatedAt ?? 0),
  };
}

function toCallback(h: Hash): S.CallbackRecord & { seq: number } {
  return {
    type: String(h.type),
    no: String(h.no),
    op: String(h.op),
    receivedAt: Number(h.receivedAt),
    count: Number(h.count),
    processed: h.processed === '1',
    seq: Number(h.seq),
  };
}

function checkUser(user: unknown, what: string): string {
  if (typeof user !== 'string') throw new StoreError('STORE_INVALID', `${what}: user must be a string`);
  return user;
}

function checkBytes(bytes: unknown, what: string): number {
  if (typeof bytes !== 'number' || !Number.isFinite(bytes)) throw new StoreError('STORE_INVALID', `${what}: bytes must be a finite number`);
  return Math.trunc(bytes);
}

export class RedisStore implements S.Store {
  readonly keys: RedisKeys;
  readonly connection: RedisConnection;
  private readonly now: () => number;
  private readonly eventKeys: outbox.EventKeys;
  /** This daemon as the owner of its open connection records. */
  private readonly openRecords: OpenRecordOwner;

  /** Does not connect: call `connect()` (openRedisStore does) before use. */
  constructor(url: string, options: RedisStoreOptions = {}) {
    this.keys = new RedisKeys(options.prefix ?? DEFAULT_REDIS_PREFIX);
    this.now = options.now ?? Date.now;
    this.connection = new RedisConnection(url, { ...options, name: 'rotor-store' });
    defineScripts(this.connection.client, SCRIPTS);
    defineScripts(this.connection.client, outbox.EVENT_SCRIPTS);
    this.eventKeys = outbox.eventKeys(this.keys.prefix);
    this.openRecords = new OpenRecordOwner(this.connection, this.keys.prefix, options.aliveTtlMs ? { leaseMs: options.aliveTtlMs } : {});
  }

  /** Connects; rejects with StoreUnavailableError (code STORE_UNAVAILABLE) when Redis cannot be reached. */
  async connect(): Promise<this> {
    await this.connection.connect();
    return this;
  }

  private run<T>(what: string, op: (client: Redis) => Promise<T>): Promise<T> {
    return this.connection.run(what, op);
  }

  private script(client: Redis, name: ScriptName, args: (string | number)[]): Promise<unknown> {
    return callScript(client, name, args);
  }

  /**
   * The records of `ids` that exist (a missing key reads as an empty hash and is left out), in their order: a
   * page of hashes per script call (HASHES), one round trip each. Paged because each command's timeout runs
   * from when it is sent: 100,000 users' records in one call outlast it while the reply is parsed, and a
   * daemon of a fleet could not start.
   */
  private records<T>(
    client: Redis,
    ids: readonly string[],
    keyOf: (id: string) => string,
    build: (id: string, h: Hash) => T,
  ): Promise<T[]> {
    // One JSON text per page (HASHES); a missing key's hash is {} there, not an array.
    const args = (page: readonly string[]): (string | number)[] => [page.length, ...page.map(keyOf)];
    return this.pages(client, 'rotorHashes', ids, args, (id, entry: string[] | Record<string, never>) => {
      const flat = entry as string[];
      if (!(flat.length > 0)) return undefined;
      const h: Hash = {};
      for (let f = 0; f < flat.length; f += 2) h[flat[f] as string] = flat[f + 1] as string;
      return build(id, h);
    });
  }

  /** The user records of `names` that exist, in their order (USER_PAGE: each record's data parsed with its page). */
  private userRecords(client: Redis, names: readonly string[]): Promise<S.StoredUser[]> {
    return this.pages(
      client,
      'rotorUserPage',
      names,
      (page) => [0, this.keys.user(''), JSON.stringify(page)],
      (id, e: UserEntry | 0) => (e === 0 ? undefined : userOf(id, e)),
    );
  }

  /** The usage rows of `users` that exist, in their order (USAGE_PAGE). */
  private usageRows(client: Redis, users: readonly string[]): Promise<S.UsageRecord[]> {
    return this.pages(
      client,
      'rotorUsagePage',
      users,
      (page) => [0, this.keys.usage(''), JSON.stringify(page)],
      (id, e: UsageEntry | 0) => (e === 0 ? undefined : usageOf(id, e)),
    );
  }

  /**
   * The records of `ids` that exist, in their order: a page of ids per call of `script` (with the arguments
   * `args` makes of them; its reply one JSON text: an array with one entry per id, which `take` turns into a
   * record, or undefined for a missing key), one round trip each. Paged because each command's timeout runs from when it is sent: 100,000 users' records in one
   * call outlast it while the reply is parsed, and a daemon of a fleet could not start.
   */
  private async pages<T, E>(
    client: Redis,
    script: ScriptName,
    ids: readonly string[],
    args: (page: readonly string[]) => (string | number)[],
    take: (id: string, entry: E) => T | undefined,
  ): Promise<T[]> {
    const out: T[] = [];
    const send = (from: number): Promise<string> => {
      const call = this.script(client, script, args(ids.slice(from, from + READ_PAGE))) as Promise<string>;
      // Awaited below in order; a page after a failed one must not fail again as an unhandled rejection.
      call.catch(() => undefined);
      return call;
    };
    const inFlight: Promise<string>[] = [];
    let sent = 0;
    for (let from = 0; from < ids.length; from += READ_PAGE) {
      // The next pages are asked for before this one is decoded: Redis reads them while the daemon parses.
      for (; sent < ids.length && sent < from + READ_PAGES_IN_FLIGHT * READ_PAGE; sent += READ_PAGE) inFlight.push(send(sent));
      const to = Math.min(ids.length, from + READ_PAGE);
      const page = JSON.parse(await (inFlight.shift() as Promise<string>)) as E[];
      for (let i = from; i < to; i++) {
        const record = take(ids[i] as string, page[i - from] as E);
        if (record !== undefined) out.push(record);
      }
    }
    return out;
  }

  // ── orders ──
  async putOrder(o: S.OrderRecord): Promise<void> {
    const { keys, args } = this.putOrderCall(o);
    await this.run(`order ${o.appOrderNo}`, (c) => this.script(c, 'rotorPutOrder', [...keys, ...args])).catch((err: unknown) => {
      if (err instanceof StoreError && err.code === 'STORE_CONFLICT') throw new StoreConflictError(`order number ${o.orderNo ?? ''}`);
      throw err;
    });
  }

  async putOrderWithEvent(o: S.OrderRecord, event: S.NewEvent): Promise<S.EventRecord | undefined> {
    const order = this.putOrderCall(o);
    const ev = outbox.appendEventCall(this.eventKeys, event, this.now());
    const id = await this.run(`order ${o.appOrderNo} and its event`, (c) =>
      callScript(c, 'rotorPutOrderWithEvent', [...order.keys, ...ev.keys, order.args.length, ...order.args, ...ev.args]),
    ).catch((err: unknown) => {
      if (err instanceof StoreError && err.code === 'STORE_CONFLICT') throw new StoreConflictError(`order number ${o.orderNo ?? ''}`);
      throw err;
    });
    return outbox.appendedEvent(Number(id), event);
  }

  /** PUT_ORDER's keys and arguments for `o`. */
  private putOrderCall(o: S.OrderRecord): { keys: string[]; args: (string | number)[] } {
    const set: (string | number)[] = ['type', o.type, 'status', o.status, 'request', json(o.request), 'updatedAt', o.updatedAt];
    const del: string[] = [];
    if (o.orderNo === null) del.push('orderNo');
    else set.push('orderNo', o.orderNo);
    if (o.amount === null) del.push('amount');
    else set.push('amount', o.amount);
    if (o.count === null) del.push('count');
    else set.push('count', o.count);
    const k = this.keys;
    return {
      keys: [k.order(o.appOrderNo), k.orderNumbers, k.ordersAll, k.ordersOpen],
      args: [
        o.appOrderNo,
        o.orderNo ?? '',
        o.orderNo === null ? '0' : '1',
        FINAL_ORDER_STATUS.has(o.status) ? '0' : '1',
        o.createdAt,
        set.length / 2,
        ...set,
        ...del,
      ],
    };
  }

  async getOrder(no: string): Promise<S.OrderRecord | undefined> {
    return this.run(`order ${no}`, async (c) => {
      const direct = await c.hgetall(this.keys.order(no));
      if (Object.keys(direct).length) return toOrder(no, direct);
      const app = await c.hget(this.keys.orderNumbers, no);
      if (app === null) return undefined;
      const h = await c.hgetall(this.keys.order(app));
      return Object.keys(h).length ? toOrder(app, h) : undefined;
    });
  }

  async listOrders(filter: S.OrderFilter = {}): Promise<S.OrderRecord[]> {
    const all = await this.run('orders', async (c) => {
      const ids = await c.smembers(filter.open ? this.keys.ordersOpen : this.keys.ordersAll);
      return await this.records(c, ids, (id) => this.keys.order(id), toOrder);
    });
    const statuses = filter.statuses?.length ? new Set(filter.statuses) : undefined;
    const picked = all
      .filter(
        (o) =>
          (filter.type === undefined || o.type === filter.type) &&
          (!statuses || statuses.has(o.status)) &&
          (!filter.open || !FINAL_ORDER_STATUS.has(o.status)),
      )
      .sort((a, b) => b.createdAt - a.createdAt || byKey(a.appOrderNo, b.appOrderNo));
    return window(picked, filter.limit, filter.offset);
  }

  async countOrders(): Promise<{ type: number; status: number; count: number }[]> {
    const counts = new Map<string, { type: number; status: number; count: number }>();
    for (const o of await this.listOrders()) {
      const k = `${o.type}/${o.status}`;
      const c = counts.get(k) ?? { type: o.type, status: o.status, count: 0 };
      c.count += 1;
      counts.set(k, c);
    }
    return [...counts.values()].sort((a, b) => a.type - b.type || a.status - b.status);
  }

  // ── instances ──
  async putInstances(instances: S.InstanceRecord[]): Promise<void> {
    if (instances.length === 0) return;
    const args: string[] = [];
    for (const i of instances) args.push(i.instanceNo, JSON.stringify({ ...i, raw: i.raw ?? null }));
    // One HSET with every pair: applied as one command, so all or nothing.
    await this.run('instances', (c) => c.hset(this.keys.instances, ...args));
  }

  async getInstance(instanceNo: string): Promise<S.InstanceRecord | undefined> {
    const v = await this.run(`instance ${instanceNo}`, (c) => c.hget(this.keys.instances, instanceNo));
    return v === null ? undefined : (JSON.parse(v) as S.InstanceRecord);
  }

  async listInstances(filter: S.InstanceFilter = {}): Promise<S.InstanceRecord[]> {
    const values = await this.run('instances', (c) => c.hvals(this.keys.instances));
    const statuses = filter.statuses?.length ? new Set(filter.statuses) : undefined;
    const picked = values
      .map((v) => JSON.parse(v) as S.InstanceRecord)
      .filter(
        (i) =>
          (filter.orderNo === undefined || i.orderNo === filter.orderNo) &&
          (filter.productNo === undefined || i.productNo === filter.productNo) &&
          (!statuses || (i.status !== null && statuses.has(i.status))) &&
          (filter.expiresBefore === undefined || (i.userExpired !== null && i.userExpired <= filter.expiresBefore)),
      )
      .sort((a, b) => byKey(a.instanceNo, b.instanceNo));
    return window(picked, filter.limit, filter.offset);
  }

  async countInstances(): Promise<{ status: number | null; count: number }[]> {
    const counts = new Map<number | null, number>();
    for (const i of await this.listInstances()) counts.set(i.status, (counts.get(i.status) ?? 0) + 1);
    return [...counts.entries()].map(([status, count]) => ({ status, count }));
  }

  // ── journal ──
  async addIntent(entry: S.NewIntent): Promise<S.JournalEntry> {
    const t = this.now();
    const k = this.keys;
    await this.run(`journal entry ${entry.merchantNo}`, (c) =>
      this.script(c, 'rotorAddIntent', [
        k.journal(entry.merchantNo),
        k.journalAll,
        k.journalState('intent'),
        entry.merchantNo,
        entry.operation,
        json(entry.request),
        entry.reqId,
        t,
      ]),
    ).catch((err: unknown) => {
      if (err instanceof StoreError && err.code === 'STORE_CONFLICT') throw new StoreConflictError(`journal entry ${entry.merchantNo}`);
      throw err;
    });
    return intentEntry(entry, t);
  }

  async updateJournal(merchantNo: string, patch: S.JournalPatch): Promise<void> {
    if (!JOURNAL_STATES.includes(patch.state)) throw new StoreError('STORE_INVALID', `journal entry ${merchantNo}: unknown state`);
    const orderNoMode = patch.orderNo === undefined ? '0' : patch.orderNo === null ? '2' : '1';
    await this.run(`journal entry ${merchantNo}`, (c) =>
      this.script(c, 'rotorUpdateJournal', [
        this.keys.journal(merchantNo),
        merchantNo,
        patch.state,
        patch.result !== undefined ? '1' : '0',
        patch.result !== undefined ? json(patch.result) : '',
        orderNoMode,
        patch.orderNo ?? '',
        patch.sent ? '1' : '0',
        this.now(),
        this.keys.journalState(''),
      ]),
    );
  }

  async getJournal(merchantNo: string): Promise<S.JournalEntry | undefined> {
    const h = await this.run(`journal entry ${merchantNo}`, (c) => c.hgetall(this.keys.journal(merchantNo)));
    return Object.keys(h).length ? toJournal(merchantNo, h) : undefined;
  }

  async listJournal(states?: readonly S.JournalState[]): Promise<S.JournalEntry[]> {
    if (states && states.length === 0) return [];
    const entries = await this.run('journal', async (c) => {
      const ids = states ? await c.sunion(...states.map((s) => this.keys.journalState(s))) : await c.smembers(this.keys.journalAll);
      return await this.records(c, ids, (id) => this.keys.journal(id), toJournal);
    });
    // The state sets are moved in the same script as the entry, but filter anyway: a listing is a snapshot.
    const wanted = states ? new Set(states) : undefined;
    return entries
      .filter((e) => !wanted || wanted.has(e.state))
      .sort((a, b) => a.createdAt - b.createdAt || byKey(a.merchantNo, b.merchantNo));
  }

  // ── callbacks ──
  async recordCallback(key: S.CallbackKey, receivedAt: number): Promise<{ duplicate: boolean; processed: boolean }> {
    const k = this.keys;
    const id = k.callbackId(key.type, key.no, key.op);
    const r = (await this.run(`callback ${key.type} ${key.no}`, (c) =>
      this.script(c, 'rotorRecordCallback', [
        k.callback(id),
        k.callbacksAll,
        k.callbacksUnprocessed,
        k.callbacksSeq,
        id,
        key.type,
        key.no,
        key.op,
        receivedAt,
      ]),
    )) as [number, number];
    return { duplicate: r[0] === 1, processed: r[1] === 1 };
  }

  async markCallbackProcessed(key: S.CallbackKey): Promise<void> {
    const id = this.keys.callbackId(key.type, key.no, key.op);
    await this.run(`callback ${key.type} ${key.no}`, (c) =>
      this.script(c, 'rotorMarkCallback', [this.keys.callback(id), this.keys.callbacksUnprocessed, id]),
    );
  }

  async listCallbacks(filter: { processed?: boolean } = {}): Promise<S.CallbackRecord[]> {
    const all = await this.run('callbacks', async (c) => {
      const ids = await c.smembers(filter.processed === false ? this.keys.callbacksUnprocessed : this.keys.callbacksAll);
      return this.records(
        c,
        ids,
        (id) => this.keys.callback(id),
        (_id, h) => toCallback(h),
      );
    });
    return all
      .filter((cb) => filter.processed === undefined || cb.processed === filter.processed)
      .sort((a, b) => a.receivedAt - b.receivedAt || a.seq - b.seq)
      .map(({ seq: _seq, ...cb }) => cb);
  }

  // ── usage ──
  async addUsage(deltas: { user: string; bytes: number }[], batchId?: string): Promise<void> {
    if (deltas.length === 0) return;
    // Checked before anything is sent: a bad entry leaves the whole batch unapplied, as in SQLite.
    const checked = deltas.map((d) => ({ user: checkUser(d.user, 'usage'), bytes: checkBytes(d.bytes, 'usage') }));
    if (batchId !== undefined) parseBatchId(batchId); // a malformed id is refused before anything is sent
    const k = this.keys;
    const t = this.now();
    // One script per ADD_USAGE_ROWS rows (the batch part's writer mark, the increments and the change feed's entry
    // together), one after another: a call's arguments are spread (a flush of tens of thousands of users in one
    // call overflowed the stack), and each call keeps the command timeout for itself. A part is marked (seq, part):
    // a batch written again is cut the same way, so the parts the store took before (a write that failed half-way,
    // or landed past its timeout) are skipped and the others added.
    await this.run('usage', async (c) => {
      for (let from = 0, part = 0; from < checked.length; from += ADD_USAGE_ROWS, part++) {
        const keys: string[] = [k.usageWriters, k.usageAll, k.usageVersion, k.usageChanged, k.usageWritersAt];
        const args: (string | number)[] = [redisBatchMark(batchId, part), t];
        for (let i = from; i < Math.min(checked.length, from + ADD_USAGE_ROWS); i++) {
          const d = checked[i]!;
          keys.push(k.usage(d.user));
          args.push(d.user, d.bytes);
        }
        await this.script(c, 'rotorAddUsage', [keys.length, ...keys, ...args]);
      }
    });
  }

  async getUsage(user: string): Promise<S.UsageRecord | undefined> {
    const h = await this.run(`usage of ${user}`, (c) => c.hgetall(this.keys.usage(user)));
    return Object.keys(h).length ? toUsage(user, h) : undefined;
  }

  async listUsage(): Promise<S.UsageRecord[]> {
    return this.run('usage', async (c) => {
      const users = (await c.smembers(this.keys.usageAll)).sort(byKey);
      return await this.usageRows(c, users);
    });
  }

  /** Adds the usage change feed's entry for these users' rows to a MULTI that writes them (USAGE_CHANGED). */
  private usageChanged(m: ChainableCommander, rows: readonly { user: string }[]): void {
    const args: string[] = [this.keys.usageVersion, this.keys.usageChanged];
    for (const r of rows) args.push(r.user);
    (m as unknown as Record<string, (...a: string[]) => unknown>).rotorUsageChanged!(...args);
  }

  async usageChangedSince(
    since: S.UsageCursor | undefined,
  ): Promise<{ rows: S.UsageRecord[]; cursor: S.UsageCursor | undefined; full: boolean }> {
    const k = this.keys;
    return this.run('usage', async (c) => {
      // The counter, the epoch and the names in one MULTI: a write (its rows and its version) is wholly in it
      // or wholly after it, and one written after is in the next call's answer.
      const m = c.multi().get(k.usageVersion).get(k.epoch);
      if (since !== undefined) m.zrangebyscore(k.usageChanged, `(${String(since.version)}`, '+inf');
      const r = (await m.exec()) ?? [];
      for (const [err] of r) if (err) throw err;
      const version = Number(r[0]?.[1] ?? 0);
      const epoch = r[1]?.[1] as string | null;
      // No epoch yet, or a new one, or a counter below ours: Redis lost data (or was replaced) since the
      // last read, so what changed since `since` cannot be told: every row.
      const cursor = epoch === null ? undefined : { version, epoch };
      if (since === undefined || cursor === undefined || epoch !== since.epoch || version < since.version) {
        const users = (await c.smembers(k.usageAll)).sort(byKey);
        return { rows: await this.usageRows(c, users), cursor, full: true };
      }
      const users = r[2]?.[1] as string[];
      return { rows: await this.usageRows(c, users), cursor, full: false };
    });
  }

  async getUsages(users: readonly string[]): Promise<S.UsageRecord[]> {
    if (users.length === 0) return [];
    return this.run(`usage of ${users.length} users`, async (c) => {
      return await this.usageRows(c, users);
    });
  }

  async setLimits(limits: readonly { user: string; limitBytes: number }[]): Promise<void> {
    if (limits.length === 0) return;
    // Checked before anything is sent: a bad entry leaves the whole batch unwritten, as in SQLite.
    const checked = limits.map((l) => ({ user: checkUser(l.user, 'limit'), limit: checkBytes(l.limitBytes, 'limit') }));
    const t = this.now();
    await this.run(`limits of ${limits.length} users`, async (c) => {
      // A page per MULTI, as the listings read (a command's timeout runs from its send).
      for (let from = 0; from < checked.length; from += HASH_PAGE) {
        const m = c.multi();
        const page = checked.slice(from, from + HASH_PAGE);
        for (const l of page) {
          const key = this.keys.usage(l.user);
          m.hset(key, 'limit', l.limit, 'updatedAt', t).hsetnx(key, 'used', 0).sadd(this.keys.usageAll, l.user);
        }
        this.usageChanged(m, page);
        const results = (await m.exec()) ?? [];
        for (const [err] of results) if (err) throw err;
      }
    });
  }

  async setLimit(user: string, limitBytes: number): Promise<void> {
    checkUser(user, 'limit');
    const limit = checkBytes(limitBytes, 'limit');
    const key = this.keys.usage(user);
    const t = this.now();
    await this.run(`limit of ${user}`, async (c) => {
      const m = c.multi().hset(key, 'limit', limit, 'updatedAt', t).hsetnx(key, 'used', 0).sadd(this.keys.usageAll, user);
      this.usageChanged(m, [{ user }]);
      const results = (await m.exec()) ?? [];
      for (const [err] of results) if (err) throw err;
    });
  }

  // ── users ──
  async putUser(
    user: Omit<S.StoredUser, 'version' | 'updatedAt'>,
    options: { ifAbsent?: boolean; ifVersion?: number } = {},
  ): Promise<S.StoredUser> {
    checkUser(user.name, 'user');
    const k = this.keys;
    const t = this.now();
    const mode = options.ifAbsent ? 'absent' : options.ifVersion !== undefined ? 'version' : '';
    const version = await this.run(`user ${user.name}`, (c) =>
      this.script(c, 'rotorPutUser', [
        k.user(user.name),
        k.usersLive,
        k.usersGone,
        k.usersVersion,
        user.name,
        json(user.data),
        user.passwordHash,
        user.state,
        t,
        mode,
        String(options.ifVersion ?? ''),
      ]),
    ).catch((err: unknown) => {
      if (err instanceof StoreError && err.code === 'STORE_CONFLICT') throw new StoreConflictError(`user ${user.name}`);
      throw err;
    });
    return { ...user, version: Number(version), updatedAt: t };
  }

  async putUsers(writes: readonly S.UserWrite[]): Promise<(S.StoredUser | StoreConflictError)[]> {
    if (writes.length === 0) return [];
    const k = this.keys;
    const t = this.now();
    const keys: string[] = [k.usersLive, k.usersGone, k.usersVersion];
    const args: (string | number)[] = [t];
    for (const w of writes) {
      keys.push(k.user(checkUser(w.user.name, 'user')));
      const mode = w.ifAbsent ? 'absent' : w.ifVersion !== undefined ? 'version' : '';
      args.push(w.user.name, json(w.user.data), w.user.passwordHash, w.user.state, mode, String(w.ifVersion ?? ''));
    }
    const versions = (await this.run(`${writes.length} users`, (c) =>
      this.script(c, 'rotorPutUsers', [keys.length, ...keys, ...args]),
    )) as number[];
    return writes.map((w, i) => {
      const version = Number(versions[i]);
      if (version === 0) return new StoreConflictError(w.ifAbsent ? `user ${w.user.name}` : `user ${w.user.name} changed meanwhile`);
      return { ...w.user, version, updatedAt: t };
    });
  }

  async getUser(name: string): Promise<S.StoredUser | undefined> {
    const h = await this.run(`user ${name}`, (c) => c.hgetall(this.keys.user(name)));
    return Object.keys(h).length ? toUser(name, h) : undefined;
  }

  async listUsers(): Promise<S.StoredUser[]> {
    return this.run('users', async (c) => {
      const names = (await c.zrange(this.keys.usersLive, '0', '-1')).sort(byKey);
      return await this.userRecords(c, names);
    });
  }

  async deleteUser(name: string): Promise<boolean> {
    const k = this.keys;
    const r = await this.run(`user ${name}`, (c) =>
      this.script(c, 'rotorDeleteUser', [k.user(name), k.usersLive, k.usersGone, k.usersVersion, name]),
    );
    return Number(r) === 1;
  }

  async deletedAmong(names: readonly string[]): Promise<Set<string>> {
    const out = new Set<string>();
    if (names.length === 0) return out;
    // One round trip: a ZSCORE per name in one pipeline (ZMSCORE needs Redis 6.2).
    await this.run('users', async (c) => {
      const p = c.pipeline();
      for (const n of names) p.zscore(this.keys.usersGone, n);
      const results = (await p.exec()) ?? [];
      results.forEach(([err, score], i) => {
        if (err) throw err;
        if (score !== null) out.add(names[i]!);
      });
    });
    return out;
  }

  async usersChangedSince(version: number): Promise<{ changed: S.StoredUser[]; deleted: string[]; version: number }> {
    return this.run('users', async (c) => {
      // The counter first: a write landing between the reads is seen now or by the next call, never lost.
      const now = Number((await c.get(this.keys.usersVersion)) ?? 0);
      const names = await c.zrangebyscore(this.keys.usersLive, `(${String(version)}`, '+inf');
      const deleted = await c.zrangebyscore(this.keys.usersGone, `(${String(version)}`, '+inf');
      const changed: S.StoredUser[] = await this.userRecords(c, names);
      // Entries written after `now` was read come again next time (applying a record twice is harmless).
      return { changed, deleted, version: now };
    });
  }

  // ── kv ──
  async kvGet<T = unknown>(key: string): Promise<T | undefined> {
    const v = await this.run(`kv ${key}`, (c) => c.hget(this.keys.kv, key));
    return v === null ? undefined : (JSON.parse(v) as T);
  }

  async kvSet(key: string, value: unknown): Promise<void> {
    await this.run(`kv ${key}`, (c) => c.hset(this.keys.kv, key, json(value)));
  }

  async kvDelete(key: string): Promise<void> {
    await this.run(`kv ${key}`, (c) => c.hdel(this.keys.kv, key));
  }

  async kvList<T = unknown>(prefix: string): Promise<{ key: string; value: T }[]> {
    const all = await this.run('kv', (c) => c.hgetall(this.keys.kv));
    return Object.keys(all)
      .filter((k) => k.startsWith(prefix))
      .sort(byKey)
      .map((k) => ({ key: k, value: JSON.parse(all[k] as string) as T }));
  }

  // ── event outbox (redis-events.ts) ──
  async appendEvent(event: S.NewEvent): Promise<S.EventRecord | undefined> {
    return this.run('events', (c) => outbox.appendEvent((name, args) => callScript(c, name, args), this.eventKeys, event, this.now()));
  }

  async listEvents(filter?: { since?: number; limit?: number }): Promise<S.EventRecord[]> {
    return this.run('events', (c) => outbox.listEvents(c, this.eventKeys, filter));
  }

  async claimEvents(now: number, leaseMs: number, limit: number): Promise<S.EventRecord[]> {
    return this.run('events', (c) => outbox.claimEvents(c, (name, args) => callScript(c, name, args), this.eventKeys, now, leaseMs, limit));
  }

  async settleEvent(id: number, outcome: S.EventSettlement): Promise<void> {
    await this.run(`event ${id}`, (c) => outbox.settleEvent(c, this.eventKeys, id, outcome));
  }

  async clearMarker(marker: string): Promise<void> {
    await this.run('events', (c) => outbox.clearMarker(c, this.eventKeys, marker));
  }

  async pruneEvents(options: { deliveredBefore: number; now: number }): Promise<number> {
    return this.run('events', (c) => outbox.pruneEvents(c, this.eventKeys, options));
  }

  connectionLog(bounds: Partial<RecordBounds> = {}): ConnectionLogStore {
    return new RedisConnectionLog(this.connection, this.openRecords, bounds);
  }

  fleetState(): FleetState {
    return new RedisFleetState(this.connection, this.keys.prefix);
  }

  async close(): Promise<void> {
    await this.openRecords.close();
    await this.connection.close();
  }
}

function window<T>(list: T[], limit: number | undefined, offset: number | undefined): T[] {
  const from = Math.max(0, offset ?? 0);
  return limit === undefined || limit < 0 ? list.slice(from) : list.slice(from, from + limit);
}

/** Opens and connects a Redis store; rejects with StoreUnavailableError (and leaves nothing running) if it cannot. */
export async function openRedisStore(url: string, options: RedisStoreOptions = {}): Promise<RedisStore> {
  const store = new RedisStore(url, options);
  try {
    return await store.connect();
  } catch (err) {
    await store.close();
    throw err;
  }
}
