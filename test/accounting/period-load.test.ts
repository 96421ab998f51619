// Loading a quota period's stored usage into a user's meter (at start, on a period change, at a boundary) while
// other work runs: the flush (its writes, and in a fleet its re-read of the shared totals), traffic, and the
// fleet allowance's syncs. The store is real (SQLite or Redis, a real redis-server for the fleet); only the
// ORDER is injected: the period row's read waits at a gate until the test has run what it wants in between.
//
// Issue 15's "usedBytes doubled after a restart" (Redis, one loaded run): the daemon's flush timer runs
// before the users directory applies its users; the period meter was reset to 0, the flush's fleet re-read set
// it to the shared figure while the period row was being read, then the read's figure was ADDED to it: 2×.
import { test, describe, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Accounting } from '../../src/accounting/accounting.ts';
import { AllowanceLeaser } from '../../src/fleet/allowance.ts';
import { RedisAllowance } from '../../src/store/redis-fleet-allowance.ts';
import { openRedisStore, type Store } from '../../src/store/index.ts';
import { openTestStore } from '../support/store.ts';
import { redisMissing, RedisServer } from '../fleet/redis-server.ts';

const MiB = 1024 * 1024;
// Mid-November 2026, UTC: the month period's key is month:2026-11, the day's day:2026-11-15.
const T = Date.UTC(2026, 10, 15, 12, 0, 0);
const now = (): number => T;
const MONTH = 'keep1@month:2026-11';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function dbPath(): string {
  const dir = mkdtempSync(join(tmpdir(), 'rotor-period-load-'));
  dirs.push(dir);
  return join(dir, 'rotor.db');
}

/**
 * The real store, with the first read of `key`'s usage held until `open()`: `arrived` resolves when the
 * reader is waiting. The read itself happens after the gate opens (it sees everything written meanwhile).
 */
