// accounts.batchConcurrency bounds a batch's sub-account calls at once in the daemon as users run it: the
// sub accounts' window (src/users/sub-account.ts) grows up to it, not to its own default most (64). A real
// daemon on its embedded sandbox (real HTTP, real encryption), the sandbox 100 ms away, POST /v1/users/batch of
// 120 rows: the sandbox's own count of calls in flight stays at or below the setting.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startGateway, type Gateway } from './harness.ts';

const LIMIT = 6;

let gw: Gateway;
before(async () => {
  gw = await startGateway({ config: { accounts: { batchConcurrency: LIMIT } } });
});
after(async () => {
  await gw?.close();
});

test('a batch against a platform 100 ms away runs at most accounts.batchConcurrency sub-account calls at once', async () => {
  const sim = gw.daemon.sim!;
  sim.faults.set({ latencyMs: 100 });
  const peakBefore = sim.inspect.inFlight().peak;
  assert.ok(peakBefore <= LIMIT, `the start alone had ${peakBefore} calls at once`);
  const rows = Array.from({ length: 120 }, (_, i) => ({ name: `bw${i}`, mainAccount: 'shop1' }));
  const res = await gw.admin<{ created: number; errors: unknown[] }>('/v1/users/batch', { body: { users: rows } });
  sim.faults.set({ latencyMs: 0 });
  assert.equal(res.status, 200);
  assert.deepEqual(res.body.errors, []);
  assert.equal(res.body.created, 120);
  const { peak } = sim.inspect.inFlight();
  // The window's own default would reach well past 16 here (one more per answer, 120 rows).
  assert.ok(peak <= LIMIT, `${peak} calls at once (accounts.batchConcurrency ${LIMIT})`);
  assert.ok(peak >= LIMIT - 1, `${peak} calls at once: the window did not open`);
});
