// The event outbox on SQLite (see events.ts): tables `events` and `event_markers` (migration 20).
import type Database from 'better-sqlite3';
import type { EventRecord, EventSettlement, NewEvent } from './events.ts';

type Row = Record<string, unknown>;

function toEvent(r: Row): EventRecord {
  return {
    id: Number(r.id),
    type: String(r.type),
    time: Number(r.time),
    data: JSON.parse(String(r.data)) as unknown,
    attempts: Number(r.attempts),
    deliveredAt: r.delivered_at === null ? null : Number(r.delivered_at),
    nextAttemptAt: r.next_attempt_at === null ? null : Number(r.next_attempt_at),
    lastError: r.last_error === null ? null : String(r.last_error),
  };
}

export function appendEvent(db: Database.Database, e: NewEvent): EventRecord | undefined {
  return db.transaction((): EventRecord | undefined => {
    if (e.marker !== undefined) {
      const taken = db
        .prepare('INSERT INTO event_markers (key, expires_at) VALUES (?, ?) ON CONFLICT (key) DO NOTHING')
        .run(e.marker, e.markerExpiresAt ?? null);
      if (taken.changes === 0) return undefined;
    }
    const row = db
      .prepare(
        'INSERT INTO events (type, time, data, attempts, delivered_at, next_attempt_at, last_error) VALUES (?, ?, ?, 0, NULL, ?, NULL) RETURNING *',
      )
      .get(e.type, e.time, JSON.stringify(e.data ?? null), e.deliver === false ? null : e.time) as Row;
    return toEvent(row);
  })();
}

export function listEvents(db: Database.Database, filter: { since?: number; limit?: number } = {}): EventRecord[] {
  return (db.prepare('SELECT * FROM events WHERE id > ? ORDER BY id LIMIT ?').all(filter.since ?? 0, filter.limit ?? 100) as Row[]).map(
    toEvent,
  );
}

export function claimEvents(db: Database.Database, now: number, leaseMs: number, limit: number): EventRecord[] {
  const rows = db
    .prepare(
      `UPDATE events SET next_attempt_at = @until WHERE id IN (
         SELECT id FROM events WHERE delivered_at IS NULL AND next_attempt_at IS NOT NULL AND next_attempt_at <= @now ORDER BY id LIMIT @limit)
       RETURNING *`,
    )
    .all({ now, until: now + leaseMs, limit }) as Row[];
  return rows.map(toEvent).sort((a, b) => a.id - b.id);
}

export function settleEvent(db: Database.Database, id: number, outcome: EventSettlement): void {
  if ('deliveredAt' in outcome) {
    db.prepare('UPDATE events SET attempts = attempts + 1, delivered_at = ?, next_attempt_at = NULL, last_error = NULL WHERE id = ?').run(
      outcome.deliveredAt,
      id,
    );
  } else {
    db.prepare('UPDATE events SET attempts = attempts + 1, next_attempt_at = ?, last_error = ? WHERE id = ? AND delivered_at IS NULL').run(
      outcome.nextAttemptAt,
      outcome.error.slice(0, 500),
      id,
    );
  }
}

export function clearMarker(db: Database.Database, marker: string): void {
  db.prepare('DELETE FROM event_markers WHERE key = ?').run(marker);
}

export function pruneEvents(db: Database.Database, options: { deliveredBefore: number; now: number }): number {
  return db.transaction(() => {
    const dropped = db
      .prepare(
        'DELETE FROM events WHERE (delivered_at IS NOT NULL AND delivered_at < @before) OR (delivered_at IS NULL AND next_attempt_at IS NULL AND time < @before)',
      )
      .run({ before: options.deliveredBefore }).changes;
    db.prepare('DELETE FROM event_markers WHERE expires_at IS NOT NULL AND expires_at < ?').run(options.now);
    return dropped;
  })();
}

/** Migration 20's SQL (listed in migrations.ts). */
export const EVENTS_MIGRATION_SQL = `
  CREATE TABLE events (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    type            TEXT NOT NULL,
    time            INTEGER NOT NULL,
    data            TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    delivered_at    INTEGER,
    next_attempt_at INTEGER,
    last_error      TEXT
  );
  CREATE INDEX events_due ON events (next_attempt_at) WHERE delivered_at IS NULL;
  CREATE TABLE event_markers (
    key        TEXT PRIMARY KEY NOT NULL,
    expires_at INTEGER
  );
`;
