// Numbered schema migrations. Each runs once, in its own transaction, and is recorded in `migrations`;
// never edit a published one — add the next number.
import { EVENTS_MIGRATION_SQL } from './sqlite-events.ts';

export interface Migration {
  id: number;
  name: string;
  sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    id: 1,
    name: 'orders, instances, journal, callbacks, usage, kv',
    sql: `
      CREATE TABLE orders (
        app_order_no TEXT PRIMARY KEY NOT NULL,
        order_no     TEXT UNIQUE,
        type         INTEGER NOT NULL,
        status       INTEGER NOT NULL,
        amount       TEXT,
        count        INTEGER,
        request      TEXT NOT NULL,
        created_at   INTEGER NOT NULL,
        updated_at   INTEGER NOT NULL
      );
      CREATE INDEX orders_status ON orders (status);

      CREATE TABLE instances (
        instance_no  TEXT PRIMARY KEY NOT NULL,
        order_no     TEXT,
        product_no   TEXT,
        status       INTEGER,
        ip           TEXT,
        port         INTEGER,
        username     TEXT,
        pwd          TEXT,
        protocol     TEXT,
        user_expired INTEGER,
        raw          TEXT NOT NULL,
        updated_at   INTEGER NOT NULL
      );
      CREATE INDEX instances_order ON instances (order_no);
      CREATE INDEX instances_expiry ON instances (user_expired);

      CREATE TABLE journal (
        merchant_no  TEXT PRIMARY KEY NOT NULL,
        operation    TEXT NOT NULL,
        request      TEXT NOT NULL,
        req_id       TEXT NOT NULL,
        state        TEXT NOT NULL CHECK (state IN ('intent', 'sent', 'accepted', 'rejected', 'unknown')),
        result       TEXT,
        order_no     TEXT,
        attempts     INTEGER NOT NULL DEFAULT 0,
        created_at   INTEGER NOT NULL,
        updated_at   INTEGER NOT NULL
      );
      CREATE INDEX journal_state ON journal (state);

      CREATE TABLE callbacks (
        type         TEXT NOT NULL,
        no           TEXT NOT NULL,
        op           TEXT NOT NULL,
        received_at  INTEGER NOT NULL,
        count        INTEGER NOT NULL DEFAULT 1,
        processed    INTEGER NOT NULL DEFAULT 0,
        UNIQUE (type, no, op)
      );

      CREATE TABLE usage (
        user         TEXT PRIMARY KEY NOT NULL,
        used_bytes   INTEGER NOT NULL DEFAULT 0,
        limit_bytes  INTEGER NOT NULL DEFAULT -1,
        updated_at   INTEGER NOT NULL
      );

      CREATE TABLE kv (
        key          TEXT PRIMARY KEY NOT NULL,
        value        TEXT NOT NULL
      );
    `,
  },
  {
    // Number 10 was handed to issue 15 (users as data) so parallel branches do not clash.
    id: 10,
    name: 'users as data: records, tombstones for followers',
    sql: `
      CREATE TABLE users (
        name          TEXT PRIMARY KEY NOT NULL,
        data          TEXT NOT NULL,
        password_hash TEXT NOT NULL,
        state         TEXT NOT NULL CHECK (state IN ('creating', 'ready')),
        version       INTEGER NOT NULL,
        updated_at    INTEGER NOT NULL
      );
      CREATE INDEX users_version ON users (version);
      CREATE TABLE user_tombstones (
        name          TEXT PRIMARY KEY NOT NULL,
        version       INTEGER NOT NULL
      );
      CREATE TABLE user_version (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL);
      INSERT INTO user_version (id, version) VALUES (1, 0);
    `,
  },
  { id: 20, name: 'event outbox and once-only markers', sql: EVENTS_MIGRATION_SQL },
  {
    // Issue 16: the connection log (one row per accepted connection) and the usage rollups folded from it.
    // Queries read newest first, by user, result or both, so each index ends in (started_at, id).
    id: 30,
    name: 'connection log and usage rollups',
    sql: `
      CREATE TABLE connections (
        id           TEXT PRIMARY KEY NOT NULL,
        user         TEXT,
        session      TEXT,
        listener     TEXT NOT NULL,
        target       TEXT,
        node         TEXT,
        exit         TEXT,
        bytes_up     INTEGER NOT NULL,
        bytes_down   INTEGER NOT NULL,
        started_at   INTEGER NOT NULL,
        duration_ms  INTEGER NOT NULL,
        result       TEXT NOT NULL,
        reason       TEXT,
        retries      INTEGER NOT NULL DEFAULT 0,
        hedges       INTEGER NOT NULL DEFAULT 0
      );
      CREATE INDEX connections_started ON connections (started_at, id);
      CREATE INDEX connections_user ON connections (user, started_at, id);
      CREATE INDEX connections_result ON connections (result, started_at, id);
      CREATE INDEX connections_user_result ON connections (user, result, started_at, id);

      CREATE TABLE usage_rollups (
        granularity  TEXT NOT NULL CHECK (granularity IN ('hour', 'day')),
        period       INTEGER NOT NULL,
        user         TEXT NOT NULL,
        bytes_up     INTEGER NOT NULL DEFAULT 0,
        bytes_down   INTEGER NOT NULL DEFAULT 0,
        connections  INTEGER NOT NULL DEFAULT 0,
        failures     INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (granularity, period, user)
      ) WITHOUT ROWID;
    `,
  },
  {
    // Request rules: the rule that fired on a connection (src/proxy/request-rules.ts); null when none did.
    id: 48,
    name: 'connection records: the request rule that fired',
    sql: 'ALTER TABLE connections ADD COLUMN rule TEXT;',
  },
  {
    // The client's source address (abuse reports); null when log.access.clients is false.
    id: 50,
    name: 'connection records: the client address',
    sql: 'ALTER TABLE connections ADD COLUMN client TEXT;',
  },
  {
    // Refusals before authentication are one record per source address, listener and result per window with a
    // count (src/connlog/refusals.ts); null on every other record (one connection).
    id: 55,
    name: 'connection records: how many refused connections a record stands for',
    sql: 'ALTER TABLE connections ADD COLUMN count INTEGER;',
  },
  {
    // Fewer b-trees per connection record (a record is written per accepted connection, on the daemon's data
    // path): the id is no PRIMARY KEY of its own (an extra index); a connection is found by (started_at, id),
    // which its records all share, and the index on it, already there for the newest-first order, becomes
    // UNIQUE. The indexes that lead with the result hold failures only (most records are `ok`, and a filter for
    // `ok` reads the time or user index and skips the few others). The table is rebuilt (SQLite drops no
    // PRIMARY KEY in place); rowids are kept.
    id: 60,
    name: 'connection records: unique by (started_at, id), result indexes for failures only',
    sql: `
      CREATE TABLE connections_60 (
        id           TEXT NOT NULL,
        user         TEXT,
        session      TEXT,
        listener     TEXT NOT NULL,
        target       TEXT,
        node         TEXT,
        exit         TEXT,
        bytes_up     INTEGER NOT NULL,
        bytes_down   INTEGER NOT NULL,
        started_at   INTEGER NOT NULL,
        duration_ms  INTEGER NOT NULL,
        result       TEXT NOT NULL,
        reason       TEXT,
        retries      INTEGER NOT NULL DEFAULT 0,
        hedges       INTEGER NOT NULL DEFAULT 0,
        rule         TEXT,
        client       TEXT,
        count        INTEGER
      );
      INSERT INTO connections_60 (rowid, id, user, session, listener, target, node, exit, bytes_up, bytes_down, started_at,
          duration_ms, result, reason, retries, hedges, rule, client, count)
        SELECT rowid, id, user, session, listener, target, node, exit, bytes_up, bytes_down, started_at,
          duration_ms, result, reason, retries, hedges, rule, client, count FROM connections ORDER BY rowid;
      DROP TABLE connections;
      ALTER TABLE connections_60 RENAME TO connections;
      CREATE UNIQUE INDEX connections_started ON connections (started_at, id);
      CREATE INDEX connections_user ON connections (user, started_at, id);
      CREATE INDEX connections_result ON connections (result, started_at, id) WHERE result <> 'ok';
      CREATE INDEX connections_user_result ON connections (user, result, started_at, id) WHERE result <> 'ok';
    `,
  },
  {
    // The connection log's batches written lately, by the writer's id (ConnectionLogStore.append's batchId): a
    // batch written again after its caller saw the first write fail changes nothing (its rollup increments are
    // added once). Rows older than BATCH_ID_TTL_MS go in each append's transaction.
    id: 70,
    name: 'connection log: ids of the batches written lately',
    sql: `
      CREATE TABLE connlog_batches (
        id  TEXT PRIMARY KEY NOT NULL,
        at  INTEGER NOT NULL
      ) WITHOUT ROWID;
      CREATE INDEX connlog_batches_at ON connlog_batches (at);
    `,
  },
  {
    // The quota meters' flushes written lately, by the writer's id (UsageStore.addUsage's batchId): a flush
    // written again after its caller saw the first write fail adds nothing. Rows older than USAGE_BATCH_TTL_MS
    // go in each addUsage's transaction.
    id: 71,
    name: 'usage: ids of the meter flushes written lately',
    sql: `
      CREATE TABLE usage_batches (
        id  TEXT PRIMARY KEY NOT NULL,
        at  INTEGER NOT NULL
      ) WITHOUT ROWID;
      CREATE INDEX usage_batches_at ON usage_batches (at);
    `,
  },
  {
    // A writer's batches (meter flushes, connection-log units) by one mark per writer instead of one row per batch:
    // the highest sequence number taken (src/store/batch-marks.ts). Kept BATCH_WRITER_TTL_MS after the writer's last
    // write, so a batch written again after an outage of any length short of that is recognised; the ids of
    // migrations 70 and 71 lived an hour. Their tables go: a batch's id only matters to the process that made it.
    id: 72,
    name: 'meter flushes and connection-log units: one mark per writer',
    sql: `
      CREATE TABLE batch_writers (
        kind    TEXT NOT NULL,
        writer  TEXT NOT NULL,
        seq     INTEGER NOT NULL,
        at      INTEGER NOT NULL,
        PRIMARY KEY (kind, writer)
      ) WITHOUT ROWID;
      CREATE INDEX batch_writers_at ON batch_writers (at);
      DROP TABLE usage_batches;
      DROP TABLE connlog_batches;
    `,
  },
];
