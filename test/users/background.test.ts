// 10,000 users and the background rounds (issue 15): what runs on a timer looks at what changed, not at every
// user. Accounting's change feed and flush (real SQLite store), the per-user series' incremental choice
// against a full ranking, the platform limit sync's timer pass against the real sandbox platform, and the
// users directory's expiry queue.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Accounting } from '../../src/accounting/accounting.ts';
import { PlatformLimitSync } from '../../src/accounting/platform-sync.ts';
import { ProductCatalog } from '../../src/accounting/products.ts';
import { PlatformClient } from '../../src/platform/client.ts';
import { startSimulator, SIM_PRODUCTS, type Simulator } from '../../src/sim/index.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import { createMetrics } from '../../src/telemetry/metrics.ts';
import { Users } from '../../src/users/directory.ts';
import { DueQueue } from '../../src/users/due-queue.ts';
import { hashPasswordAsync } from '../../src/admission/password.ts';
import { boundUserSeries } from '../../src/users/series.ts';
import { poll } from '../support/wait.ts';

const DAY = 86_400_000;

async function accountingWith(count: number, now: () => number) {
  const store = new SqliteStore(':memory:');
  const written: { user: string; bytes: number }[][] = [];
  const addUsage = store.addUsage.bind(store);
  // Observed, not replaced: every flush's batch is recorded, then written to the real store.
  store.addUsage = async (deltas) => {
    written.push(deltas.map((d) => ({ ...d })));
    return addUsage(deltas);
  };
  const accounting = new Accounting({ store, flushIntervalMs: 3_600_000, now });
  await accounting.start([]);
  for (let i = 0; i < count; i++)
    await accounting.upsertUser({ name: `u${i}`, limitBytes: 1_000_000, period: i % 2 === 0 ? 'day' : 'total' });
  return { store, accounting, written };
}

describe('accounting: only what changed', () => {
  test('with 10,000 users a flush writes only the meters that moved; the feed gives each consumer only those; a day boundary still rolls', async () => {
    let now = Date.parse('2026-11-24T10:00:00Z');
    const { store, accounting, written } = await accountingWith(10_000, () => now);
    try {
      const feed = accounting.changeFeed();
      assert.equal(feed.take().length, 10_000, 'the first take gives every meter');
      assert.deepEqual(feed.take(), [], 'nothing moved since');
      await accounting.flush();
      written.length = 0;
      await accounting.flush();
      assert.equal(written.length, 0, 'an idle flush writes nothing');

      accounting.meter('u7').add(100, 200);
      accounting.meter('u7').add(1, 2);
      accounting.meter('u8').add(0, 50);
      assert.deepEqual(
        feed
          .take()
          .map((m) => m.name)
          .sort(),
        ['u7', 'u8'],
      );
      await accounting.flush();
      assert.equal(written.length, 1);
      assert.deepEqual(
        written[0]!.sort((a, b) => (a.user < b.user ? -1 : 1)),
        [
          { user: 'u7', bytes: 303 },
          { user: 'u8@day:2026-11-24', bytes: 50 },
        ],
        'the two that moved, under their period keys',
      );
      assert.deepEqual(feed.take(), []);
      // A second feed is independent of the first.
      const other = accounting.changeFeed();
      assert.equal(other.take().length, 10_000);
      accounting.meter('u9').add(1, 0);
      assert.deepEqual(
        feed.take().map((m) => m.name),
        ['u9'],
      );
      assert.deepEqual(
        other.take().map((m) => m.name),
        ['u9'],
      );

      // The next day: the flush rolls the 5,000 day-quota meters to the new period (usage back to 0).
      now += DAY;
      await accounting.flush();
      assert.equal(accounting.get('u8')?.usedBytes, 0);
      assert.equal(accounting.periodKeyOf('u8'), 'day:2026-11-25');
      assert.equal(accounting.get('u9')?.usedBytes, 1, 'a total quota does not roll');
      assert.equal(feed.take().length, 5_000, 'every rolled meter is a change');
      // A limit change is a change too (a threshold can be crossed without traffic).
      await accounting.setLimit('u11', 10);
      assert.deepEqual(
        feed.take().map((m) => m.name),
        ['u11'],
      );
    } finally {
      await accounting.close();
      await store.close();
    }
  });
});

describe('per-user series: the incremental choice is the full ranking', () => {
  test('over rounds of random traffic, removals and marks, the chosen users are the busiest (marked first)', async () => {
    const now = Date.parse('2026-11-24T10:00:00Z');
    const { store, accounting } = await accountingWith(2_000, () => now);
    try {
      let marked = new Set<string>(['u1999']);
      const metrics = createMetrics({ defaultMetrics: false });
      const pick = boundUserSeries({ metrics, source: accounting, marked: () => marked, max: 50 });
      let seed = 42;
      const random = (n: number): number => {
        seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
        return seed % n;
      };
      const removed = new Set<string>();
      for (let round = 0; round < 40; round++) {
        for (let i = 0; i < 30; i++) accounting.meter(`u${random(2_000)}`).add(random(1000) + 1, random(1000));
        if (round === 10) {
          accounting.removeUser('u5');
          removed.add('u5');
        }
        if (round === 20) marked = new Set([...marked, 'u3']);
        const chosen = pick().map((r) => r.name);
        const all = [...accounting.snapshot()].filter((r) => !removed.has(r.name));
        const bytes = new Map(all.map((r) => [r.name, r.up + r.down]));
        const busiest = (rows: typeof all) => rows.sort((a, b) => b.up + b.down - (a.up + a.down));
        const expected = [...busiest(all.filter((r) => marked.has(r.name))), ...busiest(all.filter((r) => !marked.has(r.name)))].slice(
          0,
          50,
        );
        // Ties may come in either order: compare the byte counts rank by rank, and the marked ones by name.
        assert.deepEqual(
          chosen.map((n) => bytes.get(n)),
          expected.map((r) => r.up + r.down),
          `round ${round}`,
        );
        for (const name of marked) assert.ok(chosen.includes(name), `marked ${name} chosen in round ${round}`);
        assert.ok(!chosen.includes('u5') || round < 10, 'a removed user leaves the set');
      }
    } finally {
      await accounting.close();
      await store.close();
    }
  });
});

