// The connection log in the daemon's SQLite file (tables of migration 30). A batch of records and its
// rollup increments are one transaction, so a crash keeps both or neither. The bounds (rows and bytes) are
// enforced inside that transaction: a batch that would pass them removes the oldest records with it, so the
// table never holds more, whatever the rate of records. The rows and bytes held are counted once when the
// log opens and then kept exact from each insert and delete (no COUNT per batch). Freed pages go back to the
// file system (the file is auto_vacuum=INCREMENTAL) once they are a large share of it. Retention by age deletes
// in slices (better-sqlite3 is synchronous: one huge DELETE would hold the event loop, and with it the data path).
// A batch's writer mark (batch-marks.ts, migration 72) is written in its transaction too: a batch written again
// changes nothing.
import type Database from 'better-sqlite3';
import { SqliteBatchMarks } from './sqlite-batch-marks.ts';
import { foldRollups } from './connection-log-rollup.ts';
import {
  LOST_REASON,
  RECORD_FIXED_BYTES,
  RECORD_TEXT_FIELDS,
  recordSize,
  type ConnectionLogStore,
  type ConnectionQuery,
  type ConnectionRecord,
  type RecordBounds,
  type RecordFootprint,
  type RecordResult,
  type RetentionLimits,
  type UsageQuery,
  type UsageRollup,
} from './connection-log-types.ts';

type Row = Record<string, unknown>;
/** A record's position in the unique (started_at, id) index, as a raw row. */
type Key = [startedAt: number, id: string];

/**
 * Records per multi-row INSERT: one statement opens its b-tree cursors and binds once per 25 rows instead
 * of per row (callgrind, 20,000 records in batches of 500: 46.2 k instructions per record one row at a time,
 * 33.3 k 25 rows at a time). A batch's remainder goes one row at a time.
 */
const ROWS_PER_INSERT = 25;
const COLUMNS = 18;
const INSERT_COLUMNS =
  'id, user, session, listener, target, node, exit, bytes_up, bytes_down, started_at, duration_ms, result, reason, retries, hedges, rule, client, count';
const ROW_VALUES = `(${new Array<string>(COLUMNS).fill('?').join(', ')})`;

/** A record's values in INSERT_COLUMNS' order, into `into` from `at`. */
function bindRow(into: unknown[], at: number, r: ConnectionRecord): void {
  into[at] = r.id;
  into[at + 1] = r.user;
  into[at + 2] = r.session;
  into[at + 3] = r.listener;
  into[at + 4] = r.target ?? null;
  into[at + 5] = r.node;
  into[at + 6] = r.exit ?? null;
  into[at + 7] = r.bytesUp;
  into[at + 8] = r.bytesDown;
  into[at + 9] = r.startedAt;
  into[at + 10] = r.durationMs;
  into[at + 11] = r.result;
  into[at + 12] = r.reason;
  into[at + 13] = r.retries;
  into[at + 14] = r.hedges;
  into[at + 15] = r.rule ?? null;
  into[at + 16] = r.client ?? null;
  into[at + 17] = r.count ?? null;
}

/** Records removed per slice while pruning; the event loop gets a turn between slices. */
const PRUNE_SLICE = 5000;

const str = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));

function toRecord(r: Row): ConnectionRecord {
  return {
    id: String(r.id),
    user: str(r.user),
    session: str(r.session),
    listener: String(r.listener),
    target: str(r.target),
    node: str(r.node),
    bytesUp: Number(r.bytes_up),
    bytesDown: Number(r.bytes_down),
    startedAt: Number(r.started_at),
    durationMs: Number(r.duration_ms),
    result: String(r.result) as RecordResult,
    reason: str(r.reason),
    retries: Number(r.retries),
    hedges: Number(r.hedges),
    ...(r.rule === null || r.rule === undefined ? {} : { rule: String(r.rule) }),
    // Absent when unknown (exit) or not recorded (client: log.access.clients false, or written before it existed).
    ...(r.exit === null || r.exit === undefined ? {} : { exit: String(r.exit) }),
    ...(r.client === null || r.client === undefined ? {} : { client: String(r.client) }),
    ...(r.count === null || r.count === undefined ? {} : { count: Number(r.count) }),
  };
}

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** recordSize() in SQL, for the rows a DELETE removes. */
const SIZE_SQL = `${RECORD_FIXED_BYTES} + ${RECORD_TEXT_FIELDS.map((f) => `ifnull(length(CAST(${f} AS BLOB)), 0)`).join(' + ')}`;

