// 10,000 users in the store: authentication stays O(1) and /metrics stays bounded. The users are written
// to the store (with one scrypt hash shared by all: hashing 10,000 distinct ones is what bench/users-scale.ts
// does through the API, at ~40 ms each) and loaded by the real users directory; the real Router authorizes
// against it, on the path that misses the router's credential cache (a new session id every call).
// The /metrics bound is read from the real prom-client registry after every user moved bytes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { Accounting } from '../../src/accounting/accounting.ts';
import { Router } from '../../src/proxy/router.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import { createMetrics } from '../../src/telemetry/metrics.ts';
import { Users } from '../../src/users/directory.ts';
import { UserGate } from '../../src/admission/users.ts';
import { hashPasswordAsync } from '../../src/admission/password.ts';
import { boundUserSeries } from '../../src/users/series.ts';
import { SessionTable } from '../../src/session/table.ts';

const noPlatform = { ensure: async () => undefined };

async function directoryOf(count: number, hash: string) {
  const store = new SqliteStore(':memory:');
  for (let i = 0; i < count; i++) {
    await store.putUser({
      name: `u${i}`,
      data: { name: `u${i}`, mainAccount: 'shop1', source: 'api', createdAt: 0, metrics: i === count - 1 },
      passwordHash: hash,
      state: 'ready',
    });
  }
  const metrics = createMetrics({ defaultMetrics: false });
  const accounting = new Accounting({ store, metrics, flushIntervalMs: 3_600_000 });
  await accounting.start([]);
  const users = new Users({ store, accounting, platform: noPlatform, sweepMs: 3_600_000 });
  await users.start([]);
  const router = new Router({
    users,
    meters: new UserGate(users.table, accounting),
    pools: {
      pool: () => ({
        acquire: async () => Promise.reject(new Error('unused')),
        release: () => {},
        reportFailure: () => {},
        reportSuccess: () => {},
        isUsable: () => false,
      }),
    },
    sessions: new SessionTable({ metrics }),
  });
  return { store, metrics, accounting, users, router };
}

/** Authorizations per second on the cache-missing path: user `name`, a new session id each call. */
function rate(router: Router, name: string, calls: number): number {
  const started = performance.now();
  for (let i = 0; i < calls; i++) {
    const a = router.authorize(`${name}-session-s${i}`, 'the-password');
    if (!a.ok) throw new Error(a.reason);
  }
  return calls / ((performance.now() - started) / 1000);
}

test(
  'authentication with 10,000 users costs what it costs with one; /metrics carries at most 4 × 100 per-user series',
  { timeout: 300_000 },
  async () => {
    const hash = await hashPasswordAsync('the-password');
    const one = await directoryOf(1, hash);
    const many = await directoryOf(10_000, hash);
    assert.equal(many.users.size, 10_000);
    // The first check of a user pays the scrypt hash once (on the thread pool); every later one is a digest compare.
    assert.ok((await one.router.authenticate('u0', 'the-password')).ok);
    assert.ok((await many.router.authenticate('u9999', 'the-password')).ok);
    rate(one.router, 'u0', 10);
    rate(many.router, 'u9999', 10);
    const samples: { one: number; many: number }[] = [];
    // Many short rounds, the two sides back to back in each: a loaded machine slows a stretch of time, and short
    // alternating rounds put both sides in every stretch (5 rounds of 20,000 calls read 0.364 once beside another
    // suite and stress-ng).
    for (let round = 0; round < 50; round++) samples.push({ one: rate(one.router, 'u0', 2_000), many: rate(many.router, 'u9999', 2_000) });
    // The best round of each: load only ever slows a round down.
    const best = (xs: number[]) => Math.max(...xs);
    const r1 = best(samples.map((s) => s.one));
    const rn = best(samples.map((s) => s.many));
    console.log(
      `# authorize (cache miss, new session id each), best of 50 rounds: 1 user ${Math.round(r1)}/s, 10,000 users ${Math.round(rn)}/s, ratio ${(rn / r1).toFixed(3)}`,
    );
    // A scan over the users would make 10,000 users thousands of times slower; what remains at a few
    // microseconds a call is the CPU cache of bigger maps and the machine's noise (quiet: 0.93-0.98).
    assert.ok(rn / r1 > 0.25, `ratio ${(rn / r1).toFixed(3)}`);

    // Every user moves bytes; the scrape holds at most 100 users' series, the marked user among them.
    for (let i = 0; i < 10_000; i++) many.accounting.meter(`u${i}`).add(i + 1, 1);
    boundUserSeries({ metrics: many.metrics, source: many.accounting, marked: () => many.users.marked(), max: 100 });
    const text = await many.metrics.registry.metrics();
    const perUser = text.split('\n').filter((l) => !l.startsWith('#') && /user="/.test(l));
    console.log(`# /metrics with 10,000 users: ${text.length} bytes, ${perUser.length} per-user series`);
    assert.ok(perUser.length <= 400, `${perUser.length} per-user series`);
    // The bound in bytes: every per-user sample, written with the longest user name there can be (32
    // characters), fits in 128 bytes, so the per-user part of a scrape is at most 4 × userSeriesMax × 128 =
    // 51,200 bytes at the default 100, and the whole scrape of this registry stays under 64 KiB.
    for (const line of perUser) {
      const name = /user="([^"]*)"/.exec(line)![1]!;
      assert.ok(line.length - name.length + 32 <= 128, `too long with a 32-character name: ${line}`);
    }
    assert.ok(text.length < 64 * 1024, `${text.length} bytes`);
    assert.ok(perUser.length >= 300, 'the busiest users are there');
    assert.ok(
      perUser.some((l) => l.includes('user="u9999"')),
      'the marked user is there',
    );
    assert.ok(
      perUser.some((l) => l.includes('user="u9998"')),
      'the busiest are there',
    );
    assert.ok(!perUser.some((l) => l.includes('user="u0"')), 'the least busy are not');
    for (const d of [one, many]) {
      await d.users.close();
      await d.accounting.close();
      await d.store.close();
    }
  },
);
