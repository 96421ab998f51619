// The usage rows a customer of a name made again sees in its portal (src/portal/history.ts): the row of the period
// holding its creation less the deleted customer's part, told from that customer's records; a row whose part the
// records cannot tell (a deleted customer's tunnel begun in an earlier period: the rollups split it at checkpoints
// the record does not keep; records past the log's retention) is left out, never shown with another customer's
// bytes or without some of the new customer's (review11 #6: a tunnel across the hour was taken out whole, 0 B shown).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HistorySplit, type ListRecords } from '../../src/portal/history.ts';
import type { ConnectionRecord } from '../../src/connlog/types.ts';
import type { UsageRow } from '../../src/connlog/usage.ts';

const H = 3_600_000;
const t0 = Date.parse('2026-11-29T11:00:00Z');
const since = t0 + 30 * 60_000; // the name made again at 11:30

const record = (id: string, startedAt: number, durationMs: number, bytesDown: number): ConnectionRecord =>
  ({
    id,
    user: 'bob',
    session: null,
    listener: 'socks5',
    node: 'n1',
    bytesUp: 0,
    bytesDown,
    startedAt,
    durationMs,
    result: 'ok',
    reason: 'deleted',
  }) as ConnectionRecord;
const row = (period: number, bytesDown: number, connections: number, amount: number | null = null): UsageRow => ({
  user: 'bob',
  period: new Date(period).toISOString(),
  bytesUp: 0,
  bytesDown,
  connections,
  failures: 0,
  amount,
});
/** The records the store would answer (startedAt in [since, until)), counting the reads. */
function store(records: ConnectionRecord[]): ListRecords & { reads: number } {
  const list = async (q: Parameters<ListRecords>[0]) => {
    list.reads++;
    return { items: records.filter((r) => r.startedAt >= (q.since ?? 0) && r.startedAt < (q.until ?? Infinity)), next: null };
  };
  list.reads = 0;
  return list;
}

test("the creation hour's row less the deleted customer's connections begun in it; an earlier hour's row left out", async () => {
  // The deleted customer's download 11:05-11:20 (400,000 B, all in the 11:00 row), the new customer's 200,000 B after 11:30.
  const list = store([record('old1', t0 + 5 * 60_000, 15 * 60_000, 400_000)]);
  const split = new HistorySplit(list, () => since + 120_000, 7 * 24 * H);
  const rows = [row(t0 - H, 50_000, 1), row(t0, 600_000, 2, 6), row(t0 + H, 10_000, 1)];
  const shown = await split.own('bob', since, 'hour', rows);
  assert.deepEqual(
    shown.map((r) => [r.period, r.bytesDown, r.connections, r.amount]),
    [
      [new Date(t0).toISOString(), 200_000, 1, 2],
      [new Date(t0 + H).toISOString(), 10_000, 1, null],
    ],
  );
  // Settled (two minutes after the creation): the part is kept, not read again.
  await split.own('bob', since, 'hour', rows);
  assert.equal(list.reads, 1);
  // The name's first customer (since 0): every row as it is.
  assert.equal((await split.own('bob', 0, 'hour', rows)).length, 3);
});

test("a deleted customer's tunnel begun in an earlier hour: the creation hour's row is left out, not shown without the new customer's bytes", async () => {
  // review11's case: the tunnel 10:50-11:20, 1,000,000 B, of which 600,000 were checkpointed into the 10:00 row.
  const list = store([record('old1', t0 - 10 * 60_000, 30 * 60_000, 1_000_000)]);
  const split = new HistorySplit(list, () => since + 120_000, 7 * 24 * H);
  const shown = await split.own('bob', since, 'hour', [row(t0 - H, 600_000, 0), row(t0, 600_000, 2)]);
  assert.deepEqual(shown, [], JSON.stringify(shown));
});

test("records past the log's retention: the creation period's row is left out (its part would read as 0)", async () => {
  const list = store([]);
  const split = new HistorySplit(list, () => since + 8 * 24 * H, 7 * 24 * H);
  assert.deepEqual(await split.own('bob', since, 'day', [row(Date.parse('2026-11-29T00:00:00Z'), 600_000, 2)]), []);
  assert.equal(list.reads, 0);
});

test('a part that cannot be told (past the pages read) is kept once settled: a polling customer does not read the records again', async () => {
  // 6,000 short connections of the deleted customer in the creation hour: more than the pages a part reads.
  const records = Array.from({ length: 6000 }, (_, i) => record(`o${i}`, t0 + i * 100, 50, 100));
  let reads = 0;
  const paged: ListRecords = async (q) => {
    reads++;
    const from = q.cursor === undefined ? 0 : Number(q.cursor);
    const items = records.slice(from, from + q.limit!);
    return { items, next: from + q.limit! < records.length ? String(from + q.limit!) : null };
  };
  const split = new HistorySplit(paged, () => since + 10 * 60_000);
  for (let i = 0; i < 20; i++) assert.deepEqual(await split.own('bob', since, 'hour', [row(t0, 605_000, 6001)]), []);
  assert.ok(reads <= 25, `20 reads of the portal's usage cost ${reads} store reads`);
});

test('a failed read shows the row as unknown and is not retried at once', async () => {
  let reads = 0;
  const failing: ListRecords = async () => {
    reads++;
    throw new Error('store unavailable');
  };
  const split = new HistorySplit(failing, () => since + 10 * 60_000);
  for (let i = 0; i < 5; i++) assert.deepEqual(await split.own('bob', since, 'hour', [row(t0, 600_000, 2)]), []);
  assert.equal(reads, 1, 'kept a few seconds, not read again at every request');
});

test("a deleted customer's tunnel begun days before the creation's period (a websocket): the row is left out, not shown with its bytes", async () => {
  // Open two days, cut at its delete at 11:20; 400,000 B of it relayed after 11:00, in the creation hour's row.
  const list = store([record('ws1', t0 - 2 * 24 * H, 2 * 24 * H + 20 * 60_000, 50_000_000)]);
  const split = new HistorySplit(list, () => since + 120_000, 7 * 24 * H);
  const shown = await split.own('bob', since, 'hour', [row(t0, 600_000, 2)]);
  assert.deepEqual(shown, [], `the new customer's portal shows ${JSON.stringify(shown)} (its own: 200,000 B)`);
});