/**
 * How many of the oldest records to remove next: those past maxRecords, else (over maxBytes) about as many
 * average records as the bytes over, at least one.
 */
function excess(held: RecordFootprint, bounds: RecordBounds): number {
  if (held.records > bounds.maxRecords) return held.records - bounds.maxRecords;
  return Math.max(1, Math.floor((held.bytes - bounds.maxBytes) / (held.bytes / held.records)));
}

/** Free pages are handed back to the file system once there are this many and they are a quarter of the file. */
const FREE_PAGES_MIN = 256;

const UNBOUNDED: RecordBounds = { maxRecords: Number.MAX_SAFE_INTEGER, maxBytes: Number.MAX_SAFE_INTEGER };

export class SqliteConnectionLog implements ConnectionLogStore {
  private readonly insert: Database.Statement;
  private readonly insertMany: Database.Statement;
  private readonly rowidOf: Database.Statement;
  /** insertMany's values, reused (filled and bound within one call). */
  private readonly manyValues: unknown[] = new Array<unknown>(COLUMNS * ROWS_PER_INSERT);
  private readonly fold: Database.Statement;
  private readonly replace: Database.Statement;
  private readonly openSize: Database.Statement;
  private readonly nthOldest: Database.Statement;
  private readonly newest: Database.Statement;
  private readonly sizeThrough: Database.Statement;
  private readonly removeThrough: Database.Statement;
  private readonly appendTx: (
    records: readonly ConnectionRecord[],
    usage: readonly UsageRollup[] | undefined,
    batchId: string | undefined,
  ) => boolean;
  private readonly marks: SqliteBatchMarks;
  private readonly bounds: RecordBounds;
  /** Rows and bytes held, exact: counted at open, then kept from every insert and delete. */
  private held: RecordFootprint;
  /** Records the current append could not store (replaceOpen). */
  private refused = 0;

