// One flush interval in which 8,000 customers each end a connection, on Redis: every byte billed. The rollup
// increments taken since the last write were one unit (not bounded like the records and checkpoints), and the Redis
// driver passed it as one spread call (8 arguments per rollup row): past ~7,000 customers the call threw "Maximum
// call stack size exceeded", reported as "redis unavailable"; the unit was held and retried, failed the same way
// every time, and nothing more was billed (0 of 80,000,000 bytes, 0 records). Now a unit carries at most
// 2 × batchSize rollup rows, the driver never spreads a list into a call, and such an error is told from an outage
// (test/connlog/unit-split.test.ts). Real recorder, real redis-server.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { ConnectionLog } from '../../src/connlog/index.ts';
import { openBackends, type Backends } from '../../src/store/index.ts';
import { testRedisUrl } from '../support/store.ts';

const HOUR = 3_600_000;
const CUSTOMERS = 8_000;
let backends: Backends;

before(async () => {
  backends = await openBackends(await testRedisUrl(), { prefix: `r12wide${randomBytes(4).toString('hex')}:` });
});
after(async () => {
  await backends?.close();
});

test('one flush interval in which 8,000 customers each end a connection: their bytes are billed', async () => {
  const log = backends.connectionLog({ maxRecords: 1_000_000 });
  const recorder = new ConnectionLog({ store: log, flushIntervalMs: 3_600_000, checkpointMs: 3_600_000, retry: { closeMs: 2_000 } });
  for (let i = 0; i < CUSTOMERS; i++) {
    const c = recorder.open('socks5', '127.0.0.1');
    c.user = `cust${i}`;
    c.bytes = { up: 100, down: 10_000 };
    c.end({ result: 'ok', reason: 'closed', up: 100, down: 10_000 });
  }
  await recorder.flush();
  await recorder.flush();
  await recorder.close();
  const t0 = Math.floor(Date.now() / HOUR) * HOUR;
  const rows = await log.usage({ granularity: 'hour', from: t0 - HOUR, to: t0 + 2 * HOUR });
  const down = rows.reduce((s, r) => s + r.bytesDown, 0);
  const records = (await log.query({ limit: 10 })).length;
  assert.equal(
    down,
    CUSTOMERS * 10_000,
    `billed ${down} of ${CUSTOMERS * 10_000} bytes down (${rows.length} rollup rows, ${records} records stored)`,
  );
});
