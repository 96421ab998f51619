// The SQLite store (better-sqlite3): one file, WAL journal, numbered migrations. better-sqlite3 is
// synchronous; the methods are async only to honour the Store interface (the Redis driver needs it).
import type { ConnectionLogStore, RecordBounds } from './connection-log-types.ts';
import { SqliteConnectionLog } from './sqlite-connection-log.ts';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import { FINAL_ORDER_STATUS } from '../platform/order-status.ts';
import { MIGRATIONS, type Migration } from './migrations.ts';
import { StoreConflictError, StoreUnavailableError } from './errors.ts';
import * as outbox from './sqlite-events.ts';
// S: the records and the interface both drivers implement (src/store/types.ts).
import type * as S from './types.ts';
import type { Logger } from '../telemetry/logger.ts';
import { intentEntry } from './types.ts';
import { SqliteBatchMarks } from './sqlite-batch-marks.ts';

export interface SqliteStoreOptions {
  /** Clock for timestamps (epoch ms); default Date.now. */
  now?: () => number;
  /** Migrations to apply (tests add to the list); default MIGRATIONS. */
  migrations?: readonly Migration[];
  /** Says which migrations run at open and how long each took (one rebuilds the connection log: seconds). */
  logger?: Logger;
}

type Row = Record<string, unknown>;

const json = (v: unknown): string => JSON.stringify(v ?? null);
const parse = (s: unknown): unknown => (typeof s === 'string' ? JSON.parse(s) : null);
const str = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));
const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

function toOrder(r: Row): S.OrderRecord {
  return {
    appOrderNo: String(r.app_order_no),
    orderNo: str(r.order_no),
    type: Number(r.type),
    status: Number(r.status),
    amount: str(r.amount),
    count: num(r.count),
    request: parse(r.request),
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
  };
}

function toInstance(r: Row): S.InstanceRecord {
  return {
    instanceNo: String(r.instance_no),
    orderNo: str(r.order_no),
    productNo: str(r.product_no),
    status: num(r.status),
    ip: str(r.ip),
    port: num(r.port),
    username: str(r.username),
    pwd: str(r.pwd),
    protocol: str(r.protocol),
    userExpired: num(r.user_expired),
    raw: parse(r.raw),
    updatedAt: Number(r.updated_at),
  };
}

function toJournal(r: Row): S.JournalEntry {
  return {
    merchantNo: String(r.merchant_no),
    operation: String(r.operation),
    request: parse(r.request),
    reqId: String(r.req_id),
    state: r.state as S.JournalState,
    result: parse(r.result),
    orderNo: str(r.order_no),
    attempts: Number(r.attempts),
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
  };
}

function toUsage(r: Row): S.UsageRecord {
  return { user: String(r.user), usedBytes: Number(r.used_bytes), limitBytes: Number(r.limit_bytes), updatedAt: Number(r.updated_at) };
}

function toUser(r: Row): S.StoredUser {
  return {
    name: String(r.name),
    data: parse(r.data),
    passwordHash: String(r.password_hash),
    state: r.state === 'creating' ? 'creating' : 'ready',
    version: Number(r.version),
    updatedAt: Number(r.updated_at),
  };
}

function toCallback(r: Row): S.CallbackRecord {
  return {
    type: String(r.type),
    no: String(r.no),
    op: String(r.op),
    receivedAt: Number(r.received_at),
    count: Number(r.count),
    processed: Number(r.processed) === 1,
  };
}

