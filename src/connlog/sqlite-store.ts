// The connection log in the daemon's SQLite file (tables of migration 30). A batch of records and its
// rollup increments are one transaction, so a crash keeps both or neither. Retention deletes in slices
// (better-sqlite3 is synchronous: one huge DELETE would hold the event loop, and with it the data path).
import type Database from 'better-sqlite3';
import { foldRollups } from './rollup.ts';
import type {
  ConnectionLogStore,
  ConnectionQuery,
  ConnectionRecord,
  RecordResult,
  RetentionLimits,
  UsageQuery,
  UsageRollup,
} from './types.ts';

type Row = Record<string, unknown>;

/** Rows deleted per statement while pruning; the event loop gets a turn between slices. */
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
  };
}

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export class SqliteConnectionLog implements ConnectionLogStore {
  private readonly insert: Database.Statement;
  private readonly fold: Database.Statement;
  private readonly appendTx: (records: readonly ConnectionRecord[], usage: readonly UsageRollup[] | undefined) => void;

  constructor(private readonly db: Database.Database) {
    this.insert = db.prepare(
      // An `open` record (a checkpoint) is replaced by the connection's next one; any other stays as written.
      `INSERT INTO connections (id, user, session, listener, target, node, exit, bytes_up, bytes_down, started_at, duration_ms, result, reason, retries, hedges, rule, client)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET node = excluded.node, exit = excluded.exit, bytes_up = excluded.bytes_up,
         bytes_down = excluded.bytes_down, duration_ms = excluded.duration_ms, result = excluded.result,
         reason = excluded.reason, retries = excluded.retries, hedges = excluded.hedges, rule = excluded.rule
       WHERE connections.result = 'open'`,
    );
    this.fold = db.prepare(
      `INSERT INTO usage_rollups (granularity, period, user, bytes_up, bytes_down, connections, failures)
       VALUES (@granularity, @period, @user, @bytesUp, @bytesDown, @connections, @failures)
       ON CONFLICT (granularity, period, user) DO UPDATE SET bytes_up = bytes_up + excluded.bytes_up,
         bytes_down = bytes_down + excluded.bytes_down, connections = connections + excluded.connections,
         failures = failures + excluded.failures`,
    );
    this.appendTx = db.transaction((records: readonly ConnectionRecord[], usage: readonly UsageRollup[] | undefined) => {
      // Positional values: no copy of the record per row (a plain-HTTP request is a record of its own).
      const insert = this.insert;
      for (const r of records) {
        insert.run(
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
        );
      }
      for (const u of usage ?? foldRollups(records)) this.fold.run(u);
    });
  }

  async append(records: readonly ConnectionRecord[], usage?: readonly UsageRollup[]): Promise<void> {
    if (records.length > 0 || (usage !== undefined && usage.length > 0)) this.appendTx(records, usage);
  }

  async query(q: ConnectionQuery): Promise<ConnectionRecord[]> {
    const where: string[] = [];
    const args: unknown[] = [];
    if (q.user !== undefined) {
      where.push('user = ?');
      args.push(q.user);
    }
    if (q.result !== undefined) {
      where.push('result = ?');
      args.push(q.result);
    }
    if (q.since !== undefined) {
      where.push('started_at >= ?');
      args.push(q.since);
    }
    if (q.until !== undefined) {
      where.push('started_at < ?');
      args.push(q.until);
    }
    if (q.after) {
      where.push('(started_at < ? OR (started_at = ? AND id < ?))');
      args.push(q.after.startedAt, q.after.startedAt, q.after.id);
    }
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
    removed += await this.deleteInSlices(
      'DELETE FROM connections WHERE rowid IN (SELECT rowid FROM connections WHERE started_at < ? LIMIT ?)',
      [limits.recordsBefore],
    );
    // The newest `maxRecords` stay: everything at or below the first record past them goes.
    const edge = this.db
      .prepare('SELECT started_at, id FROM connections ORDER BY started_at DESC, id DESC LIMIT 1 OFFSET ?')
      .get(limits.maxRecords) as Row | undefined;
    if (edge) {
      removed += await this.deleteInSlices(
        'DELETE FROM connections WHERE rowid IN (SELECT rowid FROM connections WHERE started_at < ? OR (started_at = ? AND id <= ?) LIMIT ?)',
        [edge.started_at, edge.started_at, edge.id],
      );
    }
    this.db.prepare('DELETE FROM usage_rollups WHERE period < ?').run(limits.usageBefore);
    return removed;
  }

  private async deleteInSlices(sql: string, args: unknown[]): Promise<number> {
    const stmt = this.db.prepare(sql);
    let total = 0;
    for (;;) {
      const { changes } = stmt.run(...args, PRUNE_SLICE);
      total += changes;
      if (changes < PRUNE_SLICE) return total;
      await turn();
    }
  }

  async count(): Promise<number> {
    return Number((this.db.prepare('SELECT COUNT(*) AS n FROM connections').get() as Row).n);
  }
}
