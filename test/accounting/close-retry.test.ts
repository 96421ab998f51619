// Accounting.close() is the stop's last flush of the meters (README: "a graceful stop writes everything"). A
// flush that fails keeps its deltas for the next flush; at the stop there is none, so the stop tries again a few
// times within its bound, and what it still cannot write is logged by user with the bytes. Real SQLite file whose
// addUsage fails as a timed-out store call does.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Accounting } from '../../src/accounting/accounting.ts';
import { StoreUnavailableError } from '../../src/store/errors.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import { captureLogger } from '../support/logger.ts';

const dir = mkdtempSync(join(tmpdir(), 'rotor-acct-close-'));
after(() => rmSync(dir, { recursive: true, force: true }));

class FailingStore extends SqliteStore {
  failures = 0;
  attempts = 0;
  override async addUsage(...args: Parameters<SqliteStore['addUsage']>) {
    this.attempts++;
    if (this.failures > 0) {
      this.failures--;
      throw new StoreUnavailableError('usage: command timed out');
    }
    return super.addUsage(...args);
  }
}

async function usedAfterRestart(file: string): Promise<number | undefined> {
  const again = new SqliteStore(file);
  const next = new Accounting({ store: again, flushIntervalMs: 3_600_000 });
  await next.start([{ name: 'alice', limitBytes: 10_000_000 }]);
  const used = next.get('alice')?.usedBytes;
  await next.close();
  await again.close();
  return used;
}

for (const failures of [1, 3]) {
  test(`a stop whose last flush fails ${failures} time(s): the meter's bytes are written, not dropped`, async () => {
    const file = join(dir, `rotor-${failures}.db`);
    const store = new FailingStore(file);
    const accounting = new Accounting({ store, flushIntervalMs: 3_600_000 });
    await accounting.start([{ name: 'alice', limitBytes: 10_000_000 }]);
    accounting.meter('alice').add(100_000, 2_000_000);
    store.failures = failures;
    await accounting.close();
    await store.close();
    const used = await usedAfterRestart(file);
    assert.equal(used, 2_100_000, `after the restart alice has ${used} B used of the 2,100,000 metered before the stop`);
  });
}

test('a stop whose store never answers gives up within its bound and logs the bytes by user', async () => {
  const file = join(dir, 'rotor-down.db');
  const store = new FailingStore(file);
  const { logger, text } = captureLogger('info');
  const accounting = new Accounting({ store, flushIntervalMs: 3_600_000, logger });
  await accounting.start([{ name: 'alice', limitBytes: 10_000_000 }]);
  accounting.meter('alice').add(100_000, 2_000_000);
  store.failures = Infinity;
  const started = Date.now();
  await accounting.close();
  const ms = Date.now() - started;
  await store.close();
  assert.ok(store.attempts >= 3, `${store.attempts} write attempts at the stop`);
  assert.ok(ms < 10_000, `the stop took ${ms} ms`);
  const line = text()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { level: number; msg: string; bytes?: number; byUser?: { user: string; bytes: number }[] })
    .find((l) => l.msg.startsWith('traffic counters not written at stop'));
  assert.ok(line, text());
  assert.equal(line.level, 50);
  assert.equal(line.bytes, 2_100_000);
  assert.deepEqual(line.byUser, [{ user: 'alice', bytes: 2_100_000 }]);
});
