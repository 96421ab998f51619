// Filtered queries over a full connection log (issue 16: under 200 ms with 1,000,000 records). Fills the
// SQLite tables of migration 30 with `count` records spread over seven days (200 users, 90 % ok, the rest
// spread over the failure results) through the real append path, then times the queries GET
// /v1/connections makes: by user, by result, by user and result, by time window, and a page deep in a cursor.
// Used by test/connlog/query-speed.test.ts (100k rows) and `npm run bench:connlog -- --query 1000000`.
import { SqliteConnectionLog } from '../src/store/sqlite-connection-log.ts';
import { ConnectionLog } from '../src/connlog/recorder.ts';
import { ConnectionLogService } from '../src/connlog/service.ts';
import type { ConnectionRecord, RecordResult } from '../src/connlog/types.ts';
import { SqliteStore } from '../src/store/sqlite.ts';

const DAY = 86_400_000;
const FAILURES: RecordResult[] = [
  'auth_failed',
  'limited',
  'upstream_error',
  'upstream_error',
  'not_allowed',
  'client_abort',
  'bad_request',
];

export interface QueryTiming {
  name: string;
  /** The slowest of the runs (what bench:connlog reports). */
  ms: number;
  /** The fastest of the runs. */
  bestMs: number;
  items: number;
}

/** Deterministic pseudo-random numbers (the same log every run). */
function lcg(seed: number): () => number {
  let x = seed >>> 0;
  return () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    return x / 2 ** 32;
  };
}

export async function fillConnectionLog(store: SqliteStore, count: number, end = Date.now()): Promise<SqliteConnectionLog> {
  const log = new SqliteConnectionLog(store.database());
  const rnd = lcg(16);
  const start = end - 7 * DAY;
  const step = (7 * DAY) / count;
  const BATCH = 10_000;
  for (let i = 0; i < count; i += BATCH) {
    const batch: ConnectionRecord[] = [];
    for (let j = i; j < Math.min(count, i + BATCH); j++) {
      const ok = rnd() < 0.9;
      batch.push({
        id: `b${j.toString(36).padStart(6, '0')}`,
        user: `user${Math.floor(rnd() * 200)}`,
        session: rnd() < 0.3 ? `s${Math.floor(rnd() * 1000)}` : null,
        listener: rnd() < 0.5 ? 'http' : 'socks5',
        target: `host${Math.floor(rnd() * 5000)}.example.com:443`,
        node: `socks5://sub@10.0.${Math.floor(rnd() * 255)}.1:9000`,
        exit: '10.0.0.1',
        bytesUp: Math.floor(rnd() * 10_000),
        bytesDown: Math.floor(rnd() * 1_000_000),
        startedAt: Math.floor(start + j * step),
        durationMs: Math.floor(rnd() * 60_000),
        result: ok ? 'ok' : FAILURES[Math.floor(rnd() * FAILURES.length)]!,
        reason: ok ? 'closed' : 'refused',
        retries: 0,
        hedges: 0,
      });
    }
    await log.append(batch);
  }
  return log;
}

/** Each query the way the admin route runs it (service + store), timed on a warm cache; the slowest of `runs`. */
export async function timeQueries(log: SqliteConnectionLog, end: number, runs = 3): Promise<QueryTiming[]> {
  const svc = new ConnectionLogService({
    recorder: new ConnectionLog(),
    store: log,
    targets: true,
    retention: { retentionDays: 7, maxRecords: 10_000_000, usageRetentionDays: 400 },
    priceOf: () => null,
    accountOf: () => undefined,
  });
  const cases: { name: string; q: Parameters<ConnectionLogService['list']>[0] }[] = [
    { name: 'newest 100', q: { limit: 100 } },
    { name: 'user=user7, 100', q: { user: 'user7', limit: 100 } },
    { name: 'result=upstream_error, 100', q: { result: 'upstream_error', limit: 100 } },
    { name: 'result=client_abort (rare), 100', q: { result: 'client_abort', limit: 100 } },
    { name: 'user=user7 & result=limited, 100', q: { user: 'user7', result: 'limited', limit: 100 } },
    { name: 'result=ok, 100', q: { result: 'ok', limit: 100 } },
    { name: 'user=user7 & result=ok, 100', q: { user: 'user7', result: 'ok', limit: 100 } },
    { name: 'since/until one hour three days ago, 100', q: { since: end - 3 * DAY - 3_600_000, until: end - 3 * DAY, limit: 100 } },
    { name: 'user=user7 & since a day ago, 1000 (largest page)', q: { user: 'user7', since: end - DAY, limit: 1000 } },
    { name: 'user=user7 & six days ago, 100', q: { user: 'user7', until: end - 6 * DAY, limit: 100 } },
  ];
  const out: QueryTiming[] = [];
  for (const c of cases) {
    let worst = 0;
    let best = Infinity;
    let items = 0;
    for (let r = 0; r < runs; r++) {
      const t = process.hrtime.bigint();
      const page = await svc.list(c.q);
      // And the second page through the cursor.
      if (page.next) await svc.list({ ...c.q, cursor: page.next });
      const ms = Number(process.hrtime.bigint() - t) / 1e6;
      worst = Math.max(worst, ms);
      best = Math.min(best, ms);
      items = page.items.length;
    }
    out.push({ name: c.name, ms: worst, bestMs: best, items });
  }
  return out;
}
