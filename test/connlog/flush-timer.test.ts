// The connection log's flush timer is armed by the first record queued, not kept running: an idle daemon
// has no flush timer to wake it. A record is still written within flushIntervalMs of being queued.
import { test, mock } from 'node:test';
import assert from 'node:assert/strict';
import { ConnectionLog, type ConnectionRecord } from '../../src/connlog/index.ts';
import type { RecordSink } from '../../src/connlog/types.ts';

const FLUSH_MS = 40;

/** A sink whose writes the test waits on. */
function sink(): RecordSink & { written: ConnectionRecord[][]; next(): Promise<ConnectionRecord[]> } {
  const waiting: Array<(b: ConnectionRecord[]) => void> = [];
  const s = {
    written: [] as ConnectionRecord[][],
    async write(records: readonly ConnectionRecord[]) {
      s.written.push([...records]);
      waiting.shift()?.([...records]);
    },
    async close() {},
    next: () => new Promise<ConnectionRecord[]>((resolve) => waiting.push(resolve)),
  };
  return s;
}

test('no flush timer while nothing is queued; the first record arms one, written within the interval', async (t) => {
  const timeouts = t.mock.method(globalThis, 'setTimeout');
  const intervals = t.mock.method(globalThis, 'setInterval');
  const flushTimers = () =>
    timeouts.mock.calls.filter((c) => c.arguments[1] === FLUSH_MS).length +
    intervals.mock.calls.filter((c) => c.arguments[1] === FLUSH_MS).length;
  // The log's timer is unref'd: something of the test's own keeps the process up while it waits.
  const keepAlive = setInterval(() => undefined, 60_000);
  const out = sink();
  const log = new ConnectionLog({ sinks: [out], flushIntervalMs: FLUSH_MS, refusals: { windowMs: 60_000 } });
  try {
    assert.equal(flushTimers(), 0, 'an idle log arms no flush timer');

    const written = out.next();
    const queuedAt = performance.now();
    const a = log.open('http');
    a.user = 'ann';
    a.end({ result: 'ok' });
    const b = log.open('socks5');
    b.user = 'ann';
    b.end({ result: 'ok' });
    assert.equal(flushTimers(), 1, 'one timer for the records queued together');
    const batch = await written;
    assert.equal(batch.length, 2);
    assert.ok(performance.now() - queuedAt >= FLUSH_MS - 5, 'written by the timer, not at once');
    assert.equal(log.pending, 0);

    // Written: nothing armed until the next record.
    assert.equal(flushTimers(), 1);
    const again = out.next();
    const c = log.open('http');
    c.user = 'bob';
    c.end({ result: 'ok' });
    assert.equal(flushTimers(), 2, 'the next record arms the next timer');
    assert.equal((await again)[0]!.user, 'bob');
  } finally {
    await log.close();
    clearInterval(keepAlive);
    mock.restoreAll();
  }
});
