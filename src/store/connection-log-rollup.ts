// Usage rollups: per user, per hour and per day (UTC), the bytes both ways, the connections and the failures.
// The recorder adds an open connection's bytes at each checkpoint into the period they were relayed in
// (UsageFold), and at its end the rest, with the connection counted once in the period it ended in; so an
// hour's row holds that hour's bytes, and over a window the sums equal the user meters. foldRollups is the
// whole-record fold, for records that come without the recorder's increments.
import { isFailure, type ConnectionRecord, type Granularity, type UsageRollup } from './connection-log-types.ts';

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

/** The start (epoch ms, UTC) of the hour or day holding `ms`. */
export function periodStart(ms: number, granularity: Granularity): number {
  const size = granularity === 'hour' ? HOUR_MS : DAY_MS;
  return Math.floor(ms / size) * size;
}

/** The rollup increments of one batch: one entry per (granularity, user, period). Records without a user are skipped. */
export function foldRollups(records: readonly ConnectionRecord[]): UsageRollup[] {
  const out = new Map<string, UsageRollup>();
  // A batch is mostly one user's records in one hour: the rows of the previous record are reused while the
  // user and the hour stay the same, so the map is consulted (and its keys built) once per run, not per record.
  let lastUser: string | null = null;
  let lastHour = -1;
  let hourRow: UsageRollup | undefined;
  let dayRow: UsageRollup | undefined;
  for (const r of records) {
    if (r.user === null) continue;
    const endedAt = r.startedAt + r.durationMs;
    const hour = periodStart(endedAt, 'hour');
    if (r.user !== lastUser || hour !== lastHour || hourRow === undefined || dayRow === undefined) {
      hourRow = rowFor(out, r.user, 'hour', hour);
      dayRow = rowFor(out, r.user, 'day', periodStart(endedAt, 'day'));
      lastUser = r.user;
      lastHour = hour;
    }
    add(hourRow, r);
    add(dayRow, r);
  }
  return [...out.values()];
}

function rowFor(out: Map<string, UsageRollup>, user: string, granularity: Granularity, period: number): UsageRollup {
  const key = `${granularity}\u0000${user}\u0000${period}`;
  let row = out.get(key);
  if (!row) {
    row = { user, granularity, period, bytesUp: 0, bytesDown: 0, connections: 0, failures: 0 };
    out.set(key, row);
  }
  return row;
}

function add(row: UsageRollup, r: ConnectionRecord): void {
  row.bytesUp += r.bytesUp;
  row.bytesDown += r.bytesDown;
  row.connections += 1;
  if (isFailure(r.result)) row.failures += 1;
}

/**
 * Rollup increments collected between two writes: one hour row and one day row per user and period, so what
 * waits for the store is bounded by the users active in the interval, not by their connections.
 */
export class UsageFold {
  private rows = new Map<string, UsageRollup>();
  // The last user's rows while its hour lasts: connections end mostly in runs of one user, so their keys are
  // built and looked up once per run, not twice per connection (this runs once per record).
  private lastUser: string | null = null;
  private lastHour = -1;
  private hourRow: UsageRollup | undefined;
  private dayRow: UsageRollup | undefined;

  /** Adds bytes (and, at a connection's end, the connection and whether it failed) relayed at `at`. */
  add(user: string, at: number, up: number, down: number, connections: number, failures: number): void {
    const hour = periodStart(at, 'hour');
    let hourRow = this.hourRow;
    let dayRow = this.dayRow;
    if (user !== this.lastUser || hour !== this.lastHour || hourRow === undefined || dayRow === undefined) {
      hourRow = this.hourRow = rowFor(this.rows, user, 'hour', hour);
      dayRow = this.dayRow = rowFor(this.rows, user, 'day', periodStart(at, 'day'));
      this.lastUser = user;
      this.lastHour = hour;
    }
    hourRow.bytesUp += up;
    hourRow.bytesDown += down;
    hourRow.connections += connections;
    hourRow.failures += failures;
    dayRow.bytesUp += up;
    dayRow.bytesDown += down;
    dayRow.connections += connections;
    dayRow.failures += failures;
  }

  get size(): number {
    return this.rows.size;
  }

  /** The increments so far (at most `max` rows: the rest stay for the next take); the fold starts empty again. */
  take(max = Infinity): UsageRollup[] {
    this.lastUser = null;
    this.hourRow = this.dayRow = undefined;
    if (this.rows.size <= max) {
      const out = [...this.rows.values()];
      this.rows = new Map();
      return out;
    }
    const out: UsageRollup[] = [];
    for (const [key, row] of this.rows) {
      if (out.length >= max) break;
      out.push(row);
      this.rows.delete(key);
    }
    return out;
  }
}
