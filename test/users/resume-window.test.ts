// Unfinished creations resumed at a start, as `rotor users import --store` leaves them (src/users/store-import.ts
// writes every row as an intent): against a real sandbox over HTTP (real client, real encryption) and a real
// SQLite file, the intents' platform steps run many at once through the sub accounts' window, as a batch's rows
// do (one after another, 100,000 intents against a platform 20 ms away took ~45 min); a platform that takes
// fewer at once still gets every one made; a stop in the middle takes no new intent, loses none, and the next
// start finishes the rest with one sub account per user. A resumed creation creates first, as a batch row does:
// one read only when the platform answers that the name exists.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Accounting } from '../../src/accounting/accounting.ts';
import { ProductCatalog } from '../../src/accounting/products.ts';
import { PlatformClient } from '../../src/platform/client.ts';
import { startSimulator, SIM_PRODUCTS, type Simulator } from '../../src/sim/index.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import { Users } from '../../src/users/directory.ts';
import { importIntoStore } from '../../src/users/store-import.ts';
import { SUB_ACCOUNT_WINDOW_MAX, SubAccounts } from '../../src/users/sub-account.ts';
import { poll } from '../support/wait.ts';

const dir = mkdtempSync(join(tmpdir(), 'rotor-resume-window-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** `count` users written into a new SQLite file as `rotor users import --store` writes them. */
async function storedIntents(file: string, count: number, prefix: string): Promise<void> {
  const store = new SqliteStore(file);
  const periods = ['month', 'day', 'total'] as const;
  const rows = Array.from({ length: count }, (_, i) => ({
    name: `${prefix}${String(i).padStart(4, '0')}`,
    mainAccount: 'shop1',
    product: SIM_PRODUCTS.dynamicTraffic,
    quota: { bytes: 10_000_000_000, period: periods[i % 3] },
  }));
  const written = await importIntoStore(store, rows, { reservedPorts: new Map(), configUsers: [], tls: false });
  assert.equal(written.created, count);
  await store.close();
}

/** A daemon's users directory on `file` (its start resumes the intents) and what it stands on. */
async function directoryOn(sim: Simulator, file: string) {
  const client = new PlatformClient({
    baseUrl: sim.baseUrl,
    appKey: sim.appKey,
    appSecret: sim.appSecret,
    // A loaded machine delays the sandbox's timers: room for a call refused in a cut's round.
    retries: 5,
    backoff: { baseMs: 20, maxMs: 200 },
  });
  const store = new SqliteStore(file);
  const accounting = new Accounting({ store, flushIntervalMs: 3_600_000 });
  const subs = new SubAccounts(client, new ProductCatalog({ client }));
  const users = new Users({ store, accounting, platform: subs, sweepMs: 3_600_000 });
  await accounting.start([]);
  return {
    users,
    subs,
    store,
    async close() {
      await users.close();
      await accounting.close();
      await store.close();
      client.close();
    },
  };
}

const subsOnPlatform = (sim: Simulator, prefix: string): string[] =>
  sim.inspect
    .accounts()
    .flatMap((m) => m.subs)
    .map((s) => s.appUsername)
    .filter((n) => n.startsWith(prefix));

async function states(file: string): Promise<{ ready: string[]; creating: string[] }> {
  const store = new SqliteStore(file);
  try {
    const all = await store.listUsers();
    return {
      ready: all.filter((u) => u.state === 'ready').map((u) => u.name),
      creating: all.filter((u) => u.state === 'creating').map((u) => u.name),
    };
  } finally {
    await store.close();
  }
}

test('a platform 100 ms away: the intents resumed up to 64 calls at once, never more, every one made once', async () => {
  const sim = await startSimulator({ latencyMs: 100, upstreams: false });
  const file = join(dir, 'far.db');
  try {
    await storedIntents(file, 300, 'r');
    const d = await directoryOn(sim, file);
    try {
      await d.users.start([]);
      await d.users.resume(); // the start's resume, under way: its promise
      assert.equal(d.users.view('r0299')?.state, 'ready');
    } finally {
      await d.close();
    }
    const { peak, refused } = sim.inspect.inFlight();
    assert.equal(refused, 0);
    // One after another, a single call was in flight at a time.
    assert.ok(peak > 32 && peak <= SUB_ACCOUNT_WINDOW_MAX, `at most ${peak} calls at once`);
    const { ready, creating } = await states(file);
    assert.equal(ready.length, 300);
    assert.deepEqual(creating, []);
    assert.equal(subsOnPlatform(sim, 'r').length, 300);
    assert.equal(new Set(subsOnPlatform(sim, 'r')).size, 300, 'one sub account per user');
    // Created first: read only when the creation was refused (here the first ones, before the main account was).
    const calls = sim.inspect.calls();
    assert.ok((calls.GetProxyUserInfo ?? 0) <= SUB_ACCOUNT_WINDOW_MAX, `${calls.GetProxyUserInfo} reads`);
    assert.ok((calls.CreateProxyUser ?? 0) <= 300 + SUB_ACCOUNT_WINDOW_MAX, `${calls.CreateProxyUser} creations`);
  } finally {
    await sim.close();
  }
});

test('a platform that takes 8 calls at once: every intent made, the refusals retried, the window down to it', async () => {
  const sim = await startSimulator({ latencyMs: 20, upstreams: false });
  const file = join(dir, 'busy.db');
  sim.faults.set({ maxInFlight: 8 });
  try {
    await storedIntents(file, 300, 'b');
    const d = await directoryOn(sim, file);
    try {
      await d.users.start([]);
      // A creation whose calls were refused past the retries stays an intent (code 500 is no refusal of the
      // user): the next sweep, run here at once, makes it.
      await poll(
        async () => {
          await d.users.resume();
          return (await states(file)).creating.length === 0;
        },
        { what: 'no intent left', timeoutMs: 60_000 },
      );
      assert.ok(sim.inspect.inFlight().refused > 0, 'the platform did refuse calls beyond 8');
      assert.ok(d.subs.windowLimit <= 12, `window ${d.subs.windowLimit} after the resume`);
    } finally {
      await d.close();
    }
    const { ready, creating } = await states(file);
    assert.equal(ready.length, 300);
    assert.deepEqual(creating, []);
    assert.equal(subsOnPlatform(sim, 'b').length, 300);
  } finally {
    await sim.close();
  }
});

test('a stop in the middle takes no new intent and loses none; the next start finishes the rest, one sub account each', async () => {
  const sim = await startSimulator({ latencyMs: 100, upstreams: false });
  const file = join(dir, 'stopped.db');
  try {
    await storedIntents(file, 600, 'q');
    const first = await directoryOn(sim, file);
    try {
      await first.users.start([]);
      // Some made on the platform, the resume far from its end (600 × ~1.3 calls / 64 at 100 ms: ~1.2 s at best).
      await poll(() => subsOnPlatform(sim, 'q').length >= 40, { what: 'some sub accounts made', timeoutMs: 30_000, everyMs: 5 });
    } finally {
      await first.close(); // waits for the steps under way and their writes, takes no new intent
    }
    const stopped = await states(file);
    assert.equal(stopped.ready.length + stopped.creating.length, 600, 'no intent lost');
    assert.ok(stopped.creating.length > 0, 'the stop left intents for the next start');
    const made = subsOnPlatform(sim, 'q');
    for (const name of stopped.ready) assert.ok(made.includes(name), `${name} is ready with its sub account`);

    const second = await directoryOn(sim, file);
    try {
      await second.users.start([]);
      await second.users.resume();
    } finally {
      await second.close();
    }
    const { ready, creating } = await states(file);
    assert.equal(ready.length, 600);
    assert.deepEqual(creating, []);
    const subs = subsOnPlatform(sim, 'q');
    assert.equal(subs.length, 600);
    assert.equal(new Set(subs).size, 600, 'one sub account per user');
  } finally {
    await sim.close();
  }
});
