import { test, describe, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { SqliteStore } from '../../src/store/sqlite.ts';
import { openTestStore, type TestDriver } from '../support/store.ts';
import { Accounting, AccountingError, type LimitChange } from '../../src/accounting/accounting.ts';
import { createMetrics, type Metrics } from '../../src/telemetry/metrics.ts';
import type { MeterProvider } from '../../src/proxy/types.ts';
import { poll } from '../support/wait.ts';

const dirs: string[] = [];
const cleanups: (() => Promise<void>)[] = [];
function dbPath(): string {
  const dir = mkdtempSync(join(tmpdir(), 'rotor-acct-'));
  dirs.push(dir);
  return join(dir, 'rotor.db');
}
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

// The store follows ROTOR_TEST_STORE (a path reopened maps to the same data on Redis too) unless pinned.
async function open(
  path: string,
  users: { name: string; limitBytes: number }[],
  metrics?: Metrics,
  flushIntervalMs = 60_000,
  driver?: TestDriver,
) {
  const store = await openTestStore(path, driver ? { driver } : {});
  const accounting = new Accounting({ store, metrics, flushIntervalMs });
  // A start that fails must not leave the store's connection holding the test process open.
  const changes = await accounting.start(users).catch(async (err: unknown) => {
    await store.close();
    throw err;
  });
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await accounting.close();
    await store.close();
  };
  cleanups.push(close);
  return { store, accounting, changes, close };
}

async function metricValue(metrics: Metrics, name: string, labels: Record<string, string>): Promise<number | undefined> {
  const m = (await metrics.registry.getMetricsAsJSON()).find((x) => x.name === name);
  const v = m?.values.find((x) => Object.entries(labels).every(([k, val]) => x.labels[k] === val));
  return v?.value;
}