  constructor(
    private readonly db: Database.Database,
    bounds: Partial<RecordBounds> = {},
    /** The store's clock: a batch's writer mark is timed by it (batch-marks.ts). */
    private readonly now: () => number = Date.now,
  ) {
    this.bounds = { ...UNBOUNDED, ...bounds };
    // OR IGNORE rather than ON CONFLICT DO NOTHING: a row the table cannot hold (a NOT NULL column without a value)
    // is skipped as a stored id is, so no statement can fail halfway, and SQLite keeps no statement journal for
    // it (with one, each 25-row INSERT spilled its journal into a temporary file: ~1.5 µs of system time per row).
    // The only unique key is (started_at, id), so what is skipped is what ON CONFLICT (started_at, id) skipped.
    this.insert = db.prepare(`INSERT OR IGNORE INTO connections (${INSERT_COLUMNS}) VALUES ${ROW_VALUES}`);
    this.insertMany = db.prepare(
      `INSERT OR IGNORE INTO connections (${INSERT_COLUMNS}) VALUES ${new Array<string>(ROWS_PER_INSERT).fill(ROW_VALUES).join(', ')}`,
    );
    // A connection's records all hold its id and start: (started_at, id) is the table's unique key (migration 60).
    this.rowidOf = db.prepare('SELECT rowid FROM connections WHERE started_at = ? AND id = ?').pluck().safeIntegers();
    // An `open` record (a checkpoint), or one settled `lost` meanwhile, is replaced by the connection's next
    // one; any other stays as written.
    this.openSize = db.prepare(
      `SELECT ${SIZE_SQL} AS size FROM connections WHERE started_at = ? AND id = ? AND result IN ('open', 'lost')`,
    );
    this.replace = db.prepare(
      `UPDATE connections SET node = @node, exit = @exit, bytes_up = @bytesUp, bytes_down = @bytesDown, duration_ms = @durationMs,
         result = @result, reason = @reason, retries = @retries, hedges = @hedges, rule = @rule WHERE started_at = @startedAt AND id = @id`,
    );
    // The oldest records go as a range of the unique (started_at, id) index up to the n-th one's key: their
    // count and bytes are read first, then one DELETE of the range. A DELETE … RETURNING their sizes kept every
    // removed row in an ephemeral table first (callgrind: 25.2 k → 17.4 k instructions per removed record).
    this.nthOldest = db.prepare('SELECT started_at, id FROM connections ORDER BY started_at, id LIMIT 1 OFFSET ?').raw();
    this.newest = db.prepare('SELECT started_at, id FROM connections ORDER BY started_at DESC, id DESC LIMIT 1').raw();
    this.sizeThrough = db.prepare(`SELECT count(*), ifnull(sum(${SIZE_SQL}), 0) FROM connections WHERE (started_at, id) <= (?, ?)`).raw();
    this.removeThrough = db.prepare('DELETE FROM connections WHERE (started_at, id) <= (?, ?)');
    const totals = db.prepare(`SELECT COUNT(*) AS n, ifnull(SUM(${SIZE_SQL}), 0) AS b FROM connections`).get() as Row;
    this.held = { records: Number(totals.n), bytes: Number(totals.b) };
    this.fold = db.prepare(
      `INSERT INTO usage_rollups (granularity, period, user, bytes_up, bytes_down, connections, failures)
       VALUES (@granularity, @period, @user, @bytesUp, @bytesDown, @connections, @failures)
       ON CONFLICT (granularity, period, user) DO UPDATE SET bytes_up = bytes_up + excluded.bytes_up,
         bytes_down = bytes_down + excluded.bytes_down, connections = connections + excluded.connections,
         failures = failures + excluded.failures`,
    );
    this.marks = new SqliteBatchMarks(db, 'connlog');
    this.appendTx = db.transaction(
      (records: readonly ConnectionRecord[], usage: readonly UsageRollup[] | undefined, batchId: string | undefined) => {
        // Written before (its first write committed, its caller saw it fail): nothing to do.
        if (batchId !== undefined && this.marks.taken(batchId, this.now())) return false;
        // Positional values: no copy of the record per row (a plain-HTTP request is a record of its own).
        const insert = this.insert;
        const values = this.manyValues;
        let i = 0;
        for (; i + ROWS_PER_INSERT <= records.length; i += ROWS_PER_INSERT) {
          for (let j = 0; j < ROWS_PER_INSERT; j++) bindRow(values, j * COLUMNS, records[i + j]!);
          // Spread, not the array: better-sqlite3 reads an array's values one v8::Object::Get (a generic property
          // lookup) each, the call's own arguments directly (callgrind, bench/connlog-append.ts: ~6 k instructions per record).
          const { changes, lastInsertRowid } = this.insertMany.run(...values);
          if (changes === ROWS_PER_INSERT) for (let j = i; j < i + ROWS_PER_INSERT; j++) this.inserted(records[j]!);
          else this.settleRun(records, i, changes, BigInt(lastInsertRowid));
        }
        for (; i < records.length; i++) {
          const r = records[i]!;
          const { changes } = insert.run(
            r.id,
            r.user,
            r.session,
            r.listener,
            r.target ?? null,
            r.node,
            r.exit ?? null,
            r.bytesUp,
            r.bytesDown,
            r.startedAt,
            r.durationMs,
            r.result,
            r.reason,
            r.retries,
            r.hedges,
            r.rule ?? null,
            r.client ?? null,
            r.count ?? null,
          );
          if (changes === 1) this.inserted(r);
          else this.replaceOpen(r);
        }
        this.makeRoom();
        for (const u of usage ?? foldRollups(records)) this.fold.run(u);
        return true;
      },
    );
  }

  private inserted(r: ConnectionRecord): void {
    this.held.records++;
    this.held.bytes += recordSize(r);
  }

  /**
   * A multi-row INSERT that skipped some rows (an id already stored: a connection's `open` checkpoint, or the
   * same id earlier in the run). Each record is settled as one row at a time would have been: the rows this
   * statement inserted got consecutive rowids ending at lastInsertRowid (a table without AUTOINCREMENT takes
   * the largest rowid + 1), so a record was inserted when its id's first occurrence in the run holds a rowid in
   * that range; every other one replaces an `open` row or stays out.
   */
  private settleRun(records: readonly ConnectionRecord[], from: number, changes: number, last: bigint): void {
    const first = last - BigInt(changes) + 1n;
    const seen = new Set<string>();
    for (let j = from; j < from + ROWS_PER_INSERT; j++) {
      const r = records[j]!;
      const key = `${r.startedAt}\u0000${r.id}`;
      const again = seen.has(key);
      seen.add(key);
      const rowid = again || changes === 0 ? undefined : (this.rowidOf.get(r.startedAt, r.id) as bigint | undefined);
      if (rowid !== undefined && rowid >= first && rowid <= last) this.inserted(r);
      else this.replaceOpen(r);
    }
  }

