// A user deleted and a new customer later made under the same name (names are the reseller's customers'
// logins, reused): the new customer starts with nothing used, not with the deleted customer's traffic counted
// against its quota, and its portal shows neither the deleted customer's usage nor its connections; the
// reseller keeps the deleted customer's billing history (GET /v1/usage, GET /v1/connections), split from the new
// one's by the new user's createdAt. Real daemon on the embedded sandbox, real curl through the HTTP listener.
// The same on Redis with two daemons: test/users/name-reuse-fleet.test.ts.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { curl, startGateway, viaHttp, type Gateway } from '../e2e/harness.ts';
import { startTarget, type BytesTarget } from '../e2e/limits-harness.ts';
import { poll } from '../support/wait.ts';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';

const PRODUCT = SIM_PRODUCTS.dynamicTraffic;

let gw: Gateway;
let target: BytesTarget;
before(async () => {
  gw = await startGateway({ config: { accounts: { flushIntervalMs: 100 } } });
  target = await startTarget();
});
after(async () => {
  await target?.close();
  await gw?.close();
});

interface Row {
  usedBytes: number;
  limitBytes: number;
}

test("a name deleted and made again: the new user's usage starts at 0", async () => {
  const user = { name: 'reused1', mainAccount: 'shop1', password: 'reused1-pass-1', quota: { bytes: 10 * 1024 * 1024, period: 'total' } };
  assert.equal((await gw.admin('/v1/users', { body: user })).status, 201);
  const r = await curl([...viaHttp(gw.ports.http, user.name, user.password), target.url(2 * 1024 * 1024)]);
  assert.equal(r.exitCode, 0, r.stderr);
  const used = await poll(
    async () => {
      const row = (await gw.admin<Row>(`/v1/users/${user.name}`)).body;
      return row.usedBytes >= 2 * 1024 * 1024 ? row.usedBytes : undefined;
    },
    { what: 'the first customer metered', timeoutMs: 10_000 },
  );
  const backstop = (await gw.admin<{ limitFlow: number }>(`/v1/sub-accounts/${user.name}?productNo=${PRODUCT}`)).body.limitFlow;
  assert.ok(backstop >= 10 * 1024 * 1024, `the first customer's platform backstop: ${backstop}`);
  assert.equal((await gw.admin(`/v1/users/${user.name}`, { method: 'DELETE' })).status, 204);
  assert.equal((await gw.admin('/v1/users', { body: { ...user, password: 'another-customer-2' } })).status, 201);
  const fresh = (await gw.admin<Row>(`/v1/users/${user.name}`)).body;
  assert.equal(fresh.usedBytes, 0, `the new customer starts with ${fresh.usedBytes} B used (the deleted one had used ${used} B)`);
  // The sub account is the name's: its lifetime usage on the platform holds the deleted customer's, so the platform
  // backstop (limit + headroom against that lifetime figure) would cut the new customer early; it is off (-1),
  // and Rotor alone enforces the new customer's quota, as for a per-period quota.
  const sub = (await gw.admin<{ limitFlow: number; useFlow: number }>(`/v1/sub-accounts/${user.name}?productNo=${PRODUCT}`)).body;
  assert.ok(sub.useFlow >= 2 * 1024 * 1024 && sub.limitFlow === -1, `the re-made name's sub account: ${JSON.stringify(sub)}`);
});

test("a name deleted and made again: the new customer's portal does not show the deleted customer's connections", async () => {
  const user = { name: 'reused2', mainAccount: 'shop1', password: 'reused2-pass-1' };
  assert.equal((await gw.admin('/v1/users', { body: user })).status, 201);
  const r = await curl([...viaHttp(gw.ports.http, user.name, user.password), target.url(1000)]);
  assert.equal(r.exitCode, 0, r.stderr);
  await poll(
    async () => ((await gw.admin<{ items: unknown[] }>(`/v1/connections?user=${user.name}`)).body.items.length > 0 ? true : undefined),
    { what: 'the first customer recorded', timeoutMs: 10_000 },
  );
  assert.equal((await gw.admin(`/v1/users/${user.name}`, { method: 'DELETE' })).status, 204);
  const second = { ...user, password: 'another-customer-2' };
  assert.equal((await gw.admin('/v1/users', { body: second })).status, 201);
  const login = await fetch(`${gw.adminUrl}${gw.config.portal.path}api/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ user: second.name, password: second.password }),
  });
  assert.equal(login.status, 204);
  const cookie = /^(rotor_portal=[A-Za-z0-9_-]+)/.exec(login.headers.get('set-cookie') ?? '')![1]!;
  const portal = async <T>(path: string): Promise<T> =>
    (await (await fetch(`${gw.adminUrl}${gw.config.portal.path}api/${path}`, { headers: { cookie } })).json()) as T;
  const seen = await portal<{ recent: { target: string; startedAt: number }[] }>('connections?limit=50');
  assert.deepEqual(
    seen.recent.map((c) => c.target),
    [],
    `the new customer reads the deleted customer's connections: ${JSON.stringify(seen.recent.map((c) => c.target))}`,
  );
  const usage = await portal<{ period: string; bytesDown: number }[]>('usage?granularity=hour');
  assert.deepEqual(usage, [], `the new customer reads the deleted customer's usage: ${JSON.stringify(usage)}`);
  const me = await portal<{ usedBytes: number }>('me');
  assert.equal(me.usedBytes, 0);
  // The reseller still has the deleted customer's record and rollup, to bill it.
  const view = (await gw.admin<{ createdAt: string }>(`/v1/users/${user.name}`)).body;
  const before = (await gw.admin<{ items: { target: string }[] }>(`/v1/connections?user=${user.name}&until=${view.createdAt}`)).body;
  assert.equal(before.items.length, 1, JSON.stringify(before));
  const rollups = (await gw.admin<{ bytesDown: number }[]>(`/v1/usage?user=${user.name}`)).body;
  assert.ok(rollups.reduce((n, r) => n + r.bytesDown, 0) >= 1000, `the deleted customer's rollup is kept: ${JSON.stringify(rollups)}`);
});

