// The connection log's store side on the test store (SQLite, or Redis with ROTOR_TEST_STORE=redis): filters
// and cursor paging, retention by age and by count, rollups; the recorder's bounded queue (drop-oldest,
// counted, never blocking), batches and injected ids; `targets: false`; the JSON-lines file and its rotation.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ConnectionLog,
  ConnectionLogService,
  JsonLinesFileSink,
  connectionLogStoreFor,
  type ConnectionLogStore,
  type ConnectionRecord,
} from '../../src/connlog/index.ts';
import type { Store } from '../../src/store/index.ts';
import { createMetrics } from '../../src/telemetry/metrics.ts';
import { captureLogger } from '../support/logger.ts';
import { openTestStore } from '../support/store.ts';
import { metricValue } from '../e2e/harness.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const T0 = Date.UTC(2026, 0, 10, 12, 0, 0);

function record(i: number, over: Partial<ConnectionRecord> = {}): ConnectionRecord {
  return {
    id: `r${String(i).padStart(6, '0')}`,
    user: i % 3 === 0 ? 'ann' : 'ben',
    session: null,
    listener: i % 2 ? 'http' : 'socks5',
    target: `example.com:${443}`,
    node: 'socks5://sub@127.0.0.1:9000',
    exit: '127.0.0.1',
    bytesUp: 10,
    bytesDown: 100,
    startedAt: T0 + i * 1000,
    durationMs: 500,
    result: i % 5 === 0 ? 'upstream_error' : 'ok',
    reason: null,
    retries: 0,
    hedges: 0,
    ...over,
  };
}

function service(
  log: ConnectionLogStore,
  options: { targets?: boolean; maxRecords?: number; now?: () => number } = {},
): ConnectionLogService {
  return new ConnectionLogService({
    recorder: new ConnectionLog({ store: log }),
    store: log,
    targets: options.targets ?? true,
    retention: { retentionDays: 7, maxRecords: options.maxRecords ?? 1_000_000, usageRetentionDays: 30 },
    priceOf: () => null,
    accountOf: () => undefined,
    ...(options.now ? { now: options.now } : {}),
  });
}

