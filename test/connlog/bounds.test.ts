// The connection log's bounds hold as records arrive (issue 23): on the test store (SQLite, or Redis with
// ROTOR_TEST_STORE=redis), every append that would pass log.access.maxRecords or maxSize removes the oldest
// records in the same unit of work, so the log never holds more, whatever the rate; the bytes held stay exact
// through checkpoint replacements and retention. Refusals before authentication are one record per source,
// listener and result per window, with a count.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ConnectionLog, connectionLogStoreFor, recordSize, type ConnectionRecord } from '../../src/connlog/index.ts';
import type { Store } from '../../src/store/index.ts';
import { openTestStore } from '../support/store.ts';

const T0 = Date.UTC(2026, 0, 10, 12, 0, 0);

function record(i: number, over: Partial<ConnectionRecord> = {}): ConnectionRecord {
  return {
    id: `b${String(i).padStart(6, '0')}`,
    user: 'ann',
    session: null,
    listener: 'http',
    target: `site-${i % 7}.example:443`,
    node: 'socks5://sub@127.0.0.1:9000',
    exit: '127.0.0.1',
    bytesUp: 10,
    bytesDown: 100,
    startedAt: T0 + i * 10,
    durationMs: 5,
    result: 'ok',
    reason: i % 3 === 0 ? 'closed' : 'a longer reason that takes more bytes than the others do',
    retries: 0,
    hedges: 0,
    ...over,
  };
}