/** Applies every migration not yet recorded; safe to run on every open. Returns the ids applied now. */
export function migrate(
  db: Database.Database,
  migrations: readonly Migration[] = MIGRATIONS,
  now: () => number = Date.now,
  logger?: Logger,
): number[] {
  db.exec('CREATE TABLE IF NOT EXISTS migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
  const done = new Set((db.prepare('SELECT id FROM migrations').all() as Row[]).map((r) => Number(r.id)));
  const applied: number[] = [];
  const record = db.prepare('INSERT INTO migrations (id, name, applied_at) VALUES (?, ?, ?)');
  for (const m of [...migrations].sort((a, b) => a.id - b.id)) {
    if (done.has(m.id)) continue;
    // Before and after, on a store that has data (a new one takes them all at once, in milliseconds): a migration
    // that rebuilds a large table holds the start for seconds.
    const log = done.size > 0 ? logger : undefined;
    log?.info({ migration: m.id, name: m.name }, 'store migration: applying');
    const started = performance.now();
    db.transaction(() => {
      db.exec(m.sql);
      record.run(m.id, m.name, now());
    })();
    log?.info({ migration: m.id, ms: Math.round(performance.now() - started) }, 'store migration: applied');
    applied.push(m.id);
  }
  return applied;
}

/** PRAGMA auto_vacuum's value for INCREMENTAL. */
const INCREMENTAL = 2;
const WAL_SIZE_LIMIT = 4 * 1024 * 1024;

export class SqliteStore implements S.Store {
  private readonly db: Database.Database;
  private readonly now: () => number;
  /** The meter flushes' writer marks (made with the first flush: the migrations have run by then). */
  private usageMarks: SqliteBatchMarks | undefined;
  private closed = false;
  private readonly statements = new Map<string, Database.Statement>();

  constructor(path: string, options: SqliteStoreOptions = {}) {
    this.now = options.now ?? Date.now;
    try {
      if (path !== ':memory:' && !path.startsWith('file:')) mkdirSync(dirname(path), { recursive: true });
      this.db = new Database(path);
      // Pages freed by trimming go back to the file system (sqlite-connection-log.ts runs incremental_vacuum):
      // set before the file's first write, so a new file has it from the start; an older file is converted once.
      this.db.pragma('auto_vacuum = INCREMENTAL');
      this.db.pragma('journal_mode = WAL');
      // The WAL is cut back to this after a checkpoint instead of keeping its largest size.
      this.db.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT}`);
      // NORMAL under WAL: a commit survives a process crash (SIGKILL); only an OS crash may lose the last one.
      this.db.pragma('synchronous = NORMAL');
      this.db.pragma('busy_timeout = 5000');
      this.db.pragma('foreign_keys = ON');
      const applied = migrate(this.db, options.migrations ?? MIGRATIONS, this.now, options.logger);
      if (path !== ':memory:' && Number(this.db.pragma('auto_vacuum', { simple: true })) !== INCREMENTAL) this.db.exec('VACUUM');
      // A migration that rebuilt a table (60: the connection log) left the old one's pages free: they go back to
      // the file system now, before the daemon serves, not in the first retention pass (which held the event loop
      // 2.5 s after a rebuild of 1,000,000 records).
      else if (applied.length > 0 && Number(this.db.pragma('freelist_count', { simple: true })) > 0) this.db.pragma('incremental_vacuum');
    } catch (err) {
      throw new StoreUnavailableError(`cannot open store at ${path}: ${(err as Error).message}`, { cause: err });
    }
  }

  /** The ids of applied migrations (for tests and readiness checks). */
  appliedMigrations(): number[] {
    return (this.prepare('SELECT id FROM migrations ORDER BY id').all() as Row[]).map((r) => Number(r.id));
  }

  /** SQLite's journal mode (expected: wal, or memory for ':memory:'). */
  journalMode(): string {
    return String(this.q().pragma('journal_mode', { simple: true }));
  }

  /**
   * The open database, for components that keep tables of their own in the same file (src/connlog): they
   * write through their own prepared statements, so the Store interface need not grow for every one of them.
   */
  database(): Database.Database {
    return this.q();
  }

  connectionLog(bounds: Partial<RecordBounds> = {}): ConnectionLogStore {
    return new SqliteConnectionLog(this.q(), bounds, this.now);
  }

  private q(): Database.Database {
    if (this.closed) throw new StoreUnavailableError('store is closed');
    return this.db;
  }

  /**
   * A statement prepared once per SQL text and kept: preparing costs more than running, and the start reads
   * and writes per user (100,000 users). The texts are the fixed ones below and the filter combinations of
   * listOrders/listInstances, so the cache is bounded.
   */
  private prepare(sql: string): Database.Statement {
    let stmt = this.statements.get(sql);
    if (stmt === undefined) {
      stmt = this.q().prepare(sql);
      this.statements.set(sql, stmt);
    } else if (this.closed) throw new StoreUnavailableError('store is closed');
    return stmt;
  }

  // ── orders ──
  async putOrder(o: S.OrderRecord): Promise<void> {
    this.writeOrder(o);
  }

  async putOrderWithEvent(o: S.OrderRecord, event: S.NewEvent): Promise<S.EventRecord | undefined> {
    const db = this.q();
    return db.transaction(() => {
      this.writeOrder(o);
      return outbox.appendEvent(db, event);
    })();
  }

  private writeOrder(o: S.OrderRecord): void {
    this.prepare(
      `INSERT INTO orders (app_order_no, order_no, type, status, amount, count, request, created_at, updated_at)
         VALUES (@appOrderNo, @orderNo, @type, @status, @amount, @count, @request, @createdAt, @updatedAt)
         ON CONFLICT (app_order_no) DO UPDATE SET order_no = excluded.order_no, type = excluded.type,
           status = excluded.status, amount = excluded.amount, count = excluded.count, request = excluded.request,
           updated_at = excluded.updated_at`,
    ).run({ ...o, request: json(o.request) });
  }

  async getOrder(no: string): Promise<S.OrderRecord | undefined> {
    const r = this.prepare('SELECT * FROM orders WHERE app_order_no = ? OR order_no = ? ORDER BY app_order_no = ? DESC LIMIT 1').get(
      no,
      no,
      no,
    ) as Row | undefined;
    return r ? toOrder(r) : undefined;
  }

  async listOrders(filter: S.OrderFilter = {}): Promise<S.OrderRecord[]> {
    const where: string[] = [];
    const args: unknown[] = [];
    if (filter.type !== undefined) {
      where.push('type = ?');
      args.push(filter.type);
    }
    if (filter.statuses?.length) {
      where.push(`status IN (${filter.statuses.map(() => '?').join(',')})`);
      args.push(...filter.statuses);
    }
    if (filter.open) where.push(`status NOT IN (${[...FINAL_ORDER_STATUS].join(',')})`);
    const sql = `SELECT * FROM orders ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at DESC, app_order_no LIMIT ? OFFSET ?`;
    args.push(filter.limit ?? -1, filter.offset ?? 0);
    return (this.prepare(sql).all(...args) as Row[]).map(toOrder);
  }

  async countOrders(): Promise<{ type: number; status: number; count: number }[]> {
    return (this.prepare('SELECT type, status, COUNT(*) AS n FROM orders GROUP BY type, status').all() as Row[]).map((r) => ({
      type: Number(r.type),
      status: Number(r.status),
      count: Number(r.n),
    }));
  }

  // ── instances ──
  async putInstances(instances: S.InstanceRecord[]): Promise<void> {
    const db = this.q();
    const stmt = this.prepare(
      `INSERT INTO instances (instance_no, order_no, product_no, status, ip, port, username, pwd, protocol, user_expired, raw, updated_at)
       VALUES (@instanceNo, @orderNo, @productNo, @status, @ip, @port, @username, @pwd, @protocol, @userExpired, @raw, @updatedAt)
       ON CONFLICT (instance_no) DO UPDATE SET order_no = excluded.order_no, product_no = excluded.product_no,
         status = excluded.status, ip = excluded.ip, port = excluded.port, username = excluded.username, pwd = excluded.pwd,
         protocol = excluded.protocol, user_expired = excluded.user_expired, raw = excluded.raw, updated_at = excluded.updated_at`,
    );
    db.transaction((list: S.InstanceRecord[]) => {
      for (const i of list) stmt.run({ ...i, raw: json(i.raw) });
    })(instances);
  }

  async getInstance(instanceNo: string): Promise<S.InstanceRecord | undefined> {
    const r = this.prepare('SELECT * FROM instances WHERE instance_no = ?').get(instanceNo) as Row | undefined;
    return r ? toInstance(r) : undefined;
  }

  async listInstances(filter: S.InstanceFilter = {}): Promise<S.InstanceRecord[]> {
    const where: string[] = [];
    const args: unknown[] = [];
    if (filter.orderNo !== undefined) {
      where.push('order_no = ?');
      args.push(filter.orderNo);
    }
    if (filter.productNo !== undefined) {
      where.push('product_no = ?');
      args.push(filter.productNo);
    }
    if (filter.statuses?.length) {
      where.push(`status IN (${filter.statuses.map(() => '?').join(',')})`);
      args.push(...filter.statuses);
    }
    if (filter.expiresBefore !== undefined) {
      where.push('user_expired IS NOT NULL AND user_expired <= ?');
      args.push(filter.expiresBefore);
    }
    const sql = `SELECT * FROM instances ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY instance_no LIMIT ? OFFSET ?`;
    args.push(filter.limit ?? -1, filter.offset ?? 0);
    return (this.prepare(sql).all(...args) as Row[]).map(toInstance);
  }

  async countInstances(): Promise<{ status: number | null; count: number }[]> {
    return (this.prepare('SELECT status, COUNT(*) AS n FROM instances GROUP BY status').all() as Row[]).map((r) => ({
      status: num(r.status),
      count: Number(r.n),
    }));
  }

  // ── journal ──
  async addIntent(entry: S.NewIntent): Promise<S.JournalEntry> {
    const t = this.now();
    try {
      this.prepare(
        `INSERT INTO journal (merchant_no, operation, request, req_id, state, result, order_no, attempts, created_at, updated_at)
           VALUES (?, ?, ?, ?, 'intent', NULL, NULL, 0, ?, ?)`,
      ).run(entry.merchantNo, entry.operation, json(entry.request), entry.reqId, t, t);
    } catch (err) {
      if ((err as { code?: string }).code === 'SQLITE_CONSTRAINT_PRIMARYKEY')
        throw new StoreConflictError(`journal entry ${entry.merchantNo}`);
      throw err;
    }
    return intentEntry(entry, t);
  }

  async updateJournal(merchantNo: string, patch: S.JournalPatch): Promise<void> {
    this.prepare(
      `UPDATE journal SET state = @state,
           result = CASE WHEN @hasResult THEN @result ELSE result END,
           order_no = CASE WHEN @hasOrderNo THEN @orderNo ELSE order_no END,
           attempts = attempts + @sent, updated_at = @now
         WHERE merchant_no = @merchantNo`,
    ).run({
      merchantNo,
      state: patch.state,
      hasResult: patch.result !== undefined ? 1 : 0,
      result: patch.result !== undefined ? json(patch.result) : null,
      hasOrderNo: patch.orderNo !== undefined ? 1 : 0,
      orderNo: patch.orderNo ?? null,
      sent: patch.sent ? 1 : 0,
      now: this.now(),
    });
  }

  async getJournal(merchantNo: string): Promise<S.JournalEntry | undefined> {
    const r = this.prepare('SELECT * FROM journal WHERE merchant_no = ?').get(merchantNo) as Row | undefined;
    return r ? toJournal(r) : undefined;
  }

  async listJournal(states?: readonly S.JournalState[]): Promise<S.JournalEntry[]> {
    if (states && states.length === 0) return [];
    const sql = states
      ? `SELECT * FROM journal WHERE state IN (${states.map(() => '?').join(',')}) ORDER BY created_at, merchant_no`
      : 'SELECT * FROM journal ORDER BY created_at, merchant_no';
    return (this.prepare(sql).all(...(states ?? [])) as Row[]).map(toJournal);
  }

  // ── callbacks ──
  async recordCallback(key: S.CallbackKey, receivedAt: number): Promise<{ duplicate: boolean; processed: boolean }> {
    const db = this.q();
    return db.transaction(() => {
      const existing = this.prepare('SELECT processed FROM callbacks WHERE type = ? AND no = ? AND op = ?').get(
        key.type,
        key.no,
        key.op,
      ) as Row | undefined;
      if (existing) {
        this.prepare('UPDATE callbacks SET count = count + 1 WHERE type = ? AND no = ? AND op = ?').run(key.type, key.no, key.op);
        return { duplicate: true, processed: Number(existing.processed) === 1 };
      }
      this.prepare('INSERT INTO callbacks (type, no, op, received_at) VALUES (?, ?, ?, ?)').run(key.type, key.no, key.op, receivedAt);
      return { duplicate: false, processed: false };
    })();
  }

  async markCallbackProcessed(key: S.CallbackKey): Promise<void> {
    this.prepare('UPDATE callbacks SET processed = 1 WHERE type = ? AND no = ? AND op = ?').run(key.type, key.no, key.op);
  }

  async listCallbacks(filter: { processed?: boolean } = {}): Promise<S.CallbackRecord[]> {
    const rows =
      filter.processed === undefined
        ? this.prepare('SELECT * FROM callbacks ORDER BY received_at, rowid').all()
        : this.prepare('SELECT * FROM callbacks WHERE processed = ? ORDER BY received_at, rowid').all(filter.processed ? 1 : 0);
    return (rows as Row[]).map(toCallback);
  }

  // ── usage ──
  async addUsage(deltas: { user: string; bytes: number }[], batchId?: string): Promise<void> {
    const db = this.q();
    const stmt = this.prepare(
      `INSERT INTO usage (user, used_bytes, limit_bytes, updated_at) VALUES (?, ?, -1, ?)
       ON CONFLICT (user) DO UPDATE SET used_bytes = used_bytes + excluded.used_bytes, updated_at = excluded.updated_at`,
    );
    const t = this.now();
    this.usageMarks ??= new SqliteBatchMarks(db, 'usage');
    const marks = this.usageMarks;
    db.transaction((list: { user: string; bytes: number }[]) => {
      // The batch's writer mark in the same transaction as its increments (batch-marks.ts): taken before, nothing is added.
      if (batchId !== undefined && marks.taken(batchId, t)) return;
      for (const d of list) stmt.run(d.user, Math.trunc(d.bytes), t);
    })(deltas);
  }

  async getUsage(user: string): Promise<S.UsageRecord | undefined> {
    const r = this.prepare('SELECT * FROM usage WHERE user = ?').get(user) as Row | undefined;
    return r ? toUsage(r) : undefined;
  }

  async listUsage(): Promise<S.UsageRecord[]> {
    return (this.prepare('SELECT * FROM usage ORDER BY user').all() as Row[]).map(toUsage);
  }

  /** No feed here (one daemon per file, no fleet re-read): every row, every time. */
  async usageChangedSince(): Promise<{ rows: S.UsageRecord[]; cursor: undefined; full: true }> {
    return { rows: await this.listUsage(), cursor: undefined, full: true };
  }

  async getUsages(users: readonly string[]): Promise<S.UsageRecord[]> {
    const stmt = this.prepare('SELECT * FROM usage WHERE user = ?');
    const out: S.UsageRecord[] = [];
    for (const u of users) {
      const r = stmt.get(u) as Row | undefined;
      if (r) out.push(toUsage(r));
    }
    return out;
  }

  async setLimits(limits: readonly { user: string; limitBytes: number }[]): Promise<void> {
    const stmt = this.prepare(
      `INSERT INTO usage (user, used_bytes, limit_bytes, updated_at) VALUES (?, 0, ?, ?)
         ON CONFLICT (user) DO UPDATE SET limit_bytes = excluded.limit_bytes, updated_at = excluded.updated_at`,
    );
    const t = this.now();
    this.q().transaction((list: readonly { user: string; limitBytes: number }[]) => {
      for (const l of list) stmt.run(l.user, Math.trunc(l.limitBytes), t);
    })(limits);
  }

  async setLimit(user: string, limitBytes: number): Promise<void> {
    this.prepare(
      `INSERT INTO usage (user, used_bytes, limit_bytes, updated_at) VALUES (?, 0, ?, ?)
         ON CONFLICT (user) DO UPDATE SET limit_bytes = excluded.limit_bytes, updated_at = excluded.updated_at`,
    ).run(user, Math.trunc(limitBytes), this.now());
  }

  // ── users ──
  async putUser(
    user: Omit<S.StoredUser, 'version' | 'updatedAt'>,
    options: { ifAbsent?: boolean; ifVersion?: number } = {},
  ): Promise<S.StoredUser> {
    return this.q().transaction(() => this.writeUser(user, options))();
  }

  /** Many putUser writes in one transaction (one commit, not one per user); each conflict stands alone. */
  async putUsers(writes: readonly S.UserWrite[]): Promise<(S.StoredUser | StoreConflictError)[]> {
    return this.q().transaction(() =>
      writes.map((w) => {
        try {
          return this.writeUser(w.user, w);
        } catch (err) {
          if (err instanceof StoreConflictError) return err;
          throw err;
        }
      }),
    )();
  }

  /** putUser's work, inside a transaction. */
  private writeUser(user: Omit<S.StoredUser, 'version' | 'updatedAt'>, options: { ifAbsent?: boolean; ifVersion?: number }): S.StoredUser {
    const existing = this.prepare('SELECT version FROM users WHERE name = ?').get(user.name) as Row | undefined;
    if (options.ifAbsent && existing) throw new StoreConflictError(`user ${user.name}`);
    if (options.ifVersion !== undefined && Number(existing?.version ?? -1) !== options.ifVersion)
      throw new StoreConflictError(`user ${user.name} changed meanwhile`);
    const version = this.nextUserVersion();
    const t = this.now();
    this.prepare(
      `INSERT INTO users (name, data, password_hash, state, version, updated_at) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (name) DO UPDATE SET data = excluded.data, password_hash = excluded.password_hash, state = excluded.state,
           version = excluded.version, updated_at = excluded.updated_at`,
    ).run(user.name, json(user.data), user.passwordHash, user.state, version, t);
    this.prepare('DELETE FROM user_tombstones WHERE name = ?').run(user.name);
    return { ...user, version, updatedAt: t };
  }

  private nextUserVersion(): number {
    this.prepare('UPDATE user_version SET version = version + 1 WHERE id = 1').run();
    return Number((this.prepare('SELECT version FROM user_version WHERE id = 1').get() as Row).version);
  }

  async getUser(name: string): Promise<S.StoredUser | undefined> {
    const r = this.prepare('SELECT * FROM users WHERE name = ?').get(name) as Row | undefined;
    return r ? toUser(r) : undefined;
  }

  async listUsers(): Promise<S.StoredUser[]> {
    return (this.prepare('SELECT * FROM users ORDER BY name').all() as Row[]).map(toUser);
  }

  async deleteUser(name: string): Promise<boolean> {
    const db = this.q();
    return db.transaction(() => {
      const gone = this.prepare('DELETE FROM users WHERE name = ?').run(name).changes > 0;
      if (gone) {
        const version = this.nextUserVersion();
        this.prepare(
          'INSERT INTO user_tombstones (name, version) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET version = excluded.version',
        ).run(name, version);
      }
      return gone;
    })();
  }

  async deletedAmong(names: readonly string[]): Promise<Set<string>> {
    const stmt = this.prepare('SELECT 1 FROM user_tombstones WHERE name = ?');
    const out = new Set<string>();
    for (const n of names) if (stmt.get(n) !== undefined) out.add(n);
    return out;
  }

  async usersChangedSince(version: number): Promise<{ changed: S.StoredUser[]; deleted: string[]; version: number }> {
    const db = this.q();
    return db.transaction(() => {
      const changed = (this.prepare('SELECT * FROM users WHERE version > ? ORDER BY version').all(version) as Row[]).map(toUser);
      const deleted = (this.prepare('SELECT name FROM user_tombstones WHERE version > ? ORDER BY version').all(version) as Row[]).map((r) =>
        String(r.name),
      );
      const now = Number((this.prepare('SELECT version FROM user_version WHERE id = 1').get() as Row).version);
      return { changed, deleted, version: now };
    })();
  }

  // ── kv ──
  async kvGet<T = unknown>(key: string): Promise<T | undefined> {
    const r = this.prepare('SELECT value FROM kv WHERE key = ?').get(key) as Row | undefined;
    return r ? (parse(r.value) as T) : undefined;
  }

  async kvSet(key: string, value: unknown): Promise<void> {
    this.prepare('INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value').run(key, json(value));
  }

  async kvDelete(key: string): Promise<void> {
    this.prepare('DELETE FROM kv WHERE key = ?').run(key);
  }

  async kvList<T = unknown>(prefix: string): Promise<{ key: string; value: T }[]> {
    // substr comparison, not LIKE: keys may contain % and _.
    const rows = this.prepare('SELECT key, value FROM kv WHERE substr(key, 1, ?) = ? ORDER BY key').all(prefix.length, prefix) as Row[];
    return rows.map((r) => ({ key: String(r.key), value: parse(r.value) as T }));
  }

  // ── event outbox (sqlite-events.ts) ──
  async appendEvent(event: S.NewEvent): Promise<S.EventRecord | undefined> {
    return outbox.appendEvent(this.q(), event);
  }

  async listEvents(filter?: { since?: number; limit?: number }): Promise<S.EventRecord[]> {
    return outbox.listEvents(this.q(), filter);
  }

  async claimEvents(now: number, leaseMs: number, limit: number): Promise<S.EventRecord[]> {
    return outbox.claimEvents(this.q(), now, leaseMs, limit);
  }

  async settleEvent(id: number, outcome: S.EventSettlement): Promise<void> {
    outbox.settleEvent(this.q(), id, outcome);
  }

  async clearMarker(marker: string): Promise<void> {
    outbox.clearMarker(this.q(), marker);
  }

  async pruneEvents(options: { deliveredBefore: number; now: number }): Promise<number> {
    return outbox.pruneEvents(this.q(), options);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.db.close();
  }
}
