// The connection log is the reseller's bill (GET /v1/usage's rollups, GET /v1/connections' records). A store
// write that fails (a Redis command past its 1 s timeout, a Redis restart — which README says is invisible to
// customers, a SQLite disk-full) must not lose the records or the bytes of the batch: it is written again, after
// a back-off, and at the stop within its budget; and a write that landed although its caller saw it fail must
// not be billed twice when written again. Against the test store (SQLite, or Redis with
// ROTOR_TEST_STORE=redis), through the real recorder (src/connlog/recorder.ts), its append failing as a
// timed-out Redis call fails (before or after the store took it).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ConnectionLog, connectionLogStoreFor, type ConnectionLogStore } from '../../src/connlog/index.ts';
import type { Store } from '../../src/store/index.ts';
import { StoreUnavailableError } from '../../src/store/errors.ts';
import { openTestStore } from '../support/store.ts';
import { captureLogger } from '../support/logger.ts';
import { createMetrics } from '../../src/telemetry/metrics.ts';
import { sumSamples } from '../support/prometheus.ts';
import { waitFor } from '../support/wait.ts';

const HOUR = 3_600_000;
let store: Store;
let log: ConnectionLogStore;
before(async () => {
  store = await openTestStore();
  log = connectionLogStoreFor(store);
});
after(async () => {
  await store?.close();
});

/**
 * The store's connection log whose next `failures` appends throw as a Redis outage does; with `landing`, each
 * failing append is written first (its answer lost past the command timeout).
 */
