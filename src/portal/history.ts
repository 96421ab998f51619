// The usage rows a customer of a name made again sees (src/users/record.ts UserData.incarnation). The rollups are
// per name, so a row of a period that began before the new customer's creation holds the deleted customer's bytes:
// a period that ended before it is the deleted customer's alone (left out); the period holding the creation is
// shown with the deleted customer's part taken out. That part is folded from the deleted customer's records that
// started before the creation and ended in that period: a connection that started in the period has all its bytes
// in that period's row (its checkpoints and its end all fall in it). One that started before the period has part of
// its bytes in an earlier row, split at checkpoints the record does not tell: then the part cannot be told and the
// row is left out, rather than shown with another customer's bytes or without some of the new customer's. So is it
// when the records of the period may be gone (older than the log's retention), past MAX_PAGES pages, or when the
// read fails. Those records no longer change once the recorder's last writes are in: the part is kept per (name,
// creation, period), a bounded table.
import { LRUCache } from 'lru-cache';
import type { ConnectionListQuery } from '../connlog/service.ts';
import { isFailure, type ConnectionRecord, type Granularity } from '../connlog/types.ts';
import type { UsageRow } from '../connlog/usage.ts';

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;
/** The longest look back for a deleted customer's connections when the records are kept longer (or for ever). */
const LOOKBACK_MAX_MS = 31 * DAY_MS;
const PAGE = 200;
const MAX_PAGES = 25;
/** After this long since the creation the deleted customer's records are all written (its connections ended at its delete). */
const SETTLED_MS = 60_000;

interface Part {
  up: number;
  down: number;
  connections: number;
  failures: number;
}
const UNKNOWN: Part = { up: -1, down: -1, connections: -1, failures: -1 };
/** A read that failed (the store): UNKNOWN to the caller, kept FAILED_KEPT_MS so a polling customer does not retry it at once. */
const FAILED: Part = { up: -1, down: -1, connections: -1, failures: -1 };
const FAILED_KEPT_MS = 5000;

export type ListRecords = (q: ConnectionListQuery) => Promise<{ items: ConnectionRecord[]; next: string | null }>;

export class HistorySplit {
  private readonly parts = new LRUCache<string, Part>({ max: 1000 });
  /** How far before a period its connections are looked for: the records' retention, at most LOOKBACK_MAX_MS. */
  private readonly lookbackMs: number;

  constructor(
    private readonly list: ListRecords,
    private readonly now: () => number = Date.now,
    /** How long records are kept (log.access.retentionDays): a period older than that may have lost its records. */
    private readonly retentionMs = Infinity,
  ) {
    this.lookbackMs = Math.min(retentionMs, LOOKBACK_MAX_MS);
  }

  /** `rows` (one name's, oldest or newest first) as the customer made at `since` sees them; since 0: all of them. */
  async own(user: string, since: number, granularity: Granularity, rows: readonly UsageRow[]): Promise<UsageRow[]> {
    if (since === 0) return [...rows];
    const size = granularity === 'hour' ? HOUR_MS : DAY_MS;
    const out: UsageRow[] = [];
    for (const r of rows) {
      const start = Date.parse(r.period);
      if (start >= since) out.push(r);
      else if (start + size > since) {
        const old = await this.before(user, since, start, size);
        if (old === UNKNOWN) continue;
        const up = Math.max(0, r.bytesUp - old.up);
        const down = Math.max(0, r.bytesDown - old.down);
        const connections = Math.max(0, r.connections - old.connections);
        // Nothing of this customer's in it: no row, as for a period without traffic.
        if (up + down === 0 && connections === 0) continue;
        const all = r.bytesUp + r.bytesDown;
        out.push({
          ...r,
          bytesUp: up,
          bytesDown: down,
          connections,
          failures: Math.max(0, r.failures - old.failures),
          amount: r.amount === null || all === 0 ? r.amount : (r.amount * (up + down)) / all,
        });
      }
    }
    return out;
  }

  /** The deleted customer's part of the period [start, start + size) (UNKNOWN: could not be told). */
  private async before(user: string, since: number, start: number, size: number): Promise<Part> {
    const key = `${user}\u0000${since}\u0000${start}\u0000${size}`;
    const kept = this.parts.get(key);
    if (kept !== undefined) return kept;
    if (this.now() - start >= this.retentionMs) return UNKNOWN;
    const part = await this.read(user, since, start, size);
    // Settled (the deleted customer's records are all written), an answer is kept, UNKNOWN too: a period past
    // MAX_PAGES is not read again at every request. A failed read is kept for a few seconds only.
    if (part === FAILED) this.parts.set(key, UNKNOWN, { ttl: FAILED_KEPT_MS });
    else if (this.now() - since >= SETTLED_MS) this.parts.set(key, part);
    return part === FAILED ? UNKNOWN : part;
  }

  private async read(user: string, since: number, start: number, size: number): Promise<Part> {
    const part: Part = { up: 0, down: 0, connections: 0, failures: 0 };
    let cursor: string | undefined;
    try {
      for (let page = 0; ; page++) {
        if (page === MAX_PAGES) return UNKNOWN;
        // A connection that ended in the period began at most the records' retention before it (a websocket may
        // run for days): one begun earlier than the period makes the part unknown, however long before.
        const r = await this.list({
          user,
          since: start - this.lookbackMs,
          until: since,
          limit: PAGE,
          ...(cursor !== undefined ? { cursor } : {}),
        });
        for (const c of r.items) {
          const end = c.startedAt + c.durationMs;
          if (c.user !== user || end < start || end >= start + size) continue;
          // Begun in an earlier period: some of its bytes are in an earlier row, how many the record does not say.
          if (c.startedAt < start) return UNKNOWN;
          part.up += c.bytesUp;
          part.down += c.bytesDown;
          part.connections += 1;
          if (isFailure(c.result)) part.failures += 1;
        }
        if (r.next === null) break;
        cursor = r.next;
      }
    } catch {
      return FAILED;
    }
    return part;
  }
}