describe('connection log bounds, as records arrive', () => {
  const stores: Store[] = [];
  const open = async () => {
    const s = await openTestStore();
    stores.push(s);
    return s;
  };
  after(async () => {
    for (const s of stores) await s.close();
  });

  test('rows: never more than maxRecords after any append, the newest kept', async () => {
    const log = connectionLogStoreFor(await open(), { maxRecords: 100 });
    let i = 0;
    for (let batch = 0; batch < 30; batch++) {
      // Batches of every size, one larger than the bound itself.
      const size = batch === 17 ? 150 : 1 + ((batch * 7) % 23);
      await log.append(Array.from({ length: size }, () => record(i++)));
      const held = await log.footprint();
      assert.ok(held.records <= 100, `after batch ${batch}: ${held.records} records held`);
      assert.equal(held.records, await log.count());
      assert.equal(held.records, Math.min(100, i));
    }
    const kept = await log.query({ limit: 1000 });
    assert.equal(kept.length, 100);
    assert.equal(kept[0]!.id, record(i - 1).id, 'the newest stays');
    assert.equal(kept[99]!.id, record(i - 100).id, 'exactly the newest 100');
  });

  test('bytes: never more than maxBytes, counted exactly through replacements and retention', async () => {
    const maxBytes = 40 * recordSize(record(1));
    const log = connectionLogStoreFor(await open(), { maxBytes });
    const exact = async () => (await log.query({ limit: 10_000 })).reduce((n, r) => n + recordSize(r), 0);
    let i = 0;
    for (let batch = 0; batch < 12; batch++) {
      await log.append(Array.from({ length: 9 }, () => record(i++)));
      const held = await log.footprint();
      assert.ok(held.bytes <= maxBytes, `after batch ${batch}: ${held.bytes} > ${maxBytes}`);
      assert.equal(held.bytes, await exact());
    }
    assert.ok((await log.count()) < 12 * 9, 'old records went');
    // A checkpoint (`open`) replaced by the connection's final record, of another size: the count follows.
    const id = 'checkpointed';
    await log.append([record(i, { id, result: 'open', reason: 'open at the last checkpoint' })]);
    await log.append([record(i, { id, result: 'ok', reason: 'closed after a long while, with a long reason' })]);
    await log.append([record(i, { id, result: 'ok', reason: 'a second final record is not stored' })]);
    assert.equal((await log.query({ limit: 10_000 })).find((r) => r.id === id)!.reason, 'closed after a long while, with a long reason');
    assert.equal((await log.footprint()).bytes, await exact());
    // Retention by age keeps the count exact too.
    await log.prune({ recordsBefore: T0 + (i - 10) * 10, maxRecords: 1_000_000, usageBefore: 0 });
    const held = await log.footprint();
    assert.equal(held.bytes, await exact());
    assert.equal(held.records, await log.count());
  });

  test('a log that outgrows its bounds (opened again with smaller ones) is cut at the next append', async () => {
    const store = await open();
    const wide = connectionLogStoreFor(store);
    await wide.append(Array.from({ length: 300 }, (_, i) => record(i)));
    const narrow = connectionLogStoreFor(store, { maxRecords: 50 });
    await narrow.append([record(300)]);
    assert.equal(await narrow.count(), 50);
    assert.equal(
      (await narrow.footprint()).bytes,
      (await narrow.query({ limit: 1000 })).reduce((n, r) => n + recordSize(r), 0),
    );
  });

  test('large batches: every record once, a checkpoint replaced, a record written again not counted twice, bytes exact', async () => {
    const log = connectionLogStoreFor(await open());
    const exact = async () => (await log.query({ limit: 10_000 })).reduce((n, r) => n + recordSize(r), 0);
    const open1 = record(5000, { id: 'long-1', result: 'open', reason: 'open at the last checkpoint', bytesDown: 1 });
    const open2 = record(5001, { id: 'long-2', result: 'open', reason: 'open at the last checkpoint', bytesDown: 1 });
    await log.append([open1, open2, ...Array.from({ length: 100 }, (_, i) => record(i))]);
    assert.equal(await log.count(), 102);
    assert.deepEqual(await log.footprint(), { records: 102, bytes: await exact() });
    // A batch (checkpoints first, as the recorder writes them) that holds: a checkpoint and the same
    // connection's final record, the final record of a connection checkpointed earlier, and records written
    // before (a batch written again after a failure), amid new ones, in runs of every length.
    const final1 = record(5000, { id: 'long-1', result: 'ok', reason: 'closed after a long while', bytesDown: 900 });
    const open3 = record(5002, { id: 'long-3', result: 'open', reason: 'open at the last checkpoint', bytesDown: 2 });
    const final3 = record(5002, { id: 'long-3', result: 'upstream_error', reason: 'the upstream went away', bytesDown: 70 });
    const again = Array.from({ length: 40 }, (_, i) => record(i + 30, { reason: 'written again: not stored' }));
    const fresh = Array.from({ length: 150 }, (_, i) => record(200 + i));
    await log.append([open3, ...fresh.slice(0, 70), final1, ...again, final3, ...fresh.slice(70)]);
    const rows = await log.query({ limit: 10_000 });
    assert.equal(rows.length, 102 + 1 + 150);
    assert.deepEqual(await log.footprint(), { records: rows.length, bytes: await exact() });
    const byId = new Map(rows.map((r) => [r.id, r]));
    assert.equal(byId.get('long-1')!.bytesDown, 900, 'the checkpoint is replaced by the final record');
    assert.equal(byId.get('long-2')!.result, 'open', 'a checkpoint with no final record yet stays');
    assert.equal(byId.get('long-3')!.result, 'upstream_error', "the same batch's final record replaces its checkpoint");
    assert.ok(!rows.some((r) => r.reason === 'written again: not stored'), 'a record already stored stays as written');
    // The rollups count each record of both batches once (folded from the records).
    const [day] = await log.usage({ granularity: 'day', from: T0 - 86_400_000, to: T0 + 86_400_000 });
    assert.equal(day!.connections, 102 + 3 + 40 + 150);
  });

  test('runs of 25 rows: a checkpoint and its final record in one run, a run of records all stored before', async () => {
    const log = connectionLogStoreFor(await open());
    const exact = async () => (await log.query({ limit: 10_000 })).reduce((n, r) => n + recordSize(r), 0);
    const first = Array.from({ length: 25 }, (_, i) => record(i));
    await log.append(first);
    const open4 = record(6000, { id: 'long-4', result: 'open', reason: 'open at the last checkpoint', bytesDown: 3 });
    const final4 = record(6000, { id: 'long-4', result: 'ok', reason: 'closed', bytesDown: 333 });
    const fresh = Array.from({ length: 23 }, (_, i) => record(300 + i));
    const again = first.map((r) => ({ ...r, reason: 'written again: not stored' }));
    // Run 1: open4, 11 new, final4, 12 new; run 2: all 25 stored before (the statement inserts nothing).
    await log.append([open4, ...fresh.slice(0, 11), final4, ...fresh.slice(11), ...again]);
    const rows = await log.query({ limit: 10_000 });
    assert.equal(rows.length, 25 + 1 + 23);
    assert.deepEqual(await log.footprint(), { records: rows.length, bytes: await exact() });
    const byId = new Map(rows.map((r) => [r.id, r]));
    assert.equal(byId.get('long-4')!.bytesDown, 333, "the run's final record replaces its own checkpoint");
    assert.ok(!rows.some((r) => r.reason === 'written again: not stored'));
  });

  // Records that share a start (three per millisecond here) are ordered by id, which runs against the order
  // they were written in: the oldest are the first by (started_at, id), whatever their rowids.
  const tied = (i: number): ConnectionRecord =>
    record(i, { id: `t${String(999_999 - i).padStart(6, '0')}`, startedAt: T0 + Math.floor(i / 3) * 10 });
  const byKey = (a: ConnectionRecord, b: ConnectionRecord) => a.startedAt - b.startedAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

  test('the bound removes the oldest by (started_at, id), ties on the start included', async () => {
    const log = connectionLogStoreFor(await open(), { maxRecords: 100 });
    const all: ConnectionRecord[] = [];
    for (let batch = 0; batch < 25; batch++) {
      const size = 1 + ((batch * 5) % 17);
      const b = Array.from({ length: size }, (_, k) => tied(all.length + k));
      all.push(...b);
      await log.append(b);
      const expected = [...all].sort(byKey).slice(-100);
      const kept = (await log.query({ limit: 1000 })).reverse();
      assert.deepEqual(
        kept.map((r) => r.id),
        expected.map((r) => r.id),
        `after batch ${batch}`,
      );
      assert.deepEqual(await log.footprint(), { records: kept.length, bytes: kept.reduce((n, r) => n + recordSize(r), 0) });
    }
  });

  test('retention removes in slices of thousands exactly what it should, ties at both edges', async () => {
    const log = connectionLogStoreFor(await open());
    const all = Array.from({ length: 12_002 }, (_, i) => tied(i));
    for (let i = 0; i < all.length; i += 500) await log.append(all.slice(i, i + 500));
    const check = async (expected: ConnectionRecord[], what: string) => {
      const kept = (await log.query({ limit: 20_000 })).reverse();
      assert.equal(kept.length, expected.length, what);
      assert.deepEqual(
        kept.map((r) => r.id),
        expected.map((r) => r.id),
        what,
      );
      assert.deepEqual(await log.footprint(), { records: kept.length, bytes: kept.reduce((n, r) => n + recordSize(r), 0) }, what);
    };
    const sorted = [...all].sort(byKey);
    // By age: everything that started before the start of record 6,001 (which shares it with 6,000 and 6,002).
    const before = tied(6001).startedAt;
    let removed = await log.prune({ recordsBefore: before, maxRecords: 1_000_000, usageBefore: 0 });
    assert.equal(removed, 6000);
    await check(
      sorted.filter((r) => r.startedAt >= before),
      'by age',
    );
    // By count: the newest 3,001 stay, the first of them in the middle of three records that share a start.
    removed = await log.prune({ recordsBefore: 0, maxRecords: 3001, usageBefore: 0 });
    assert.equal(removed, 6002 - 3001);
    await check(sorted.slice(-3001), 'by count');
  });

  describe('refusals before authentication', () => {
    let store: Store;
    before(async () => {
      store = await open();
    });

    test('one record per source, listener and result per window, with the count', async () => {
      const log = connectionLogStoreFor(store, { maxRecords: 1000 });
      const recorder = new ConnectionLog({ store: log, flushIntervalMs: 60_000, refusals: { windowMs: 60_000 } });
      const attempt = (client: string, listener: string, result: 'auth_failed' | 'bad_request') => {
        const ctx = recorder.open(listener, client);
        ctx.end({ result, reason: result === 'auth_failed' ? 'wrong password' : 'not SOCKS5' });
      };
      for (let n = 0; n < 500; n++) attempt('127.0.0.9', 'http', 'auth_failed');
      for (let n = 0; n < 200; n++) attempt('127.0.0.9', 'socks5', 'bad_request');
      for (let n = 0; n < 30; n++) attempt(`2001:db8:0:1::${n + 1}`, 'socks5', 'auth_failed');
      attempt('127.0.0.10', 'http', 'auth_failed');
      // An authenticated connection is never folded.
      const ok = recorder.open('http');
      ok.user = 'ann';
      ok.end({ result: 'limited', reason: 'over quota' });
      await recorder.flush();
      assert.equal(await log.count(), 1, 'the authenticated refusal is written at once; the window still counts');
      await recorder.flush({ refusals: true });
      const rows = await log.query({ limit: 100 });
      assert.equal(rows.length, 5);
      const by = (listener: string, result: string, client: string) =>
        rows.find((r) => r.listener === listener && r.result === result && r.client === client);
      assert.equal(by('http', 'auth_failed', '127.0.0.9')?.count, 500);
      assert.equal(by('socks5', 'bad_request', '127.0.0.9')?.count, 200);
      assert.equal(by('socks5', 'auth_failed', '2001:db8:0:1::/64')?.count, 30, 'IPv6 counted by its /64');
      const single = rows.find((r) => r.listener === 'http' && r.result === 'auth_failed' && r.count === 1);
      assert.ok(single && single.user === null && single.bytesUp === 0, JSON.stringify(rows));
      assert.equal(rows.find((r) => r.user === 'ann')?.count, undefined, 'one connection: no count');
      await recorder.close();
    });

    test('the sources counted per window are bounded: past it they count together as *', async () => {
      const log = connectionLogStoreFor(store, { maxRecords: 1000 });
      await log.prune({ recordsBefore: Number.MAX_SAFE_INTEGER, maxRecords: 0, usageBefore: 0 });
      const recorder = new ConnectionLog({ store: log, flushIntervalMs: 60_000, refusals: { maxSources: 10 } });
      for (let n = 0; n < 50; n++) {
        const ctx = recorder.open('socks5', `127.0.1.${n}`);
        ctx.end({ result: 'auth_failed', reason: 'wrong password' });
      }
      await recorder.flush({ refusals: true });
      const rows = await log.query({ limit: 100 });
      assert.equal(rows.length, 11);
      assert.equal(
        rows.reduce((n, r) => n + (r.count ?? 1), 0),
        50,
      );
      assert.ok(rows.some((r) => r.count === 40 && r.client === '*'));
      await recorder.close();
    });
  });
});