describe('Accounting: limits on the data path', () => {
  test('add() past the limit sets exhausted; admit refuses the next connection', async () => {
    const { accounting } = await open(dbPath(), [{ name: 'alice', limitBytes: 5000 }]);
    const provider: MeterProvider = accounting; // the gateway's seam, checked by the typechecker
    assert.deepEqual(provider.admit('alice'), { ok: true });
    const meter = accounting.meter('alice');
    assert.equal(accounting.meter('alice'), meter, 'one meter object per user');
    meter.add(1000, 3999);
    assert.equal(meter.exhausted, false);
    meter.add(0, 1);
    assert.equal(meter.exhausted, true, 'used == limit: nothing more is allowed');
    const admission = accounting.admit('alice');
    assert.equal(admission.ok, false);
    assert.match((admission as { reason: string }).reason, /traffic limit of user alice reached/);
  });

  test('unlimited users never exhaust; unknown users are refused', async () => {
    const { accounting } = await open(dbPath(), [{ name: 'bob', limitBytes: -1 }]);
    accounting.meter('bob').add(1e12, 1e12);
    assert.equal(accounting.meter('bob').exhausted, false);
    assert.deepEqual(accounting.admit('bob'), { ok: true });
    assert.equal(accounting.admit('mallory').ok, false);
  });

  test('a 0-byte limit refuses at once', async () => {
    const { accounting } = await open(dbPath(), [{ name: 'zed', limitBytes: 0 }]);
    assert.equal(accounting.admit('zed').ok, false);
    assert.equal(accounting.meter('zed').exhausted, true);
  });

  test('setLimit lifts exhausted and persists; lowering sets it', async () => {
    const path = dbPath();
    const a = await open(path, [{ name: 'alice', limitBytes: 100 }]);
    const changes: LimitChange[] = [];
    a.accounting.onLimitChange((c) => changes.push(c));
    const meter = a.accounting.meter('alice');
    meter.add(150, 0);
    assert.equal(meter.exhausted, true);
    const row = await a.accounting.setLimit('alice', 1000);
    assert.deepEqual(row, { name: 'alice', usedBytes: 150, limitBytes: 1000, activeConnections: 0 });
    assert.equal(meter.exhausted, false);
    assert.deepEqual(a.accounting.admit('alice'), { ok: true });
    assert.deepEqual(changes, [{ user: 'alice', limitBytes: 1000, source: 'admin' }]);
    await a.accounting.setLimit('alice', 120);
    assert.equal(meter.exhausted, true);
    await a.accounting.setLimit('alice', 1000);
    await assert.rejects(a.accounting.setLimit('nobody', 5), (e: unknown) => e instanceof AccountingError && e.code === 'UNKNOWN_USER');
    await assert.rejects(a.accounting.setLimit('alice', -7), /limitBytes/);
    await a.close();
    // The admin override survives a restart while the config keeps the same limitBytes.
    const b = await open(path, [{ name: 'alice', limitBytes: 100 }]);
    assert.equal(b.accounting.get('alice')?.limitBytes, 1000);
    assert.equal(b.accounting.meter('alice').exhausted, false);
    assert.deepEqual(b.changes, []);
    await b.close();
    // A config change of that user's limitBytes wins over the override.
    const c = await open(path, [{ name: 'alice', limitBytes: 140 }]);
    assert.equal(c.accounting.get('alice')?.limitBytes, 140);
    assert.equal(c.accounting.meter('alice').exhausted, true);
    assert.deepEqual(c.changes, [{ user: 'alice', limitBytes: 140, source: 'config' }]);
  });

  test('activeConnections and list()', async () => {
    const { accounting } = await open(dbPath(), [
      { name: 'b', limitBytes: -1 },
      { name: 'a', limitBytes: 10 },
    ]);
    accounting.connectionOpened('a');
    accounting.connectionOpened('a');
    accounting.connectionClosed('a');
    accounting.meter('a').add(3, 4);
    assert.deepEqual(accounting.list(), [
      { name: 'a', usedBytes: 7, limitBytes: 10, activeConnections: 1 },
      { name: 'b', usedBytes: 0, limitBytes: -1, activeConnections: 0 },
    ]);
  });

  test('refusals (disabled account, empty balance) block admission until lifted', async () => {
    const { accounting } = await open(dbPath(), [{ name: 'dave', limitBytes: -1 }]);
    accounting.setRefusal('dave', 'account', 'main account shop9 is disabled');
    accounting.setRefusal('dave', 'balance', 'no balance');
    assert.deepEqual(accounting.admit('dave'), { ok: false, reason: 'main account shop9 is disabled' });
    accounting.setRefusal('dave', 'account', null);
    assert.deepEqual(accounting.admit('dave'), { ok: false, reason: 'no balance' });
    accounting.setRefusal('dave', 'balance', null);
    assert.deepEqual(accounting.admit('dave'), { ok: true });
  });

  test('adoptUsage takes the higher platform number, never a lower one', async () => {
    const { accounting } = await open(dbPath(), [{ name: 'eve', limitBytes: 2000 }]);
    accounting.meter('eve').add(500, 500);
    assert.equal(accounting.adoptUsage('eve', 800), false);
    assert.equal(accounting.get('eve')?.usedBytes, 1000);
    assert.equal(accounting.adoptUsage('eve', 2500), true);
    assert.equal(accounting.get('eve')?.usedBytes, 2500);
    assert.equal(accounting.meter('eve').exhausted, true);
  });

  test('config reload: removed users are refused, new ones admitted', async () => {
    const { accounting } = await open(dbPath(), [{ name: 'old', limitBytes: -1 }]);
    await accounting.setUsers([{ name: 'new', limitBytes: 5 }]);
    assert.equal(accounting.admit('old').ok, false);
    assert.deepEqual(accounting.admit('new'), { ok: true });
    assert.deepEqual(
      accounting.list().map((u) => u.name),
      ['new'],
    );
  });
});

