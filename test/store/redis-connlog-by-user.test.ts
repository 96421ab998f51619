// One customer's reads on the Redis connection log (src/store/redis-connection-log.ts) read that customer's data
// only: its records through a per-user index beside the log's, written by the append script with the log's own
// keys and taken out with every record the bounds or retention remove; its rollups as its own fields of each
// period's hash in the window. A log written before the index (an older version's store) is indexed once by a
// background pass; until it is done, one user's records are found by scanning the log as before, with the same
// answers. On a real redis-server.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { openBackends, type Backends } from '../../src/store/index.ts';
import type { ConnectionLogStore, ConnectionRecord, UsageRollup } from '../../src/store/connection-log-types.ts';
import type { RedisConnectionLog } from '../../src/store/redis-connection-log.ts';
import { testRedisUrl } from '../support/store.ts';

const HOUR = 3_600_000;
let backends: Backends;
let redis: Redis;
let prefix: string;

before(async () => {
  const url = await testRedisUrl();
  prefix = `byuser${randomBytes(4).toString('hex')}:`;
  backends = await openBackends(url, { prefix, commandTimeoutMs: 10_000 }); // the run's Redis is shared: timeouts are not under test
  redis = new Redis(url);
});
after(async () => {
  await backends?.close();
  redis?.disconnect();
});

let seq = 0;
function record(user: string | null, startedAt: number, extra: Partial<ConnectionRecord> = {}): ConnectionRecord {
  return {
    id: `r${(++seq).toString(36)}`,
    user,
    session: null,
    listener: 'socks5',
    client: '127.0.0.1',
    target: '127.0.0.1:443',
    node: 'socks5://u@127.0.0.2:1080',
    bytesUp: 10,
    bytesDown: 100,
    startedAt,
    durationMs: 5,
    result: 'ok',
    reason: 'closed',
    retries: 0,
    hedges: 0,
    ...extra,
  };
}

async function hmgets(): Promise<number> {
  return Number(/cmdstat_hmget:calls=(\d+)/.exec(await redis.info('commandstats'))?.[1] ?? 0);
}

/** Every key of this test's prefix matching `pattern` (SCAN: the test's own server and prefix). */
async function keysOf(pattern: string): Promise<string[]> {
  const out: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}${pattern}`, 'COUNT', 1000);
    cursor = next;
    out.push(...keys);
  } while (cursor !== '0');
  return out;
}

/** What one user's records are, read the long way: the whole log, filtered. */
async function scanned(log: ConnectionLogStore, user: string): Promise<string[]> {
  return (await log.query({ limit: 1_000_000 })).filter((r) => r.user === user).map((r) => r.id);
}

test("one user's index holds exactly that user's records held: through the bound, retention and replacements", async () => {
  const log = backends.connectionLog({ maxRecords: 50 });
  await log.settleOpen();
  const t0 = Date.now() - 10 * HOUR;
  for (let b = 0; b < 6; b++) {
    const batch: ConnectionRecord[] = [];
    for (let i = 0; i < 20; i++) batch.push(record(i % 3 === 0 ? 'ann' : i % 3 === 1 ? 'ben' : null, t0 + b * 100 + i));
    // An `open` checkpoint replaced by its end in a later batch: still one entry.
    if (b === 2) batch.push(record('ann', t0 + b * 100 + 50, { id: 'ann-open', result: 'open' }));
    if (b === 3) batch.push(record('ann', t0 + 2 * 100 + 50, { id: 'ann-open', result: 'ok', bytesDown: 999 }));
    await log.append(batch);
  }
  assert.equal(await log.count(), 50);
  for (const user of ['ann', 'ben']) {
    const held = await scanned(log, user);
    assert.equal(await redis.zcard(`${prefix}connlog:idx:u:${user}`), held.length, `${user}'s index holds its ${held.length} records held`);
    const before = await hmgets();
    const mine = (await log.query({ user, limit: 1000 })).map((r) => r.id);
    assert.deepEqual(mine, held, `${user}'s records, newest first, as the whole log's`);
    assert.equal((await hmgets()) - before, 1, "one HMGET, of that user's records only");
    const page = await log.query({ user, limit: 3 });
    const next = await log.query({ user, limit: 3, after: { startedAt: page[2]!.startedAt, id: page[2]!.id } });
    assert.deepEqual(
      [...page, ...next].map((r) => r.id),
      held.slice(0, 6),
      'paged by the cursor',
    );
  }
  // Retention by age: the index loses what the log loses.
  const removed = await log.prune({ recordsBefore: t0 + 450, maxRecords: 1000, usageBefore: 0 });
  assert.ok(removed > 0);
  for (const user of ['ann', 'ben'])
    assert.equal(await redis.zcard(`${prefix}connlog:idx:u:${user}`), (await scanned(log, user)).length, `${user}'s index after retention`);
  const all = await log.prune({ recordsBefore: Date.now(), maxRecords: 1000, usageBefore: 0 });
  assert.ok(all > 0);
  assert.deepEqual(await keysOf('connlog:idx:u:*'), [], 'no index is left once the log is empty');
});