function gated(store: Store, key: string): { store: Store; arrived: Promise<void>; open: () => void } {
  let arrive!: () => void;
  const arrived = new Promise<void>((r) => (arrive = r));
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  let held = false;
  const proxy = new Proxy(store, {
    get(target, prop) {
      if (prop === 'getUsage') {
        return async (user: string) => {
          if (user === key && !held) {
            held = true;
            arrive();
            await opened;
          }
          return target.getUsage(user);
        };
      }
      const v: unknown = Reflect.get(target, prop, target);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { store: proxy, arrived, open };
}

describe('a period meter loads its stored usage exactly once', () => {
  test('one daemon: traffic and a flush while the period row is read count once (the store follows ROTOR_TEST_STORE)', async () => {
    const path = dbPath();
    const s1 = await openTestStore(path);
    const a1 = new Accounting({ store: s1, flushIntervalMs: 60_000, now });
    await a1.start([]);
    await a1.upsertUser({ name: 'keep1', limitBytes: 50 * MiB, period: 'month' });
    a1.meter('keep1').add(36, MiB + 800);
    const before = a1.get('keep1')!.usedBytes;
    await a1.close();
    await s1.close();

    // The restart: the directory applies the user while the flush and traffic go on.
    const real = await openTestStore(path);
    const g = gated(real, MONTH);
    const a2 = new Accounting({ store: g.store, flushIntervalMs: 60_000, now });
    await a2.start([]);
    const applying = a2.upsertUser({ name: 'keep1', limitBytes: 50 * MiB, period: 'month' });
    await g.arrived;
    a2.meter('keep1').add(0, 5000);
    await a2.flush();
    g.open();
    await applying;
    assert.equal(a2.get('keep1')!.usedBytes, before + 5000, 'stored usage plus the traffic counted while it was read, once');
    await a2.flush();
    assert.equal(a2.get('keep1')!.usedBytes, before + 5000);
    await a2.close();
    assert.equal((await real.getUsage(MONTH))?.usedBytes, before + 5000, 'the store holds each byte once');
    await real.close();
  });

  test("a period change carries the old period's unwritten bytes to its row once (day → month → total)", async () => {
    const store = await openTestStore(dbPath());
    const a = new Accounting({ store, flushIntervalMs: 60_000, now });
    await a.start([]);
    await a.upsertUser({ name: 'keep1', limitBytes: 50 * MiB, period: 'day' });
    a.meter('keep1').add(400, 600);
    await a.upsertUser({ name: 'keep1', limitBytes: 50 * MiB, period: 'month' });
    assert.equal(a.get('keep1')!.usedBytes, 0, 'a new month row starts at 0');
    a.meter('keep1').add(0, 2000);
    await a.upsertUser({ name: 'keep1', limitBytes: 50 * MiB, period: 'total' });
    a.meter('keep1').add(0, 30);
    await a.close();
    assert.equal((await store.getUsage('keep1@day:2026-11-15'))?.usedBytes, 1000);
    assert.equal((await store.getUsage(MONTH))?.usedBytes, 2000);
    assert.equal((await store.getUsage('keep1'))?.usedBytes, 30);
    await store.close();
  });
});

describe('a deleted user\'s usage history (README "Users as data", Deleting)', () => {
  test('stays in the store, and a user created again under the name continues from it, also after a restart', async () => {
    const path = dbPath();
    const store = await openTestStore(path);
    const a = new Accounting({ store, flushIntervalMs: 60_000, now });
    await a.start([]);
    await a.upsertUser({ name: 'keep1', limitBytes: 50 * MiB, period: 'month' });
    a.meter('keep1').add(0, 7000);
    a.removeUser('keep1');
    assert.equal(a.get('keep1'), undefined, 'gone from the users');
    await a.flush();
    assert.equal((await store.getUsage(MONTH))?.usedBytes, 7000, 'its period row stays');
    await a.upsertUser({ name: 'keep1', limitBytes: 50 * MiB, period: 'month' });
    assert.equal(a.get('keep1')!.usedBytes, 7000, 'the same name continues the period');
    await a.close();
    await store.close();
    const again = await openTestStore(path);
    const b = new Accounting({ store: again, flushIntervalMs: 60_000, now });
    await b.start([]);
    await b.upsertUser({ name: 'keep1', limitBytes: 50 * MiB, period: 'month' });
    assert.equal(b.get('keep1')!.usedBytes, 7000);
    await b.close();
    await again.close();
  });
});

describe('a period meter loads its stored usage exactly once, in a fleet', { skip: redisMissing }, () => {
  const server = new RedisServer();
  before(async () => {
    await server.start();
  });
  after(() => server.stop());

  async function daemon(prefix: string, instance: string, wrap?: (s: Store) => Store) {
    const real = await openRedisStore(server.url, { prefix });
    // As in src/main.ts: the allowance shares the store's connection.
    const leaser = new AllowanceLeaser(new RedisAllowance(real.connection, prefix), { instance, sliceBytes: 64 * MiB, now });
    const accounting = new Accounting({ store: wrap ? wrap(real) : real, allowance: leaser, flushIntervalMs: 60_000, now });
    await accounting.start([]);
    const close = async (): Promise<void> => {
      await accounting.close();
      await leaser.close();
      await real.close();
    };
    return { real, leaser, accounting, close };
  }

  test('a restart whose flush re-reads the shared totals while the period row is read shows the usage once, not twice', async () => {
    const prefix = `pl${process.pid}:`;
    const first = await daemon(prefix, 'A');
    await first.accounting.upsertUser({ name: 'keep1', limitBytes: 50 * MiB, period: 'month' });
    first.accounting.meter('keep1').add(36, 1_048_800);
    const before = first.accounting.get('keep1')!.usedBytes;
    assert.equal(before, 1_048_836);
    await first.close();

    let g!: ReturnType<typeof gated>;
    const second = await daemon(prefix, 'A2', (s) => (g = gated(s, MONTH)).store);
    const applying = second.accounting.upsertUser({ name: 'keep1', limitBytes: 50 * MiB, period: 'month' });
    await g.arrived;
    // While the row is read: the flush timer's run (its fleet re-read of the shared totals) ...
    await second.accounting.flush();
    g.open();
    await applying;
    assert.equal(second.accounting.get('keep1')!.usedBytes, before, 'usage after the restart equals usage before it');

    // ... and the same with traffic whose refill moves it into the shared row during the read.
    const third = await daemon(prefix, 'A3', (s) => (g = gated(s, MONTH)).store);
    await second.close();
    const again = third.accounting.upsertUser({ name: 'keep1', limitBytes: 50 * MiB, period: 'month' });
    await g.arrived;
    third.accounting.meter('keep1').add(0, 5000);
    // The chunk only asks; the fleet starts the refill in a task of its own (accounting/allowance-share.ts).
    await new Promise((resolve) => setImmediate(resolve));
    const refill = third.leaser.user(MONTH).syncing;
    assert.ok(refill, 'spending from an empty slice started a refill');
    await refill;
    await third.accounting.flush();
    g.open();
    await again;
    assert.equal(third.accounting.get('keep1')!.usedBytes, before + 5000);
    await third.accounting.flush();
    assert.equal(third.accounting.get('keep1')!.usedBytes, before + 5000, 'the next flush agrees');
    await third.close();
    const check = await openRedisStore(server.url, { prefix });
    assert.equal((await check.getUsage(MONTH))?.usedBytes, before + 5000, 'the shared row holds each byte once');
    await check.close();
  });
});

describe('applying a user again', () => {
  test('with the same limit is not a limit change (no event, no store write); a new limit is one', async () => {
    const store = await openTestStore(dbPath());
    const a = new Accounting({ store, flushIntervalMs: 60_000, now });
    await a.start([]);
    const changes: number[] = [];
    a.onLimitChange((c) => changes.push(c.limitBytes));
    await a.upsertUser({ name: 'keep1', limitBytes: 50 * MiB, period: 'month' });
    let limitWrites = 0;
    const setLimit = store.setLimit.bind(store);
    store.setLimit = async (user, bytes) => {
      limitWrites++;
      return setLimit(user, bytes);
    };
    // A PATCH of something else (rate, rules) applies the user again with the same limit and period.
    await a.upsertUser({ name: 'keep1', limitBytes: 50 * MiB, period: 'month' });
    assert.deepEqual(changes, []);
    assert.equal(limitWrites, 0);
    await a.upsertUser({ name: 'keep1', limitBytes: 60 * MiB, period: 'month' });
    assert.deepEqual(changes, [60 * MiB]);
    assert.ok(limitWrites >= 1);
    assert.equal(a.get('keep1')?.limitBytes, 60 * MiB);
    await a.close();
    await store.close();
  });
});
