// A checkpoint of many open connections (every second of a stop's drain, every checkpointMs otherwise) is written
// batchSize records at a time, not as one store write of every open connection: each unit is one Redis script or
// one SQLite transaction, and one of 50,000 records would hold the store (and the fleet's Redis) for its length.
// Every open record and its bytes still reach the store. Against the test store (SQLite, or Redis with
// ROTOR_TEST_STORE=redis), through the real recorder.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ConnectionLog, connectionLogStoreFor, type ConnectionLogStore } from '../../src/connlog/index.ts';
import type { Store } from '../../src/store/index.ts';
import { openTestStore } from '../support/store.ts';

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

test('a checkpoint of 35 open connections is written 10 records at a time, every one of them billed', async () => {
  const sizes: number[] = [];
  const counting = new Proxy(log, {
    get(t, p, r) {
      if (p === 'append')
        return (...args: Parameters<ConnectionLogStore['append']>) => {
          sizes.push(args[0].length);
          return t.append(...args);
        };
      const v = Reflect.get(t, p, r) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
  const recorder = new ConnectionLog({ store: counting, flushIntervalMs: 3_600_000, checkpointMs: 3_600_000, batchSize: 10 });
  const open = Array.from({ length: 35 }, (_, i) => {
    const c = recorder.open('socks5', '127.0.0.1');
    c.user = 'units';
    c.bytes = { up: 1, down: 1000 + i };
    return c;
  });
  recorder.checkpoint();
  await recorder.flush();
  assert.ok(sizes.length >= 4 && sizes.every((n) => n <= 10), `appends of ${JSON.stringify(sizes)} records`);
  assert.equal(
    sizes.reduce((a, b) => a + b, 0),
    35,
  );
  const t0 = Math.floor(Date.now() / HOUR) * HOUR;
  const rows = await log.usage({ granularity: 'hour', from: t0 - HOUR, to: t0 + 2 * HOUR, user: 'units' });
  assert.equal(
    rows.reduce((s, r) => s + r.bytesDown, 0),
    open.reduce((s, _c, i) => s + 1000 + i, 0),
  );
  open.forEach((c, i) => c.end({ result: 'ok', reason: 'closed', up: 1, down: 1000 + i }));
  await recorder.close();
  assert.equal((await log.query({ user: 'units', limit: 100 })).filter((r) => r.result === 'ok').length, 35);
});
