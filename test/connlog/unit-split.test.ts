// What one store write (a unit) of the connection log holds, and what happens when the store fails it for a reason
// of its own. A unit carries at most 2 × batchSize rollup rows (an hour and a day row for batchSize users), as it
// carries at most batchSize records: one flush interval of 8,000 customers was one unit of 16,000 rows that
// overflowed the stack of the Redis driver and was retried for ever, nothing billed after. A failure that is not
// an outage (a RangeError of our own code) splits the unit in halves until each is written; one that is an outage
// keeps the unit as it was (test/connlog/store-failure.test.ts). Against the test store (SQLite, or Redis with
// ROTOR_TEST_STORE=redis), through the real recorder.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ConnectionLog, connectionLogStoreFor, type ConnectionLogStore } from '../../src/connlog/index.ts';
import { notTransient } from '../../src/connlog/recorder.ts';
import type { Store } from '../../src/store/index.ts';
import { StoreError, StoreUnavailableError } from '../../src/store/errors.ts';
import type { UsageRollup } from '../../src/store/connection-log-types.ts';
import { openTestStore } from '../support/store.ts';
import { captureLogger } from '../support/logger.ts';

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

interface Seen {
  records: number;
  rollups: number;
}

/** The store's connection log, each append seen; `refuse(unit)` true: that append throws `error` instead. */
function watched(inner: ConnectionLogStore, refuse: (records: number, rollups: number) => boolean, error: () => Error) {
  const seen: Seen[] = [];
  const wrapped = new Proxy(inner, {
    get(t, p) {
      if (p === 'append')
        return async (...args: Parameters<ConnectionLogStore['append']>) => {
          const [records, usage] = args;
          seen.push({ records: records.length, rollups: usage?.length ?? 0 });
          if (refuse(records.length, usage?.length ?? 0)) throw error();
          return t.append(...args);
        };
      const v = Reflect.get(t, p, t) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
  return { store: wrapped, seen };
}

async function billedDown(prefix: string, users: number): Promise<number> {
  const t0 = Math.floor(Date.now() / HOUR) * HOUR;
  const rows: UsageRollup[] = await log.usage({ granularity: 'hour', from: t0 - HOUR, to: t0 + 2 * HOUR });
  return rows.filter((r) => r.user.startsWith(prefix) && Number(r.user.slice(prefix.length)) < users).reduce((s, r) => s + r.bytesDown, 0);
}

function endMany(recorder: ConnectionLog, prefix: string, users: number, down: number): void {
  for (let i = 0; i < users; i++) {
    const c = recorder.open('socks5', '127.0.0.1');
    c.user = `${prefix}${i}`;
    c.bytes = { up: 1, down };
    c.end({ result: 'ok', reason: 'closed', up: 1, down });
  }
}

test('one flush interval of 1,200 customers with batchSize 100: no unit carries more than 200 rollup rows, all billed', async () => {
  const w = watched(
    log,
    () => false,
    () => new Error('never'),
  );
  const logger = captureLogger();
  const recorder = new ConnectionLog({
    store: w.store,
    batchSize: 100,
    flushIntervalMs: 3_600_000,
    checkpointMs: 3_600_000,
    logger: logger.logger,
  });
  endMany(recorder, 'wide', 1200, 1000);
  await recorder.flush();
  await recorder.close();
  assert.doesNotMatch(
    logger.text(),
    /did not take before the stop|could not be stored/,
    'a stop after every write landed reports nothing lost',
  );
  const most = Math.max(...w.seen.map((s) => s.rollups));
  assert.ok(most <= 200, `a unit carried ${most} rollup rows (the bound: 200)`);
  assert.equal(
    w.seen.reduce((s, u) => s + u.rollups, 0),
    2400,
    'every hour and day row was written once',
  );
  assert.equal(await billedDown('wide', 1200), 1_200_000);
});

test('a unit the store fails for a reason of its own (a RangeError) is split until written: every byte billed, no retry loop', async () => {
  // The store fails every unit of more than 50 rollup rows as the Redis driver's spread did past ~12,000.
  const w = watched(
    log,
    (_records, rollups) => rollups > 50,
    () =>
      new StoreUnavailableError('connlog append: redis unavailable: Maximum call stack size exceeded', {
        cause: new RangeError('Maximum call stack size exceeded'),
      }),
  );
  const logger = captureLogger();
  const recorder = new ConnectionLog({
    store: w.store,
    batchSize: 500,
    flushIntervalMs: 3_600_000,
    checkpointMs: 3_600_000,
    logger: logger.logger,
  });
  endMany(recorder, 'split', 300, 2000);
  await recorder.flush();
  assert.equal(recorder.pending, 0, 'nothing is left waiting for a retry');
  await recorder.close();
  assert.equal(await billedDown('split', 300), 600_000, 'every customer billed once');
  const records = await log.query({ user: 'split7', limit: 10 });
  assert.equal(records.length, 1, "a customer's record is stored once");
  // 300 records + 600 rows in one unit; split while over 50 rows: a bounded number of writes, not a loop.
  assert.ok(w.seen.length < 64, `${w.seen.length} writes`);
  assert.ok(/reason of their own \(not an outage\)/.test(logger.text()), 'the split is logged as not an outage');
});

test('a single record the store always fails for a reason of its own is left out and logged; the rest is billed', async () => {
  let poisoned = 0;
  const poisoning = new Proxy(log, {
    get(t, p) {
      if (p === 'append')
        return async (...args: Parameters<ConnectionLogStore['append']>) => {
          if (args[0].some((r) => r.user === 'poison')) {
            poisoned++;
            throw new TypeError('Do not know how to serialize a BigInt');
          }
          return t.append(...args);
        };
      const v = Reflect.get(t, p, t) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
  const logger = captureLogger();
  const recorder = new ConnectionLog({ store: poisoning, flushIntervalMs: 3_600_000, checkpointMs: 3_600_000, logger: logger.logger });
  endMany(recorder, 'neighbour', 20, 3000);
  const c = recorder.open('socks5', '127.0.0.1');
  c.user = 'poison';
  c.end({ result: 'ok', reason: 'closed', up: 0, down: 0 });
  await recorder.flush();
  await recorder.close();
  assert.equal(await billedDown('neighbour', 20), 60_000, 'the other customers are billed');
  assert.ok(poisoned < 16, `the poisoned record was tried ${poisoned} times`);
  assert.ok(/left out of the log and the bill/.test(logger.text()), 'the record left out is logged');
});

test('an outage is not mistaken for an error of our own', () => {
  assert.equal(notTransient(new StoreUnavailableError('connlog append: redis unavailable: Command timed out')), false);
  assert.equal(
    notTransient(
      new StoreError(
        'STORE_FAILED',
        "connlog append: redis refused: OOM command not allowed when used memory > 'maxmemory'. script: x, on @user_script:3.",
      ),
    ),
    false,
  );
  assert.equal(notTransient(Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' })), false);
  assert.equal(
    notTransient(
      new StoreUnavailableError('x: redis unavailable: Maximum call stack size exceeded', {
        cause: new RangeError('Maximum call stack size exceeded'),
      }),
    ),
    true,
  );
  const lua = Object.assign(new Error('ERR user_script:12: attempt to compare nil with number script: 1f0e, on @user_script:12.'), {});
  assert.equal(notTransient(new StoreError('STORE_FAILED', 'connlog append: redis refused', { cause: lua })), true);
});

test("the halves of a split unit are written before the units behind them, whose ids follow theirs: the store takes a writer's batches in order", async () => {
  // The store keeps one mark per writer, the highest batch number it took (src/store/batch-marks.ts): a unit waiting
  // behind a split one (the other half of an earlier split) must be numbered after the new halves, or it is taken
  // for a write that landed before and skipped. The poisoned record first: its half splits again, the other waits.
  const poisoning = new Proxy(log, {
    get(t, p) {
      if (p === 'append')
        return async (...args: Parameters<ConnectionLogStore['append']>) => {
          if (args[0].some((r) => r.user === 'poison-first')) throw new TypeError('Do not know how to serialize a BigInt');
          return t.append(...args);
        };
      const v = Reflect.get(t, p, t) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
  const logger = captureLogger();
  const recorder = new ConnectionLog({ store: poisoning, flushIntervalMs: 3_600_000, checkpointMs: 3_600_000, logger: logger.logger });
  const c = recorder.open('socks5', '127.0.0.1');
  c.user = 'poison-first';
  c.end({ result: 'ok', reason: 'closed', up: 0, down: 0 });
  endMany(recorder, 'behind', 20, 3000);
  await recorder.flush();
  await recorder.close();
  assert.equal(await billedDown('behind', 20), 60_000, 'every customer behind the poisoned record is billed');
  assert.equal((await log.query({ user: 'behind19', limit: 10 })).length, 1);
});