describe('connection log store', () => {
  let store: Store;
  let log: ConnectionLogStore;

  before(async () => {
    store = await openTestStore();
    log = connectionLogStoreFor(store);
  });
  after(async () => {
    await store?.close();
  });

  test('filters, newest first, and a cursor that walks every record once', async () => {
    await log.append(Array.from({ length: 50 }, (_, i) => record(i)));
    // The same startedAt for two records: the id breaks the tie, and paging still sees both.
    await log.append([record(100, { startedAt: T0 + 20_000 }), record(101, { startedAt: T0 + 20_000 })]);
    const svc = service(log);
    const ann = await svc.list({ user: 'ann', limit: 1000 });
    assert.equal(ann.items.length, 17);
    assert.ok(ann.items.every((r) => r.user === 'ann'));
    assert.equal(ann.next, null);
    const failed = await svc.list({ result: 'upstream_error', since: T0 + 10_000, until: T0 + 40_000, limit: 1000 });
    assert.deepEqual(
      failed.items.map((r) => r.id),
      // r000100 started with r000020: the larger id comes first among equals.
      ['r000035', 'r000030', 'r000025', 'r000100', 'r000020', 'r000015', 'r000010'],
    );
    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = await svc.list({ limit: 7, ...(cursor ? { cursor } : {}) });
      seen.push(...page.items.map((r) => r.id));
      if (!page.next) break;
      cursor = page.next;
    }
    assert.equal(seen.length, 52);
    assert.equal(new Set(seen).size, 52);
    assert.equal(seen[0], 'r000049');
    const all = (await svc.list({ limit: 1000 })).items.map((r) => r.id);
    assert.deepEqual(seen, all);
    await assert.rejects(svc.list({ limit: 5, cursor: 'bm90LWEtY3Vyc29y' }), /cursor/);
    await svc.close();
  });

  test('rollups fold hours and days, by the hour each connection ended in', async () => {
    const rows = await log.usage({ granularity: 'hour', from: T0 - DAY, to: T0 + DAY });
    const ann = rows.filter((r) => r.user === 'ann');
    assert.equal(
      ann.reduce((n, r) => n + r.connections, 0),
      17,
    );
    assert.equal(
      ann.reduce((n, r) => n + r.bytesUp + r.bytesDown, 0),
      17 * 110,
    );
    // 12:00:00 + up to 101 s + 0.5 s: all in the 12:00 hour and the same day.
    assert.deepEqual(
      rows.map((r) => [r.user, r.period]),
      [
        ['ann', T0],
        ['ben', T0],
      ],
    );
    const days = await log.usage({ granularity: 'day', from: T0 - DAY, to: T0 + DAY });
    assert.deepEqual(
      days.map((r) => [r.user, r.period, r.connections]),
      [
        ['ann', Date.UTC(2026, 0, 10), 17],
        ['ben', Date.UTC(2026, 0, 10), 35],
      ],
    );
    assert.equal(
      days.reduce((n, r) => n + r.failures, 0),
      11,
    );
  });

  test('targets: false answers records without a target', async () => {
    const svc = service(log, { targets: false });
    const page = await svc.list({ limit: 3 });
    assert.ok(page.items.every((r) => !('target' in r)));
    await svc.close();
  });

  test('client and exit: stored and read back as written; absent stays absent (no null exit, no client)', async () => {
    const withBoth = record(200, { startedAt: T0 - 5000, client: '127.0.0.42', exit: '127.0.0.3' });
    const { exit: _exit, ...noExit } = record(201, { startedAt: T0 - 4000 });
    await log.append([withBoth, noExit]);
    const got = await log.query({ since: T0 - 5000, until: T0 - 3000, limit: 10 });
    assert.deepEqual(
      got.map((r) => ({ id: r.id, client: r.client, exit: r.exit, hasExit: 'exit' in r, hasClient: 'client' in r })),
      [
        { id: 'r000201', client: undefined, exit: undefined, hasExit: false, hasClient: false },
        { id: 'r000200', client: '127.0.0.42', exit: '127.0.0.3', hasExit: true, hasClient: true },
      ],
    );
  });

  test('retention: by age, then by count (the newest stay), rollups by their own age', async () => {
    const fresh = await openTestStore();
    const l = connectionLogStoreFor(fresh);
    const now = T0 + 30 * DAY;
    // 40 records ten days old, 60 records of today.
    await l.append(Array.from({ length: 40 }, (_, i) => record(i, { startedAt: now - 10 * DAY + i })));
    await l.append(Array.from({ length: 60 }, (_, i) => record(1000 + i, { startedAt: now - HOUR + i })));
    const svc = service(l, { maxRecords: 25, now: () => now });
    const removed = await svc.prune();
    assert.equal(removed, 75);
    assert.equal(await l.count(), 25);
    const kept = (await svc.list({ limit: 100 })).items;
    assert.equal(kept[0]!.id, 'r001059');
    assert.equal(kept[24]!.id, 'r001035');
    // Rollup rows older than usageRetentionDays (30) go: the ones of T0 + 20 days stay.
    assert.ok((await l.usage({ granularity: 'day', from: 0, to: now + DAY })).length > 0);
    await svc.close();
    await fresh.close();
  });
});

/** A store that only appends, through `append`; everything else answers empty. */
function storeAppending(append: ConnectionLogStore['append']): ConnectionLogStore {
  return {
    append,
    query: async () => [],
    usage: async () => [],
    prune: async () => 0,
    count: async () => 0,
    footprint: async () => ({ records: 0, bytes: 0 }),
    settleOpen: async () => 0,
  };
}