describe('Accounting: persistence', () => {
  test('counters persist and reload; close() flushes everything', async () => {
    const path = dbPath();
    const a = await open(path, [
      { name: 'alice', limitBytes: 10_000 },
      { name: 'bob', limitBytes: -1 },
    ]);
    a.accounting.meter('alice').add(1234, 4321);
    a.accounting.meter('bob').add(1, 2);
    assert.equal((await a.store.getUsage('alice'))?.usedBytes ?? 0, 0, 'nothing written before a flush');
    await a.close();
    const b = await open(path, [
      { name: 'alice', limitBytes: 10_000 },
      { name: 'bob', limitBytes: -1 },
    ]);
    assert.equal(b.accounting.get('alice')?.usedBytes, 5555);
    assert.equal(b.accounting.get('bob')?.usedBytes, 3);
    b.accounting.meter('alice').add(0, 4445);
    assert.equal(b.accounting.meter('alice').exhausted, true, 'the limit counts bytes from before the restart');
    assert.equal(b.accounting.admit('alice').ok, false);
    await b.close();
    const c = await open(path, [{ name: 'alice', limitBytes: 10_000 }]);
    assert.equal(c.accounting.admit('alice').ok, false, 'exhausted survives a restart');
  });

  test("a name made again (usageKey): the new user starts at 0, the deleted one's rows stay with its last bytes; a restart keeps them apart", async () => {
    const path = dbPath();
    const a = await open(path, []);
    await a.accounting.upsertUser({ name: 'carol', limitBytes: 10_000 });
    a.accounting.meter('carol').add(0, 3000);
    await a.accounting.flush();
    a.accounting.meter('carol').add(0, 500); // not written yet when the user is deleted
    a.accounting.removeUser('carol');
    await a.accounting.upsertUser({ name: 'carol', limitBytes: 10_000, usageKey: 'carol~123' });
    assert.equal(a.accounting.get('carol')?.usedBytes, 0, 'the new customer starts at 0');
    assert.equal(a.accounting.hasOwnUsageKey('carol'), true);
    a.accounting.meter('carol').add(0, 100);
    await a.accounting.flush();
    assert.equal((await a.store.getUsage('carol'))?.usedBytes, 3500, "the deleted customer's row, with its last bytes");
    assert.equal((await a.store.getUsage('carol~123'))?.usedBytes, 100);
    assert.equal((await a.store.getUsage('carol~123'))?.limitBytes, 10_000, 'the limit is on the new base row');
    // A day quota under a key of its own: its period rows are `<key>@day:…`.
    await a.accounting.upsertUser({ name: 'dan', limitBytes: -1, period: 'day' });
    a.accounting.meter('dan').add(0, 7);
    a.accounting.removeUser('dan');
    await a.accounting.upsertUser({ name: 'dan', limitBytes: -1, period: 'day', usageKey: 'dan~5' });
    assert.equal(a.accounting.get('dan')?.usedBytes, 0);
    a.accounting.meter('dan').add(1, 1);
    await a.close();
    const keys = (
      await openTestStore(path).then(async (st) => {
        try {
          return await st.listUsage();
        } finally {
          await st.close();
        }
      })
    ).map((r) => `${r.user}=${r.usedBytes}`);
    assert.ok(keys.some((k) => /^dan@day:[\d-]+=7$/.test(k)) && keys.some((k) => /^dan~5@day:[\d-]+=2$/.test(k)), JSON.stringify(keys));
    // A restart reads every row (the deleted customers' too) and applies the users on their own keys.
    const b = await open(path, []);
    await b.accounting.upsertUsers([
      { name: 'carol', limitBytes: 10_000, usageKey: 'carol~123' },
      { name: 'dan', limitBytes: -1, period: 'day', usageKey: 'dan~5' },
    ]);
    assert.equal(b.accounting.get('carol')?.usedBytes, 100);
    assert.equal(b.accounting.get('dan')?.usedBytes, 2);
    // Deleted again, and the name now a config user: it counts under the plain name (config users are by name).
    b.accounting.removeUser('carol');
    await b.accounting.setUsers([{ name: 'carol', limitBytes: 10_000 }]);
    assert.equal(b.accounting.hasOwnUsageKey('carol'), false);
    assert.equal(b.accounting.get('carol')?.usedBytes, 3500);
    // A config user the directory gives a key of its own (made after a delete of the name): it counts there, from 0.
    await b.accounting.setUsers([{ name: 'carol', limitBytes: 10_000, usageKey: 'carol~777' }]);
    assert.equal(b.accounting.usageBaseOf('carol'), 'carol~777');
    assert.equal(b.accounting.get('carol')?.usedBytes, 0);
    b.accounting.meter('carol').add(0, 40);
    await b.accounting.flush();
    assert.equal((await b.store.getUsage('carol~777'))?.usedBytes, 40);
    assert.equal((await b.store.getUsage('carol'))?.usedBytes, 3500, "the deleted customer's row stays as it was");
  });

  test('the timer writes only changed users, in batches', async () => {
    const path = dbPath();
    const { store, accounting } = await open(
      path,
      [
        { name: 'alice', limitBytes: -1 },
        { name: 'bob', limitBytes: -1 },
      ],
      undefined,
      30,
    );
    // No flush() here: what is awaited is the timer's own write, seen in the store.
    const stored = async (user: string): Promise<number> => (await store.getUsage(user))?.usedBytes ?? 0;
    accounting.meter('alice').add(10, 0);
    await poll(async () => (await stored('alice')) >= 10, { what: 'the first timed flush', timeoutMs: 5000, everyMs: 5 });
    assert.equal(await stored('alice'), 10);
    const bobBefore = (await store.getUsage('bob'))?.updatedAt;
    accounting.meter('alice').add(5, 5);
    await poll(async () => (await stored('alice')) >= 20, { what: 'the second timed flush', timeoutMs: 5000, everyMs: 5 });
    assert.equal(await stored('alice'), 20);
    assert.equal((await store.getUsage('bob'))?.updatedAt, bobBefore, 'an unchanged user is not rewritten');
  });

  // SQLite only (also under ROTOR_TEST_STORE=redis): the SIGKILLed child writes the file this process reads.
  test('a crash (SIGKILL, no close) loses at most the unflushed interval', async () => {
    const path = dbPath();
    // Create the schema first so the child and this process agree on the file.
    await new SqliteStore(path).close();
    const child = spawn(process.execPath, ['--import', 'tsx', join(import.meta.dirname, 'crash-child.ts'), path, '200'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => (d.toString().includes('ready') ? resolve() : undefined));
      child.on('exit', (code) => reject(new Error(`child exited early (${code})`)));
    });
    const exited = new Promise((r) => child.on('exit', r));
    child.kill('SIGKILL');
    await exited;
    const { accounting } = await open(path, [{ name: 'carol', limitBytes: -1 }], undefined, 60_000, 'sqlite');
    const used = accounting.get('carol')?.usedBytes ?? 0;
    assert.ok(used >= 1000, `flushed bytes survive the crash (got ${used})`);
    assert.ok(used <= 1500, `nothing is invented (got ${used})`);
  });

  test('a failed store write keeps the counts for the next flush', async () => {
    const path = dbPath();
    const store = await openTestStore(path);
    let fail = true;
    const flaky = {
      addUsage: (d: { user: string; bytes: number }[]) => (fail ? Promise.reject(new Error('disk full')) : store.addUsage(d)),
      listUsage: () => store.listUsage(),
      setLimit: (u: string, l: number) => store.setLimit(u, l),
      kvGet: <T>(k: string) => store.kvGet<T>(k),
      kvSet: (k: string, v: unknown) => store.kvSet(k, v),
    };
    const accounting = new Accounting({ store: flaky, flushIntervalMs: 60_000 });
    await accounting.start([{ name: 'u', limitBytes: -1 }]);
    accounting.meter('u').add(7, 0);
    await accounting.flush();
    assert.equal((await store.getUsage('u'))?.usedBytes, 0);
    fail = false;
    accounting.meter('u').add(0, 3);
    await accounting.close();
    assert.equal((await store.getUsage('u'))?.usedBytes, 10);
    await store.close();
  });
});

describe('Accounting: metrics', () => {
  test('bytes_total per direction and used/limit gauges after a flush', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const { accounting } = await open(dbPath(), [{ name: 'alice', limitBytes: 9000 }], metrics);
    assert.equal(await metricValue(metrics, 'rotor_user_limit_bytes', { user: 'alice' }), 9000);
    accounting.meter('alice').add(100, 2000);
    accounting.meter('alice').add(50, 0);
    await accounting.flush();
    assert.equal(await metricValue(metrics, 'rotor_proxy_bytes_total', { user: 'alice', direction: 'up' }), 150);
    assert.equal(await metricValue(metrics, 'rotor_proxy_bytes_total', { user: 'alice', direction: 'down' }), 2000);
    assert.equal(await metricValue(metrics, 'rotor_user_used_bytes', { user: 'alice' }), 2150);
    await accounting.flush();
    assert.equal(await metricValue(metrics, 'rotor_proxy_bytes_total', { user: 'alice', direction: 'up' }), 150, 'not counted twice');
    await accounting.setLimit('alice', -1);
    assert.equal(await metricValue(metrics, 'rotor_user_limit_bytes', { user: 'alice' }), -1);
  });
});
