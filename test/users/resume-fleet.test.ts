// Two daemons on one store (a fleet: each follows the other's writes), against a real sandbox over HTTP: the
// intents one daemon's batch writes (1,000 rows are written as intents, then made ready together) are left to
// it by the other, whose sweep would otherwise make the same sub accounts a second time, many at once; intents
// nobody makes (their daemon stopped) are taken over once they stayed intents for a minute.
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
import { createBatch } from '../../src/users/bulk.ts';
import { Users } from '../../src/users/directory.ts';
import { importIntoStore } from '../../src/users/store-import.ts';
import { SUB_ACCOUNT_WINDOW_MAX, SubAccounts } from '../../src/users/sub-account.ts';
import { poll } from '../support/wait.ts';

const dir = mkdtempSync(join(tmpdir(), 'rotor-resume-fleet-'));
after(() => rmSync(dir, { recursive: true, force: true }));

async function daemonOn(sim: Simulator, file: string, options: { followMs?: number; sweepMs: number; now?: () => number }) {
  const client = new PlatformClient({ baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret });
  const store = new SqliteStore(file);
  const accounting = new Accounting({ store, flushIntervalMs: 3_600_000 });
  const users = new Users({ store, accounting, platform: new SubAccounts(client, new ProductCatalog({ client })), ...options });
  await accounting.start([]);
  await users.start([]);
  return {
    users,
    async close() {
      await users.close();
      await accounting.close();
      await store.close();
      client.close();
    },
  };
}

const rows = (prefix: string, count: number) =>
  Array.from({ length: count }, (_, i) => ({
    name: `${prefix}${String(i).padStart(4, '0')}`,
    mainAccount: 'shop1',
    product: SIM_PRODUCTS.dynamicTraffic,
    quota: { bytes: -1, period: 'total' as const },
  }));

test("another daemon's batch is left to it; intents nobody makes are taken over after a minute", async () => {
  const sim = await startSimulator({ latencyMs: 100, upstreams: false });
  const file = join(dir, 'fleet.db');
  let offset = 0;
  const a = await daemonOn(sim, file, { sweepMs: 3_600_000 });
  // b follows a's writes every 50 ms and sweeps every 100 ms: it sees a's intents while a makes them.
  const b = await daemonOn(sim, file, { followMs: 50, sweepMs: 100, now: () => Date.now() + offset });
  try {
    const batch = rows('f', 300);
    const answer = await createBatch(a.users, batch, { concurrency: 4 * SUB_ACCOUNT_WINDOW_MAX });
    assert.deepEqual(answer.errors, []);
    assert.equal(answer.created, 300);
    await poll(() => batch.every((r) => b.users.view(r.name)?.state === 'ready'), { what: 'b following them ready', timeoutMs: 30_000 });
    const calls = sim.inspect.calls();
    // a alone: one creation per row (and one more for the first rows, before the main account was made).
    assert.ok((calls.CreateProxyUser ?? 0) <= 300 + SUB_ACCOUNT_WINDOW_MAX, `${calls.CreateProxyUser} creations for 300 rows`);
    assert.ok((calls.GetProxyUserInfo ?? 0) <= SUB_ACCOUNT_WINDOW_MAX, `${calls.GetProxyUserInfo} reads`);

    // Intents whose daemon stopped (written into the store as `rotor users import --store` writes them): b
    // follows them, leaves them for a minute, then makes them.
    const store = new SqliteStore(file);
    const orphans = rows('o', 50);
    await importIntoStore(store, orphans, { reservedPorts: new Map(), configUsers: [], tls: false });
    await store.close();
    await poll(() => orphans.every((r) => b.users.view(r.name)?.state === 'creating'), {
      what: 'b following the orphans',
      timeoutMs: 10_000,
    });
    const made = (): number => sim.inspect.calls().CreateProxyUser ?? 0;
    const before = made();
    // Several sweeps within the minute: nothing made.
    const sweeps = Date.now();
    await poll(() => Date.now() - sweeps > 500, { what: 'a few sweeps', everyMs: 50 });
    assert.equal(made(), before, 'left alone within the minute');
    offset = 60_000;
    await poll(() => orphans.every((r) => b.users.view(r.name)?.state === 'ready'), { what: 'the orphans made by b', timeoutMs: 30_000 });
    assert.equal(made() - before, 50);
  } finally {
    await b.close();
    await a.close();
    await sim.close();
  }
});
