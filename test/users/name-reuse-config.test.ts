// A user made through the API, deleted, and its name then defined in the config file: the config user is another
// customer, as a name made again through the API is (test/users/name-reuse.test.ts). It starts at 0 against its
// quota instead of inheriting the deleted customer's usage, keeps counting its own across restarts, and the
// deleted customer's usage row stays as it was (the bill). Real daemon on the embedded sandbox with a SQLite file,
// real curl through the HTTP listener; the config applied at a restart and by a reload (SIGHUP's path).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { curl, startGateway, testConfig, viaHttp, type Gateway } from '../e2e/harness.ts';
import { startTarget, type BytesTarget } from '../e2e/limits-harness.ts';
import { poll } from '../support/wait.ts';
import { openTestStore } from '../support/store.ts';

const ALICE = { name: 'alice', password: 'alice-pass', mainAccount: 'shop1', product: '', draw: 'pwd', sessTime: 5, limitBytes: -1 };
const MiB = 1024 * 1024;

let target: BytesTarget;
let dir: string;
before(async () => {
  target = await startTarget();
  dir = mkdtempSync(join(tmpdir(), 'rotor-name-reuse-config-'));
});
after(async () => {
  await target?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Row {
  usedBytes: number;
  createdAt: string;
}

async function used(gw: Gateway, name: string): Promise<number> {
  return (await gw.admin<Row>(`/v1/users/${name}`)).body.usedBytes;
}

/** Traffic through the user, then its meter read once it holds at least `atLeast` bytes. */
async function carry(gw: Gateway, name: string, password: string, bytes: number, atLeast: number): Promise<number> {
  const r = await curl([...viaHttp(gw.ports.http, name, password), target.url(bytes)]);
  assert.equal(r.exitCode, 0, r.stderr);
  return poll(
    async () => {
      const u = await used(gw, name);
      return u >= atLeast ? u : undefined;
    },
    { what: `${name} metered`, timeoutMs: 10_000 },
  );
}

test('an API user deleted, then its name in the config: the config user starts at 0 and keeps its own usage across restarts', async () => {
  const path = join(dir, 'restart.db');
  const base = { store: { path }, accounts: { flushIntervalMs: 100 } };
  const name = 'reused5';
  let gw: Gateway | undefined = await startGateway({ config: { ...base, users: [ALICE] } });
  try {
    const api = { name, mainAccount: 'shop1', password: 'first-customer-5', quota: { bytes: 50 * MiB, period: 'total' } };
    assert.equal((await gw.admin('/v1/users', { body: api })).status, 201);
    const deletedUsed = await carry(gw, name, api.password, MiB, MiB);
    assert.equal((await gw.admin(`/v1/users/${name}`, { method: 'DELETE' })).status, 204);
    await gw.close();
    gw = undefined;

    const config = {
      ...base,
      users: [ALICE, { name, password: 'config-customer-5', mainAccount: 'shop1', product: '', limitBytes: 50 * MiB }],
    };
    gw = await startGateway({ config });
    const fresh = await used(gw, name);
    assert.equal(fresh, 0, `the config user starts with ${fresh} B used (the deleted API user had used ${deletedUsed} B)`);
    const mine = await carry(gw, name, 'config-customer-5', 30_000, 30_000);
    assert.ok(mine < MiB, `the config user has ${mine} B used`);
    await gw.close();
    gw = undefined;

    gw = await startGateway({ config });
    const afterRestart = await used(gw, name);
    assert.equal(afterRestart, mine, `after a restart the config user has ${afterRestart} B used (its own: ${mine})`);
    await gw.close();
    gw = undefined;
    // The deleted customer's row is kept as it was, apart from the new customer's.
    const store = await openTestStore(path, { driver: 'sqlite' });
    try {
      assert.equal((await store.getUsage(name))?.usedBytes, deletedUsed);
    } finally {
      await store.close();
    }
  } finally {
    await gw?.close();
  }
});

test("a reload that adds a deleted API user's name to the config: the config user starts at 0", async () => {
  const name = 'reused6';
  const gw = await startGateway({
    config: { store: { path: join(dir, 'reload.db') }, accounts: { flushIntervalMs: 100 }, users: [ALICE] },
  });
  try {
    const api = { name, mainAccount: 'shop1', password: 'first-customer-6' };
    assert.equal((await gw.admin('/v1/users', { body: api })).status, 201);
    const deletedUsed = await carry(gw, name, api.password, 200_000, 200_000);
    assert.equal((await gw.admin(`/v1/users/${name}`, { method: 'DELETE' })).status, 204);
    const next = testConfig({
      ...gw.config,
      users: [ALICE, { name, password: 'config-customer-6', mainAccount: 'shop1', product: '', limitBytes: -1 }],
    } as never);
    await gw.daemon.reload(next);
    const fresh = await used(gw, name);
    assert.equal(fresh, 0, `the config user starts with ${fresh} B used (the deleted API user had used ${deletedUsed} B)`);
    const mine = await carry(gw, name, 'config-customer-6', 10_000, 10_000);
    assert.ok(mine < 200_000, `the config user has ${mine} B used`);
    // A config user whose name was never deleted keeps its plain key: alice's row is counted as before.
    await carry(gw, 'alice', 'alice-pass', 5_000, 5_000);
  } finally {
    await gw.close();
  }
});