test('a name deleted and made again, then a restart (SQLite file): the new customer still starts from its own usage', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'rotor-name-reuse-'));
  const config = { store: { path: join(dir, 'rotor.db') }, accounts: { flushIntervalMs: 100 } };
  let own: Gateway | undefined = await startGateway({ config });
  try {
    const user = { name: 'reused3', mainAccount: 'shop1', password: 'reused3-pass-1', quota: { bytes: 10 * 1024 * 1024, period: 'day' } };
    assert.equal((await own.admin('/v1/users', { body: user })).status, 201);
    const r = await curl([...viaHttp(own.ports.http, user.name, user.password), target.url(1024 * 1024)]);
    assert.equal(r.exitCode, 0, r.stderr);
    await poll(async () => ((await own!.admin<Row>(`/v1/users/${user.name}`)).body.usedBytes >= 1024 * 1024 ? true : undefined), {
      what: 'the first customer metered',
      timeoutMs: 10_000,
    });
    assert.equal((await own.admin(`/v1/users/${user.name}`, { method: 'DELETE' })).status, 204);
    const second = { ...user, password: 'another-customer-3' };
    assert.equal((await own.admin('/v1/users', { body: second })).status, 201);
    const r2 = await curl([...viaHttp(own.ports.http, second.name, second.password), target.url(20_000)]);
    assert.equal(r2.exitCode, 0, r2.stderr);
    const mine = await poll(
      async () => {
        const u = (await own!.admin<Row>(`/v1/users/${user.name}`)).body.usedBytes;
        return u >= 20_000 ? u : undefined;
      },
      { what: "the new customer's own bytes metered", timeoutMs: 10_000 },
    );
    assert.ok(mine < 1024 * 1024, `the new customer has ${mine} B used`);
    await own.close();
    own = undefined;
    own = await startGateway({ config });
    const after = (await own.admin<Row>(`/v1/users/${user.name}`)).body.usedBytes;
    assert.equal(after, mine, `after the restart the new customer has ${after} B used (its own: ${mine})`);
  } finally {
    await own?.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a name made again: the new customer's portal shows its own traffic of its first hour and day, not the deleted one's", async () => {
  // review11: the rows of the hour and the day in which the name was made again hold both customers' bytes (the
  // rollups are per name); the portal shows them with the deleted customer's part taken out, not left out whole.
  const user = { name: 'reused9', mainAccount: 'shop1', password: 'reused9-pass-1' };
  assert.equal((await gw.admin('/v1/users', { body: user })).status, 201);
  assert.equal((await curl([...viaHttp(gw.ports.http, user.name, user.password), target.url(50_000)])).exitCode, 0);
  await poll(
    async () => ((await gw.admin<{ items: unknown[] }>(`/v1/connections?user=${user.name}`)).body.items.length > 0 ? true : undefined),
    { what: 'the first customer recorded', timeoutMs: 10_000 },
  );
  assert.equal((await gw.admin(`/v1/users/${user.name}`, { method: 'DELETE' })).status, 204);
  const second = { ...user, password: 'another-customer-9' };
  assert.equal((await gw.admin('/v1/users', { body: second })).status, 201);
  const r = await curl([...viaHttp(gw.ports.http, second.name, second.password), target.url(200_000)]);
  assert.equal(r.exitCode, 0, r.stderr);
  const view = (await gw.admin<{ createdAt: string }>(`/v1/users/${user.name}`)).body;
  await poll(
    async () => {
      const rows = (await gw.admin<{ bytesDown: number }[]>(`/v1/usage?user=${user.name}&granularity=hour`)).body;
      return rows.reduce((n, x) => n + x.bytesDown, 0) >= 250_000 ? true : undefined;
    },
    { what: "both customers' bytes in the rollups", timeoutMs: 10_000 },
  );
  const login = await fetch(`${gw.adminUrl}${gw.config.portal.path}api/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ user: second.name, password: second.password }),
  });
  assert.equal(login.status, 204);
  const cookie = /^(rotor_portal=[A-Za-z0-9_-]+)/.exec(login.headers.get('set-cookie') ?? '')![1]!;
  const portal = async <T>(path: string): Promise<T> =>
    (await (await fetch(`${gw.adminUrl}${gw.config.portal.path}api/${path}`, { headers: { cookie } })).json()) as T;
  const hours = await portal<{ bytesDown: number; connections: number }[]>('usage?granularity=hour');
  const days = await portal<{ bytesDown: number; connections: number }[]>('usage?granularity=day');
  const me = await portal<{ usedBytes: number }>('me');
  const sum = (rows: { bytesDown: number }[]) => rows.reduce((n, x) => n + x.bytesDown, 0);
  const connections = (rows: { connections: number }[]) => rows.reduce((n, x) => n + x.connections, 0);
  for (const [what, rows] of [
    ['hour', hours],
    ['day', days],
  ] as const) {
    assert.ok(
      sum(rows) >= 200_000 && sum(rows) < 250_000 && connections(rows) === 1,
      `created ${view.createdAt}; the quota bar says ${me.usedBytes} B used, the portal's usage by ${what} shows ` +
        `${sum(rows)} B in ${connections(rows)} connections (${JSON.stringify(rows)})`,
    );
  }
});