  /** The stored record of r's id is replaced when it is an `open` checkpoint (or was settled `lost`); any other stays as written. */
  private replaceOpen(r: ConnectionRecord): void {
    const old = this.openSize.get(r.startedAt, r.id) as Row | undefined;
    if (!old) {
      // Skipped by OR IGNORE with no record of its key stored: the table could not hold it (a NOT NULL column
      // without a value). Counted, so that the caller says so; a stored record of the key means written before.
      if (this.rowidOf.get(r.startedAt, r.id) === undefined) this.refused++;
      return;
    }
    // By name: the record's own fields, the optional ones as NULL.
    this.replace.run({ ...r, exit: r.exit ?? null, rule: r.rule ?? null });
    this.held.bytes += recordSize(r) - Number(old.size);
  }

  /** Removes the oldest records until the bounds hold (inside the append's transaction). */
  private makeRoom(): void {
    const { maxRecords, maxBytes } = this.bounds;
    while (this.held.records > maxRecords || (this.held.bytes > maxBytes && this.held.records > 0)) {
      if (this.removeOldest(excess(this.held, this.bounds)) === 0) break;
    }
  }

  /** Removes the n oldest records (all when there are fewer) and takes them off the counts; returns how many went. */
  private removeOldest(n: number): number {
    const edge = (this.nthOldest.get(n - 1) ?? this.newest.get()) as Key | undefined;
    return edge === undefined ? 0 : this.removeThroughKey(edge);
  }

  /** Removes every record at or before `last` (by started_at, id) and takes them off the counts; returns how many went. */
  private removeThroughKey(last: Key): number {
    const [records, bytes] = this.sizeThrough.get(last[0], last[1]) as [number, number];
    const removed = this.removeThrough.run(last[0], last[1]).changes;
    // Both read the same rows inside one transaction, so they agree; were they not to, the counts are taken
    // again rather than left wrong (a throw here would cost the batch its records).
    if (removed !== records) this.recount();
    else {
      this.held.records -= removed;
      this.held.bytes -= bytes;
    }
    return removed;
  }

  /**
   * Hands free pages back to the file system once they are a large share of the file (auto_vacuum=INCREMENTAL).
   * Never throws: it runs after an append committed, whose caller must not take it for failed (and write it
   * again); pages not handed back now are by a later call.
   */
  private reclaim(): void {
    try {
      const free = Number(this.db.pragma('freelist_count', { simple: true }));
      if (free < FREE_PAGES_MIN) return;
      const pages = Number(this.db.pragma('page_count', { simple: true }));
      if (free * 4 >= pages) this.db.pragma('incremental_vacuum');
    } catch {
      // SQLITE_BUSY or an I/O error: the pages stay free in the file until the next try.
    }
  }

  async append(records: readonly ConnectionRecord[], usage?: readonly UsageRollup[], batchId?: string): Promise<number> {
    if (records.length === 0 && (usage === undefined || usage.length === 0)) return 0;
    const before = this.held.records;
    this.refused = 0;
    try {
      if (!this.appendTx(records, usage, batchId)) return 0;
    } catch (err) {
      // The transaction rolled back: count again rather than trust the counts it changed.
      this.recount();
      throw err;
    }
    if (this.held.records < before + records.length) this.reclaim();
    return this.refused;
  }

  private recount(): void {
    const totals = this.db.prepare(`SELECT COUNT(*) AS n, ifnull(SUM(${SIZE_SQL}), 0) AS b FROM connections`).get() as Row;
    this.held = { records: Number(totals.n), bytes: Number(totals.b) };
  }

  async footprint(): Promise<RecordFootprint> {
    return { ...this.held };
  }