function flaky(inner: ConnectionLogStore): { store: ConnectionLogStore; fail(n: number, landing?: boolean): void; calls: () => number } {
  let failures = 0;
  let lands = false;
  let calls = 0;
  const wrapped = new Proxy(inner, {
    get(t, p) {
      if (p === 'append')
        return async (...args: Parameters<ConnectionLogStore['append']>) => {
          calls++;
          if (failures > 0) {
            failures--;
            if (lands) await t.append(...args);
            throw new StoreUnavailableError('connlog append: Command timed out');
          }
          return t.append(...args);
        };
      const v = Reflect.get(t, p, t) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
  return {
    store: wrapped,
    fail: (n, landing = false) => {
      failures = n;
      lands = landing;
    },
    calls: () => calls,
  };
}

const sum = (rows: { bytesUp: number; bytesDown: number; connections: number }[]) => ({
  up: rows.reduce((s, r) => s + r.bytesUp, 0),
  down: rows.reduce((s, r) => s + r.bytesDown, 0),
  connections: rows.reduce((s, r) => s + r.connections, 0),
});

async function billed(user: string): Promise<{ up: number; down: number; connections: number; records: number }> {
  const t0 = Math.floor(Date.now() / HOUR) * HOUR;
  const rows = await log.usage({ granularity: 'hour', from: t0 - HOUR, to: t0 + 2 * HOUR, user });
  const days = await log.usage({ granularity: 'day', from: t0 - 2 * 24 * HOUR, to: t0 + 2 * 24 * HOUR, user });
  const hour = sum(rows);
  assert.deepEqual(sum(days), hour, 'the day rollups hold what the hour rollups hold');
  return { ...hour, records: (await log.query({ user, limit: 1000 })).length };
}

function carrier(recorder: ConnectionLog) {
  return (user: string, up: number, down: number) => {
    const c = recorder.open('socks5', '127.0.0.1');
    c.user = user;
    c.bytes = { up, down };
    c.end({ result: 'ok', reason: 'closed', up, down });
  };
}

test('a batch whose write failed once: its records and bytes are in the store after the next write', async () => {
  const t0 = Math.floor(Date.now() / HOUR) * HOUR;
  const f = flaky(log);
  const recorder = new ConnectionLog({ store: f.store, flushIntervalMs: 3_600_000, checkpointMs: 3_600_000 });
  const carry = (user: string, up: number, down: number) => {
    const c = recorder.open('socks5', '127.0.0.1');
    c.user = user;
    c.bytes = { up, down };
    c.end({ result: 'ok', reason: 'closed', up, down });
  };
  carry('payer', 1000, 1_000_000); // ended while the store is failing
  f.fail(1);
  await recorder.flush();
  carry('payer', 10, 500); // ended once the store is back
  await recorder.close();

  const rows = await log.usage({ granularity: 'hour', from: t0 - HOUR, to: t0 + 2 * HOUR, user: 'payer' });
  const down = rows.reduce((s, r) => s + r.bytesDown, 0);
  const connections = rows.reduce((s, r) => s + r.connections, 0);
  const records = await log.query({ user: 'payer', limit: 100 });
  assert.equal(records.length, 2, `records stored: ${records.length} of 2`);
  assert.equal(connections, 2, `connections billed: ${connections} of 2`);
  assert.equal(down, 1_000_500, `bytes down billed: ${down} of 1,000,500`);
});

test('an open connection checkpointed while the store fails: its checkpointed bytes are billed at its end', async () => {
  const t0 = Math.floor(Date.now() / HOUR) * HOUR;
  const f = flaky(log);
  const recorder = new ConnectionLog({ store: f.store, flushIntervalMs: 3_600_000, checkpointMs: 3_600_000 });
  const c = recorder.open('socks5', '127.0.0.1');
  c.user = 'payer2';
  const bytes = { up: 100, down: 5_000_000 };
  c.bytes = bytes;
  f.fail(1);
  recorder.checkpoint(); // the checkpoint's write fails
  await recorder.flush();
  bytes.down += 1_000;
  c.end({ result: 'ok', reason: 'closed', up: bytes.up, down: bytes.down });
  await recorder.close();
  const rows = await log.usage({ granularity: 'hour', from: t0 - HOUR, to: t0 + 2 * HOUR, user: 'payer2' });
  const down = rows.reduce((s, r) => s + r.bytesDown, 0);
  const [rec] = await log.query({ user: 'payer2', limit: 10 });
  assert.equal(rec?.bytesDown, 5_001_000, 'the record holds every byte');
  assert.equal(down, 5_001_000, `the usage rollups bill ${down} of the record's 5,001,000 bytes down`);
});

test('a write that landed but was seen failing (answer lost past the timeout) is not billed twice when written again', async () => {
  const f = flaky(log);
  const recorder = new ConnectionLog({ store: f.store, flushIntervalMs: 3_600_000, checkpointMs: 3_600_000 });
  const carry = carrier(recorder);
  // An ended connection and an open one checkpointed, in one batch whose write lands and is seen failing.
  carry('twice', 7, 700_000);
  const c = recorder.open('socks5', '127.0.0.1');
  c.user = 'twice';
  const bytes = { up: 10, down: 3_000_000 };
  c.bytes = bytes;
  f.fail(1, true);
  recorder.checkpoint();
  await recorder.flush();
  bytes.down += 5;
  c.end({ result: 'ok', reason: 'closed', up: bytes.up, down: bytes.down });
  carry('twice', 3, 300);
  await recorder.close();
  assert.ok(f.calls() >= 3, `the landed batch was written again (${f.calls()} appends)`);
  assert.deepEqual(await billed('twice'), { up: 20, down: 3_700_305, connections: 3, records: 3 });
});

test('a store failing for a while: the batch is written again on its own after a back-off, nothing newer lost', async () => {
  const f = flaky(log);
  const cap = captureLogger('info');
  const recorder = new ConnectionLog({
    store: f.store,
    flushIntervalMs: 20,
    checkpointMs: 3_600_000,
    retry: { firstMs: 50, maxMs: 200 },
    logger: cap.logger,
  });
  const carry = carrier(recorder);
  f.fail(3);
  carry('patient', 1, 1_000);
  await waitFor(() => f.calls() >= 1, 10_000, 'the first write');
  for (let i = 0; i < 20; i++) carry('patient', 1, 1_000);
  await waitFor(
    async () => (await log.query({ user: 'patient', limit: 100 })).length === 21,
    20_000,
    'every record stored by the retries alone',
  );
  assert.deepEqual(await billed('patient'), { up: 21, down: 21_000, connections: 21, records: 21 });
  assert.ok(f.calls() >= 4, `${f.calls()} appends`);
  assert.match(cap.text(), /connection records could not be stored; kept and written again later/);
  assert.match(cap.text(), /connection records stored after a retry/);
  await recorder.close();
});

test('while the store fails the queue stays bounded: what falls off is counted and told with its bytes, which the rollups keep', async () => {
  const f = flaky(log);
  const cap = captureLogger('info');
  const metrics = createMetrics({ defaultMetrics: false });
  const recorder = new ConnectionLog({
    store: f.store,
    flushIntervalMs: 3_600_000,
    checkpointMs: 3_600_000,
    batchSize: 10,
    queueMax: 20,
    retry: { firstMs: 3_600_000, closeMs: 0 },
    metrics,
    logger: cap.logger,
  });
  const carry = carrier(recorder);
  f.fail(1);
  for (let i = 0; i < 5; i++) carry('bounded', 1, 100);
  await recorder.flush(); // fails: 5 records kept for the retry
  for (let i = 0; i < 30; i++) carry('bounded', 1, 100);
  assert.ok(recorder.pending <= 20, `${recorder.pending} records held of queueMax 20`);
  assert.equal(sumSamples(await metrics.registry.metrics(), 'rotor_connlog_dropped_total'), 15);
  await recorder.close();
  const after = await billed('bounded');
  assert.equal(after.records, 20, 'the kept batch and the newest 15');
  assert.deepEqual({ up: after.up, down: after.down, connections: after.connections }, { up: 35, down: 3_500, connections: 35 });
  const said = cap
    .text()
    .split('\n')
    .find((l) => l.includes('connection records dropped'));
  assert.ok(said, cap.text());
  assert.deepEqual((({ records, bytesUp, bytesDown }) => ({ records, bytesUp, bytesDown }))(JSON.parse(said) as Record<string, number>), {
    records: 15,
    bytesUp: 15,
    bytesDown: 1_500,
  });
});

test('at the stop: a store back within the budget takes everything; one that never comes back is logged with the bytes per user', async () => {
  const f = flaky(log);
  const recorder = new ConnectionLog({ store: f.store, flushIntervalMs: 3_600_000, checkpointMs: 3_600_000, retry: { closeMs: 10_000 } });
  carrier(recorder)('stopped1', 2, 2_000);
  f.fail(3);
  await recorder.close();
  assert.deepEqual(await billed('stopped1'), { up: 2, down: 2_000, connections: 1, records: 1 });

  const g = flaky(log);
  const cap = captureLogger('info');
  const gone = new ConnectionLog({
    store: g.store,
    flushIntervalMs: 3_600_000,
    checkpointMs: 3_600_000,
    retry: { closeMs: 300 },
    logger: cap.logger,
  });
  const c = gone.open('socks5', '127.0.0.1');
  c.user = 'stopped2';
  c.bytes = { up: 4, down: 4_000 };
  carrier(gone)('stopped3', 1, 10);
  g.fail(1_000_000);
  const t = performance.now();
  await gone.close();
  assert.ok(performance.now() - t < 10_000, 'the stop gives up within its budget');
  assert.ok(g.calls() >= 2, `tried again at the stop (${g.calls()} appends)`);
  const said = cap
    .text()
    .split('\n')
    .find((l) => l.includes('did not take before the stop'));
  assert.ok(said, cap.text());
  const lost = JSON.parse(said) as { records: number; rollups: unknown; users: unknown };
  assert.equal(lost.records, 2);
  assert.deepEqual(lost.rollups, { bytesUp: 5, bytesDown: 4_010 });
  assert.deepEqual(lost.users, { stopped2: { bytesUp: 4, bytesDown: 4_000 }, stopped3: { bytesUp: 1, bytesDown: 10 } });
});

test('the store takes a batch id once: the same batch written again adds nothing, another id adds again', async () => {
  const now = Date.now();
  const rec = (id: string, result: 'ok' | 'open', down: number) => ({
    id,
    user: 'ids',
    session: null,
    listener: 'socks5',
    node: null,
    bytesUp: 1,
    bytesDown: down,
    startedAt: now - 1000,
    durationMs: 1000,
    result,
    reason: null,
    retries: 0,
    hedges: 0,
  });
  const usage = (down: number, connections: number) =>
    (['hour', 'day'] as const).map((granularity) => ({
      user: 'ids',
      granularity,
      period: granularity === 'hour' ? Math.floor(now / HOUR) * HOUR : Math.floor(now / (24 * HOUR)) * 24 * HOUR,
      bytesUp: 1,
      bytesDown: down,
      connections,
      failures: 0,
    }));
  // A writer's ids: its name and an increasing number (src/store/batch-marks.ts).
  const writer = `batch-${now}-${Math.random()}.`;
  const id = `${writer}1`;
  await log.append([rec('ids-1', 'open', 500)], usage(500, 0), id);
  // Written again with newer content under the same id (never done by the recorder, which keeps a failed batch
  // as it was): still nothing, the id alone decides.
  await log.append([rec('ids-1', 'ok', 900), rec('ids-2', 'ok', 50)], usage(450, 2), id);
  assert.deepEqual(await billed('ids'), { up: 1, down: 500, connections: 0, records: 1 });
  await log.append([rec('ids-1', 'ok', 900), rec('ids-2', 'ok', 50)], usage(450, 2), `${writer}2`);
  assert.deepEqual(await billed('ids'), { up: 2, down: 950, connections: 2, records: 2 });
  // Without an id every append counts (foldRollups' callers, tools).
  await log.append([], usage(1, 0));
  await log.append([], usage(1, 0));
  assert.deepEqual(await billed('ids'), { up: 4, down: 952, connections: 2, records: 2 });
});
