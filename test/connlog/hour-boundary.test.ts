// Open connections are checkpointed at every hour boundary of the recorder's clock, their bytes so far counted in
// the hour (and day) that ends: an hour's row holds the bytes relayed in it, also for a connection that spans the
// boundary, not only to the last checkpointMs checkpoint before it (with the default 60 s, up to a minute of every
// open connection's bytes went into the next hour, day and month). A timer brings the boundary; the first
// connection opened or ended past it does when the timer is late or the clock jumped. Against the test store
// (SQLite, or Redis with ROTOR_TEST_STORE=redis), through the real recorder with an injected clock.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ConnectionLog, connectionLogStoreFor, type ConnectionLogStore } from '../../src/connlog/index.ts';
import type { Store } from '../../src/store/index.ts';
import { openTestStore } from '../support/store.ts';
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

async function hourDown(user: string, hour: number): Promise<number> {
  const rows = await log.usage({ granularity: 'hour', from: hour, to: hour + HOUR, user });
  return rows.reduce((s, r) => s + r.bytesDown, 0);
}

test('the hour timer: bytes relayed before the boundary are in the hour that ended, those after in the next', async () => {
  // The recorder's clock 400 ms before an hour boundary; real time runs it on.
  const boundary = (Math.floor(Date.now() / HOUR) + 5) * HOUR;
  const offset = boundary - 400 - Date.now();
  const now = () => Date.now() + offset;
  const recorder = new ConnectionLog({ store: log, now, flushIntervalMs: 20, checkpointMs: 3_600_000 });
  try {
    const c = recorder.open('socks5', '127.0.0.1');
    c.user = 'spans';
    const bytes = { up: 10, down: 1000 };
    c.bytes = bytes;
    // No connection opens or ends: the timer alone checkpoints at the boundary.
    await waitFor(
      async () => (await hourDown('spans', boundary - HOUR)) === 1000,
      10_000,
      'the hour that ended holds the bytes relayed in it',
    );
    assert.ok(now() >= boundary, 'not before the boundary');
    bytes.down += 500;
    c.end({ result: 'ok', reason: 'closed', up: bytes.up, down: bytes.down });
    await recorder.flush();
    assert.equal(await hourDown('spans', boundary - HOUR), 1000);
    assert.equal(await hourDown('spans', boundary), 500, 'the next hour holds the rest');
    const [rec] = await log.query({ user: 'spans', limit: 1 });
    assert.equal(rec?.bytesDown, 1500, 'the record holds every byte');
  } finally {
    await recorder.close();
  }
});

test('a clock that jumped past the boundary: the next connection opened puts the bytes so far in the hour that ended', async () => {
  let t = (Math.floor(Date.now() / HOUR) + 9) * HOUR - 10_000;
  const boundary = t + 10_000;
  const recorder = new ConnectionLog({ store: log, now: () => t, flushIntervalMs: 3_600_000, checkpointMs: 3_600_000 });
  try {
    const c = recorder.open('socks5', '127.0.0.1');
    c.user = 'jumped';
    const bytes = { up: 0, down: 4000 };
    c.bytes = bytes;
    t += 20_000; // past the boundary before its timer (10 s of real time away)
    recorder.open('socks5', '127.0.0.1').end({ result: 'client_abort' });
    bytes.down += 700;
    c.end({ result: 'ok', reason: 'closed', up: 0, down: bytes.down });
    await recorder.flush();
    assert.equal(await hourDown('jumped', boundary - HOUR), 4000, 'the bytes before the jump are in the hour that ended');
    assert.equal(await hourDown('jumped', boundary), 700);
  } finally {
    await recorder.close();
  }
});
