// A batch's sub accounts against a real sandbox over HTTP (real client, real encryption, a real SQLite store):
// how many run at once is a window (src/users/sub-account.ts CallWindow) that grows while the platform answers
// and halves when it answers like an overloaded one. Against a platform 100 ms away a batch reaches 64 calls at
// once (never more); against one that refuses more than 8 calls at once (code 500) every row is still made,
// the refused calls retried, and the window comes down to what the platform takes.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Accounting } from '../../src/accounting/accounting.ts';
import { ProductCatalog } from '../../src/accounting/products.ts';
import { PlatformClient } from '../../src/platform/client.ts';
import { startSimulator, SIM_PRODUCTS, type Simulator } from '../../src/sim/index.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import { createBatch } from '../../src/users/bulk.ts';
import { Users } from '../../src/users/directory.ts';
import { SUB_ACCOUNT_WINDOW_MAX, SubAccounts } from '../../src/users/sub-account.ts';

describe("a batch's sub accounts through the window", () => {
  let sim: Simulator;
  before(async () => {
    sim = await startSimulator({ latencyMs: 20, upstreams: false });
  });
  after(async () => {
    await sim?.close();
  });

  async function batch(
    rows: number,
    prefix: string,
  ): Promise<{ answer: Awaited<ReturnType<typeof createBatch>>; subs: SubAccounts; store: SqliteStore }> {
    const client = new PlatformClient({
      baseUrl: sim.baseUrl,
      appKey: sim.appKey,
      appSecret: sim.appSecret,
      // A loaded machine delays the sandbox's 20 ms timers: room for a call refused in a cut's round.
      retries: 5,
      backoff: { baseMs: 20, maxMs: 200 },
    });
    const store = new SqliteStore(':memory:');
    const accounting = new Accounting({ store, flushIntervalMs: 3_600_000 });
    const subs = new SubAccounts(client, new ProductCatalog({ client }));
    const users = new Users({ store, accounting, platform: subs, sweepMs: 3_600_000 });
    try {
      await accounting.start([]);
      await users.start([]);
      const input = Array.from({ length: rows }, (_, i) => ({
        name: `${prefix}${String(i).padStart(4, '0')}`,
        mainAccount: 'shop1',
        product: SIM_PRODUCTS.dynamicTraffic,
        quota: { bytes: 10_000_000_000, period: 'month' },
      }));
      // More rows at once than the window's most: the window, not the batch, decides.
      const answer = await createBatch(users, input, { concurrency: 4 * SUB_ACCOUNT_WINDOW_MAX });
      return { answer, subs, store };
    } finally {
      await users.close();
      await accounting.close();
      client.close();
    }
  }

  const subsOnPlatform = (prefix: string): number =>
    sim.inspect
      .accounts()
      .flatMap((m) => m.subs)
      .filter((s) => s.appUsername.startsWith(prefix)).length;

  test('a platform 100 ms away: up to 64 sub-account calls at once, never more, every row made', async () => {
    const peakBefore = sim.inspect.inFlight().peak;
    assert.ok(peakBefore <= 1, 'nothing ran before');
    // 100 ms here: 64 calls in flight are 640 calls a second, which this process (client and sandbox in one)
    // keeps up with on a loaded machine; at 20 ms it is 3,200 a second and the calls queue before the sandbox.
    sim.faults.set({ latencyMs: 100 });
    const { answer, store } = await batch(400, 'w').finally(() => sim.faults.set({ latencyMs: 20 }));
    assert.deepEqual(answer.errors, []);
    assert.equal(answer.created, 400);
    const { peak, refused } = sim.inspect.inFlight();
    assert.equal(refused, 0);
    // 16 at first, one more per call answered: the window reaches its most within the first ~50 answers.
    assert.ok(peak > 32 && peak <= SUB_ACCOUNT_WINDOW_MAX, `at most ${peak} calls at once`);
    assert.equal(subsOnPlatform('w'), 400);
    const stored = await store.listUsers();
    assert.equal(stored.filter((s) => s.state === 'ready').length, 400);
    await store.close();
  });

  test('a platform that takes 8 calls at once: every row made, the refusals retried, the window down to it', async () => {
    sim.faults.set({ maxInFlight: 8 });
    try {
      const { answer, subs, store } = await batch(300, 'z');
      assert.deepEqual(answer.errors, [], 'no row failed');
      assert.equal(answer.created, 300);
      const { refused } = sim.inspect.inFlight();
      assert.ok(refused > 0, 'the platform did refuse calls beyond 8');
      // Halved at each strain (once per round), grown by one per round: it hovers at what the platform takes.
      assert.ok(subs.windowLimit <= 12, `window ${subs.windowLimit} after the batch`);
      assert.equal(subsOnPlatform('z'), 300);
      const stored = await store.listUsers();
      assert.equal(stored.filter((s) => s.state === 'ready').length, 300);
      await store.close();
    } finally {
      sim.faults.set({ maxInFlight: null });
    }
  });
});