  async query(q: ConnectionQuery): Promise<ConnectionRecord[]> {
    const where: string[] = [];
    const args: unknown[] = [];
    // Each filter that is given adds its condition and its values.
    const filter = (given: boolean, condition: string, ...values: unknown[]): void => {
      if (!given) return;
      where.push(condition);
      args.push(...values);
    };
    filter(q.user !== undefined, 'user = ?', q.user);
    filter(q.result !== undefined, 'result = ?', q.result);
    // The result indexes hold failures only (migration 60); SQLite uses a partial index only when the query
    // names its condition. A filter for `ok` reads the time or user index instead.
    filter(q.result !== undefined && q.result !== 'ok', "result <> 'ok'");
    filter(q.since !== undefined, 'started_at >= ?', q.since);
    filter(q.until !== undefined, 'started_at < ?', q.until);
    if (q.after) filter(true, '(started_at < ? OR (started_at = ? AND id < ?))', q.after.startedAt, q.after.startedAt, q.after.id);
    const sql = `SELECT * FROM connections ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY started_at DESC, id DESC LIMIT ?`;
    args.push(q.limit);
    return (this.db.prepare(sql).all(...args) as Row[]).map(toRecord);
  }

  async usage(q: UsageQuery): Promise<UsageRollup[]> {
    const args: unknown[] = [q.granularity, q.from, q.to];
    let sql = 'SELECT * FROM usage_rollups WHERE granularity = ? AND period >= ? AND period < ?';
    if (q.user !== undefined) {
      sql += ' AND user = ?';
      args.push(q.user);
    }
    sql += ' ORDER BY period, user';
    return (this.db.prepare(sql).all(...args) as Row[]).map((r) => ({
      user: String(r.user),
      granularity: r.granularity as UsageRollup['granularity'],
      period: Number(r.period),
      bytesUp: Number(r.bytes_up),
      bytesDown: Number(r.bytes_down),
      connections: Number(r.connections),
      failures: Number(r.failures),
    }));
  }

  async prune(limits: RetentionLimits): Promise<number> {
    let removed = 0;
    // Oldest first, a slice at a time, up to the newest record that started before recordsBefore.
    const lastOld = this.db
      .prepare('SELECT started_at, id FROM connections WHERE started_at < ? ORDER BY started_at DESC, id DESC LIMIT 1')
      .raw()
      .get(limits.recordsBefore) as Key | undefined;
    if (lastOld) removed += await this.removeInSlices(lastOld);
    // The newest `maxRecords` stay: everything at or below the first record past them goes.
    const edge = this.db
      .prepare('SELECT started_at, id FROM connections ORDER BY started_at DESC, id DESC LIMIT 1 OFFSET ?')
      .raw()
      .get(limits.maxRecords) as Key | undefined;
    if (edge) removed += await this.removeInSlices(edge);
    this.db.prepare('DELETE FROM usage_rollups WHERE period < ?').run(limits.usageBefore);
    this.reclaim();
    return removed;
  }

  /** Removes every record up to `last` (by started_at, id), the oldest PRUNE_SLICE at a time; the event loop gets a turn between slices. */
  private async removeInSlices(last: Key): Promise<number> {
    const sliceEnd = this.db
      .prepare('SELECT started_at, id FROM connections WHERE (started_at, id) <= (?, ?) ORDER BY started_at, id LIMIT 1 OFFSET ?')
      .raw();
    const slice = this.db.transaction((through: Key) => this.removeThroughKey(through));
    let total = 0;
    for (;;) {
      const end = sliceEnd.get(last[0], last[1], PRUNE_SLICE - 1) as Key | undefined;
      total += slice(end ?? last);
      if (end === undefined) return total;
      await turn();
    }
  }

  async count(): Promise<number> {
    return Number((this.db.prepare('SELECT COUNT(*) AS n FROM connections').get() as Row).n);
  }

  /** Runs its UPDATE within the call (SQLite is synchronous): done before the caller's next line. */
  /** One daemon writes a SQLite file: every `open` record there at its start is one a previous run left. */
  settleOpen(): Promise<number> {
    // `result <> 'ok'` lets SQLite read the failures-only result index instead of the whole table.
    const changed = this.db
      .prepare(`UPDATE connections SET result = 'lost', reason = ? WHERE result = 'open' AND result <> 'ok'`)
      .run(LOST_REASON).changes;
    // The reason adds to the records' bytes.
    if (changed > 0) this.recount();
    return Promise.resolve(changed);
  }
}