describe('platform limit sync: the timer pass', () => {
  let sim: Simulator;
  let client: PlatformClient;
  before(async () => {
    sim = await startSimulator({});
    client = new PlatformClient({ baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret, retries: 0, timeoutMs: 5000 });
  });
  after(async () => {
    client.close();
    await sim.close();
  });

  test('start looks at every user; a timer pass at the users whose usage moved and the next 100 of the others in turn', async () => {
    const now = Date.parse('2026-11-24T10:00:00Z');
    const { store, accounting } = await accountingWith(250, () => now);
    const sync = new PlatformLimitSync({ client, accounting, products: new ProductCatalog({ client }), intervalMs: 3_600_000 });
    const users = Array.from({ length: 250 }, (_, i) => ({ name: `u${i}`, product: SIM_PRODUCTS.dynamicTraffic }));
    sync.setUsers(users);
    const visited = (results: { user: string }[]) => results.map((r) => r.user);
    const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => `u${from + i}`);
    try {
      assert.deepEqual(visited(await sync.start()), range(0, 250));
      accounting.meter('u200').add(10, 10);
      assert.deepEqual(visited(await sync.reconcileDue()), ['u200', ...range(0, 100)]);
      assert.deepEqual(visited(await sync.reconcileDue()), range(100, 200));
      // A list rebuilt (users changed) goes on where the turn was; the turn wraps round.
      sync.setUsers(users);
      assert.deepEqual(visited(await sync.reconcileDue()), [...range(200, 250), ...range(0, 50)]);
      assert.deepEqual(visited(await sync.reconcile()), range(0, 250), 'a reload still looks at everyone');
      // Changes arrive one by one (O(changes), not a rebuilt list): a new user joins the turn, a removed one leaves it.
      sync.updateUsers([{ name: 'x1', product: SIM_PRODUCTS.dynamicTraffic }], ['u60']);
      const all = visited(await sync.reconcile());
      assert.equal(all.length, 250);
      assert.ok(all.includes('x1') && !all.includes('u60'));
    } finally {
      await sync.stop();
      await accounting.close();
      await store.close();
    }
  });
});

describe('users directory: expiries come out of a queue', () => {
  test('DueQueue gives what is due, earliest first', () => {
    const q = new DueQueue();
    for (const [at, name] of [
      [50, 'e'],
      [10, 'a'],
      [30, 'c'],
      [20, 'b'],
      [40, 'd'],
      [10, 'a2'],
    ] as const)
      q.push(at, name);
    assert.deepEqual(q.popDue(5), []);
    assert.deepEqual(
      q.popDue(30).map((d) => d.at),
      [10, 10, 20, 30],
    );
    assert.equal(q.size, 2);
    assert.deepEqual(
      q.popDue(1000).map((d) => d.name),
      ['d', 'e'],
    );
  });

  test('each expiry is announced once when it comes, a moved expiry again, a removed user never', async () => {
    let now = Date.parse('2026-11-24T10:00:00Z');
    const store = new SqliteStore(':memory:');
    const accounting = new Accounting({ store, flushIntervalMs: 3_600_000 });
    await accounting.start([]);
    const hash = await hashPasswordAsync('pw');
    const iso = (t: number) => new Date(t).toISOString();
    for (let i = 0; i < 1_000; i++) {
      await store.putUser({
        name: `u${i}`,
        data: { name: `u${i}`, mainAccount: 'shop1', source: 'api', createdAt: 0, expiresAt: i < 3 ? iso(now + (i + 1) * 60_000) : null },
        passwordHash: hash,
        state: 'ready',
      });
    }
    const users = new Users({ store, accounting, platform: { ensure: async () => undefined }, sweepMs: 3_600_000, now: () => now });
    const announced: string[] = [];
    users.onExpired((user, at) => announced.push(`${user}@${iso(at)}`));
    await users.start([]);
    try {
      now += 90_000; // u0 (1 min) is due, u1 (2 min) and u2 (3 min) are not
      await poll(() => announced.length >= 1, { what: 'u0 announced', timeoutMs: 5000 });
      assert.deepEqual(announced, [`u0@${iso(now - 30_000)}`]);
      await users.patch('u1', { expiresAt: iso(now + 3_600_000) });
      await users.remove('u2');
      await users.patch('u0', { expiresAt: iso(now - 1000) });
      now += 200_000; // u1's old expiry and u2's have passed: neither is announced
      await poll(() => announced.length >= 2, { what: 'u0 announced again', timeoutMs: 5000 });
      now += 3_600_000;
      await poll(() => announced.length >= 3, { what: 'u1 announced', timeoutMs: 5000 });
      // u1's old expiry and u2's came out of the queue before u1's new one: had they been announced, they
      // would be here.
      assert.deepEqual(
        announced.map((a) => a.split('@')[0]),
        ['u0', 'u0', 'u1'],
      );
    } finally {
      await users.close();
      await accounting.close();
      await store.close();
    }
  });
});