describe('the recorder', () => {
  test('ids from the injected source; contexts become records in batches; the live list', async () => {
    const written: ConnectionRecord[][] = [];
    const sink = storeAppending(async (b) => (written.push([...b]), 0));
    let n = 0;
    const rec = new ConnectionLog({ store: sink, ids: () => `id${++n}`, batchSize: 3, flushIntervalMs: 60_000 });
    const a = rec.open('socks5');
    const b = rec.open('http');
    assert.deepEqual([a.id, b.id], ['id1', 'id2']);
    a.user = 'ann';
    a.bytes = { up: 5, down: 7 };
    assert.deepEqual(
      rec.active().map((c) => [c.id, c.user, c.bytesUp, c.bytesDown]),
      [
        ['id1', 'ann', 5, 7],
        ['id2', null, 0, 0],
      ],
    );
    // One user's (the portal's list), at most `max`.
    assert.deepEqual(
      rec.active('ann').map((c) => c.id),
      ['id1'],
    );
    assert.deepEqual(rec.active('ben'), []);
    assert.deepEqual(
      rec.active(undefined, 1).map((c) => c.id),
      ['id1'],
    );
    a.end({ result: 'ok', reason: 'closed' });
    a.end({ result: 'upstream_error' }); // the first end wins
    assert.equal(rec.pending, 1);
    assert.equal(rec.active().length, 1);
    // Refused after authentication: one record each (refusals before it are counted per source: bounds.test.ts).
    b.user = 'ben';
    b.end({ result: 'limited', reason: 'over quota' });
    const c = rec.open('http');
    c.user = 'ben';
    c.end({ result: 'bad_request' });
    // A full batch is written without waiting for the timer.
    await new Promise((r) => setImmediate(r));
    await rec.flush();
    assert.equal(written.length, 1);
    assert.deepEqual(
      written[0]!.map((r) => [r.id, r.result, r.bytesUp, r.bytesDown]),
      [
        ['id1', 'ok', 5, 7],
        ['id2', 'limited', 0, 0],
        ['id3', 'bad_request', 0, 0],
      ],
    );
    await rec.close();
  });

  test('targets: false keeps the target out of records and the live list', async () => {
    const written: ConnectionRecord[] = [];
    const sink = storeAppending(async (b) => (written.push(...b), 0));
    const rec = new ConnectionLog({ store: sink, targets: false });
    const c = rec.open('socks5');
    c.target = 'secret.example.com:443';
    assert.ok(!('target' in rec.active()[0]!));
    c.end({ result: 'ok' });
    await rec.close();
    assert.equal(written.length, 1);
    assert.ok(!('target' in written[0]!));
    assert.doesNotMatch(JSON.stringify(written), /secret\.example/);
  });

  test('a full queue drops the oldest and counts it, and ending a connection never waits for the store', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const written: string[] = [];
    const slow = storeAppending(async (b) => {
      await gate;
      written.push(...b.map((r) => r.id));
      return 0;
    });
    const metrics = createMetrics({ defaultMetrics: false });
    let n = 0;
    const rec = new ConnectionLog({ store: slow, ids: () => `c${++n}`, batchSize: 5, queueMax: 10, flushIntervalMs: 60_000, metrics });
    const first = rec.open('http');
    first.end({ result: 'ok' });
    void rec.flush(); // c1 is now in flight, blocked on the gate
    const started = Date.now();
    for (let i = 0; i < 40; i++) rec.open('http').end({ result: 'ok' });
    assert.ok(Date.now() - started < 200, 'ending connections did not wait for the store');
    assert.ok(rec.pending <= 10, `bounded queue (${rec.pending})`);
    const dropped = metricValue(await metrics.registry.metrics(), 'rotor_connlog_dropped_total');
    assert.equal(dropped, 40 - 10);
    release();
    await rec.close();
    assert.deepEqual(written, ['c1', ...Array.from({ length: 10 }, (_, i) => `c${32 + i}`)], 'the newest were kept');
  });

  test('records the store refused are counted as dropped and logged, the rest as written', async () => {
    const refusing = storeAppending(async (b) => b.filter((r) => r.user === null).length);
    const metrics = createMetrics({ defaultMetrics: false });
    const { logger, text } = captureLogger('info');
    const rec = new ConnectionLog({ store: refusing, batchSize: 10, flushIntervalMs: 60_000, metrics, logger });
    for (let i = 0; i < 4; i++) {
      const c = rec.open('http');
      if (i !== 2) c.user = 'ann';
      c.end({ result: 'ok' });
    }
    await rec.flush();
    const exposition = await metrics.registry.metrics();
    assert.equal(metricValue(exposition, 'rotor_connlog_dropped_total'), 1);
    assert.match(exposition, /rotor_connlog_records_total\{sink="store"\} 3/);
    assert.match(text(), /connection records refused by the store/);
    await rec.close();
  });
});

describe('the JSON-lines file', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'rotor-connlog-file-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('one JSON line per record, rotated by size, keeping `rotate` files', async () => {
    const file = join(dir, 'logs', 'access.jsonl');
    const sink = new JsonLinesFileSink({ file, maxSize: '1K', rotate: 2 });
    for (let b = 0; b < 12; b++) await sink.write(Array.from({ length: 3 }, (_, i) => record(b * 3 + i)));
    await sink.close();
    const names = readdirSync(join(dir, 'logs')).sort();
    assert.ok(names.includes('access.jsonl'));
    assert.ok(names.includes('access.jsonl.1'), `rotated: ${names.join(', ')}`);
    assert.ok(!names.includes('access.jsonl.3'), `at most 2 rotated files: ${names.join(', ')}`);
    const lines = names.flatMap((n) =>
      readFileSync(join(dir, 'logs', n), 'utf8')
        .split('\n')
        .filter(Boolean),
    );
    const kept = lines.map((l) => JSON.parse(l) as ConnectionRecord);
    assert.ok(kept.length < 36, 'older files went');
    const newest = kept.find((r) => r.id === record(35).id);
    assert.equal(newest?.bytesDown, 100);
    assert.ok(existsSync(join(dir, 'logs', 'access.jsonl.1')));
  });
});