test("one user's rollups: exactly the whole rows' part of that user, and only that part is sent", async () => {
  const log = backends.connectionLog();
  const h0 = Math.floor(Date.now() / HOUR) * HOUR - 30 * HOUR;
  const rows: UsageRollup[] = [];
  for (let h = 0; h < 30; h++)
    for (let u = 0; u < 40; u++)
      for (const granularity of ['hour', 'day'] as const) {
        const period = granularity === 'hour' ? h0 + h * HOUR : Math.floor((h0 + h * HOUR) / (24 * HOUR)) * 24 * HOUR;
        rows.push({ user: `cu${u}`, granularity, period, bytesUp: u, bytesDown: 1000 + h, connections: 1, failures: h % 2 });
      }
  for (let i = 0; i < rows.length; i += 500) await log.append([], rows.slice(i, i + 500));
  for (const granularity of ['hour', 'day'] as const) {
    const window = { granularity, from: h0 - 48 * HOUR, to: h0 + 48 * HOUR };
    const whole = await log.usage(window);
    for (const user of ['cu0', 'cu7', 'cu39', 'nobody']) {
      const mine = await log.usage({ ...window, user });
      assert.deepEqual(
        mine,
        whole.filter((r) => r.user === user),
        `${user}'s ${granularity} rows`,
      );
    }
  }
  const sent = Number(/total_net_output_bytes:(\d+)/.exec(await redis.info('stats'))?.[1]);
  await log.usage({ granularity: 'hour', from: h0, to: h0 + 30 * HOUR, user: 'cu7' });
  const bytes = Number(/total_net_output_bytes:(\d+)/.exec(await redis.info('stats'))?.[1]) - sent;
  assert.ok(bytes < 8000, `one user's 30 hourly rows made Redis send ${bytes} B (the whole rows: over 100,000 B)`);
  // Retention: the periods before usageBefore go.
  await log.prune({ recordsBefore: 0, maxRecords: 1_000_000, usageBefore: h0 + 10 * HOUR });
  const left = await log.usage({ granularity: 'hour', from: h0 - HOUR, to: h0 + 31 * HOUR, user: 'cu7' });
  assert.equal(left.length, 20);
});

test('a log written before the per-user index: answered by the scan until the one-time pass is done, then by the index, exactly', async () => {
  // Another prefix: a store an older version wrote (records and rollups, no per-user index, no flag).
  const old = `${prefix}old:`;
  const store = await openBackends(await testRedisUrl(), { prefix: old, commandTimeoutMs: 10_000 });
  try {
    const writer = store.connectionLog({ maxRecords: 5000 });
    const t0 = Date.now() - 5 * HOUR;
    const h0 = Math.floor(t0 / HOUR) * HOUR;
    for (let b = 0; b < 12; b++) {
      const batch: ConnectionRecord[] = [];
      for (let i = 0; i < 500; i++) batch.push(record(`u${i % 300}`, t0 + b * 500 + i));
      const rows: UsageRollup[] = [];
      for (let u = 0; u < 300; u++)
        rows.push({
          user: `u${u}`,
          granularity: 'hour',
          period: h0 + (b % 4) * HOUR,
          bytesUp: 1,
          bytesDown: 10 + b,
          connections: 2,
          failures: 0,
        });
      await writer.append(batch, rows);
    }
    await redis.del(...(await keysOf('old:connlog:idx:u:*')), `${old}connlog:byuser`);

    const log = store.connectionLog({ maxRecords: 5000 }) as RedisConnectionLog;
    const expected = await scanned(log, 'u7');
    assert.equal(expected.length, 20);
    // Before the pass: the whole log is read, and the answer is the same.
    assert.deepEqual(
      (await log.query({ user: 'u7', limit: 100 })).map((r) => r.id),
      expected,
    );
    const window = { granularity: 'hour' as const, from: h0 - HOUR, to: h0 + 6 * HOUR };
    const whole = await log.usage(window);
    assert.deepEqual(
      await log.usage({ ...window, user: 'u7' }),
      whole.filter((r) => r.user === 'u7'),
    );

    // The pass, with appends (records and rollups of the same users and periods) and the bound at work meanwhile.
    const pass = log.indexPass();
    let more = 0;
    let passing = true;
    void pass.then(() => (passing = false));
    while (passing || more < 3) {
      const rows: UsageRollup[] = [];
      for (let u = 0; u < 300; u += 7)
        rows.push({
          user: `u${u}`,
          granularity: 'hour',
          period: h0 + (more % 4) * HOUR,
          bytesUp: 5,
          bytesDown: 5,
          connections: 1,
          failures: 1,
        });
      await log.append([record('u7', Date.now() + more), record('u14', Date.now() + more)], rows);
      more++;
    }
    await pass;
    assert.ok(more > 1, `${more} appends during the pass`);
    assert.equal(await redis.get(`${old}connlog:byuser`), '1', 'the pass is done');
    assert.equal(await redis.exists(`${old}connlog:byuser:pass`), 0, "the pass's cursor is gone");

    for (const user of ['u7', 'u14', 'u299']) {
      const held = await scanned(log, user);
      const before = await hmgets();
      const mine = (await log.query({ user, limit: 1000 })).map((r) => r.id);
      assert.deepEqual(mine, held, `${user}'s records after the pass`);
      assert.ok((await hmgets()) - before <= 1, "one user's read reads that user's records only");
      const rowsNow = await log.usage(window);
      assert.deepEqual(
        await log.usage({ ...window, user }),
        rowsNow.filter((r) => r.user === user),
        `${user}'s rows, exact`,
      );
    }
    // A daemon started on the indexed store finds the pass done at once.
    const again = store.connectionLog() as RedisConnectionLog;
    await again.indexPass();
  } finally {
    await store.close();
  }
});
