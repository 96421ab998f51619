// A name deleted and made again in a fleet: two daemons (startDaemon twice) on one redis-server and one sandbox
// platform. The new customer's usage starts at 0 on both daemons (the other daemon's meter and its lease of the
// deleted customer's key do not carry over, nor does a restart read the old row back), for a lifetime quota and a
// day quota alike; the deleted customer's billing history (rollups, records) stays, split from the new
// customer's by the new user's createdAt.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon, type Daemon } from '../../src/main.ts';
import { PlatformClient } from '../../src/platform/client.ts';
import { startSimulator, SIM_PRODUCTS, type Simulator } from '../../src/sim/index.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { testConfig } from '../e2e/harness.ts';
import { curl, startTarget, type BytesTarget } from '../e2e/limits-harness.ts';
import { redisMissing, RedisServer } from '../fleet/redis-server.ts';
import { buyTraffic } from '../support/orders.ts';
import { poll } from '../support/wait.ts';

const MiB = 1024 * 1024;
const SLICE = 512 * 1024;
const PREFIX = `namereuse${process.pid}:`;
const PRODUCT = SIM_PRODUCTS.dynamicTraffic;

interface View {
  usedBytes: number;
  createdAt: string;
}

async function admin<T>(d: Daemon, method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(`http://127.0.0.1:${d.ports.admin}${path}`, {
    method,
    headers: body !== undefined ? { 'content-type': 'application/json' } : {},
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(20_000),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
}

describe('a name deleted and made again, on two daemons sharing one Redis', { skip: redisMissing }, () => {
  const redis = new RedisServer();
  let sim: Simulator;
  let a: Daemon;
  let b: Daemon;
  let bytes: BytesTarget;

  const start = (id: string): Promise<Daemon> =>
    startDaemon(
      testConfig({
        platform: { mode: 'remote', baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret, timeoutMs: 5000 },
        proxy: { connectTimeoutMs: 3000, handshakeTimeoutMs: 3000 },
        store: { path: redis.url },
        fleet: { prefix: PREFIX, instanceId: id, sliceBytes: SLICE, offlineBytes: SLICE, aliveTtlMs: 3000 },
        accounts: { balancePollMs: 300, flushIntervalMs: 200 },
        log: { access: { flushIntervalMs: 100 } },
      }),
      { logger: createLogger({ level: 'silent' }) },
    );

  before(async () => {
    await redis.start();
    sim = await startSimulator({ orderDelayMs: 200 });
    a = await start('reuse-a');
    const client = new PlatformClient({ baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret, retries: 0 });
    await buyTraffic(client, 'shop1', PRODUCT, 10_240);
    client.close();
    b = await start('reuse-b');
    bytes = await startTarget();
  });
  after(async () => {
    await bytes?.close();
    await Promise.allSettled([a?.close(), b?.close()]);
    await sim?.close();
    await redis.stop();
  });

  const fetchVia = (d: Daemon, name: string, password: string, size: number) =>
    curl(['-p', '-x', `http://${name}:${password}@127.0.0.1:${d.ports.http}`, bytes.url(size, 2 * MiB)]);
  const used = async (d: Daemon, name: string): Promise<number | undefined> => {
    const r = await admin<View>(d, 'GET', `/v1/users/${name}`);
    return r.status === 200 ? r.body.usedBytes : undefined;
  };
  /** Until both daemons show a usage within [min, max] for the name. */
  const bothSee = (name: string, min: number, max: number, what: string) =>
    poll(
      async () => {
        const [ua, ub] = [await used(a, name), await used(b, name)];
        return ua !== undefined && ub !== undefined && ua >= min && ua <= max && ub >= min && ub <= max ? [ua, ub] : undefined;
      },
      { what: `${what} (${min}..${max} B on both daemons)`, timeoutMs: 15_000, everyMs: 100 },
    );

  for (const period of ['total', 'day'] as const) {
    test(`quota period ${period}: the new customer starts at 0 on both daemons, and after a restart; the old history stays for the bill`, async () => {
      const name = `again${period}`;
      const first = { name, password: 'first-customer-1', mainAccount: 'shop1', product: PRODUCT, quota: { bytes: 8 * MiB, period } };
      assert.equal((await admin(a, 'POST', '/v1/users', first)).status, 201);
      await poll(async () => ((await fetchVia(b, name, first.password, 10)).http === 200 ? true : undefined), {
        what: 'B to serve the first customer',
        timeoutMs: 15_000,
        everyMs: 100,
      });
      // The first customer moves 1 MiB through each daemon: both meters (and B's lease) hold its usage.
      for (const d of [a, b]) assert.equal((await fetchVia(d, name, first.password, MiB)).size, MiB);
      await bothSee(name, 2 * MiB, 3 * MiB, 'the first customer metered');

      // A slow download of the deleted customer still open on B when the name is deleted and made again on A.
      const slow = curl(['-p', '-x', `http://${name}:${first.password}@127.0.0.1:${b.ports.http}`, bytes.url(4 * MiB, 256 * 1024)]);
      await poll(
        async () =>
          (await admin<{ activeConnections: number }>(b, 'GET', `/v1/users/${name}`)).body.activeConnections > 0 ? true : undefined,
        {
          what: "the deleted customer's download open on B",
          timeoutMs: 10_000,
          everyMs: 20,
        },
      );
      assert.equal((await admin(a, 'DELETE', `/v1/users/${name}`)).status, 204);
      if (period === 'day') {
        // B sees the delete on its own (for 'total' the new user is made at once: B most often sees the delete and
        // the new record in one look, and must end the deleted customer's connections then too).
        await poll(async () => ((await admin(b, 'GET', `/v1/users/${name}`)).status === 404 ? true : undefined), {
          what: 'B to forget the deleted customer',
          timeoutMs: 10_000,
          everyMs: 50,
        });
      }
      const second = { ...first, password: 'second-customer-2' };
      const made = await admin<View>(a, 'POST', '/v1/users', second);
      assert.equal(made.status, 201, JSON.stringify(made.body));
      assert.equal(made.body.usedBytes, 0, `the new customer starts with ${made.body.usedBytes} B used on the daemon that made it`);
      const createdAt = Date.parse(made.body.createdAt);
      assert.ok(Number.isFinite(createdAt), `createdAt ${made.body.createdAt}`);
      const cut = await slow;
      assert.ok(cut.size < 4 * MiB, `the deleted customer's download on B went on to its end (${cut.size} B)`);

      // The new customer moves 100 kB through B: both daemons count that, and only that, after their syncs.
      await poll(async () => ((await fetchVia(b, name, second.password, 100_000)).size === 100_000 ? true : undefined), {
        what: 'B to serve the new customer',
        timeoutMs: 15_000,
        everyMs: 100,
      });
      const [ua, ub] = (await bothSee(name, 100_000, 100_000 + 64 * 1024, "the new customer's own usage")) as [number, number];
      assert.ok(ua < MiB && ub < MiB, `A ${ua} B ${ub}`);

      // B restarts: it reads the stored rows again (the deleted customer's too) and still counts the new one's.
      await b.close();
      b = await start('reuse-b');
      await bothSee(name, 100_000, 100_000 + 64 * 1024, "the new customer's usage after B's restart");

      // The reseller's bill: the deleted customer's records and rollups stay, split by the new user's createdAt.
      const records = async (q: string) =>
        (await admin<{ items: { startedAt: number; bytesDown: number }[] }>(a, 'GET', `/v1/connections?user=${name}&limit=200&${q}`)).body
          .items;
      const old = await poll(
        async () => {
          const items = await records(`until=${new Date(createdAt).toISOString()}`);
          return items.length >= 3 ? items : undefined;
        },
        { what: "the deleted customer's records", timeoutMs: 10_000 },
      );
      assert.ok(old.every((r) => r.startedAt < createdAt));
      assert.ok(old.reduce((n, r) => n + r.bytesDown, 0) >= 2 * MiB, "the deleted customer's bytes are billed");
      const mine = await poll(
        async () => {
          const items = await records(`since=${new Date(createdAt).toISOString()}`);
          return items.length >= 1 ? items : undefined;
        },
        { what: "the new customer's record", timeoutMs: 10_000 },
      );
      assert.ok(
        mine.every((r) => r.startedAt >= createdAt && r.bytesDown < MiB),
        JSON.stringify(mine),
      );
      const rollups = (await admin<{ bytesDown: number }[] | { items: { bytesDown: number }[] }>(a, 'GET', `/v1/usage?user=${name}`)).body;
      const rows = Array.isArray(rollups) ? rollups : rollups.items;
      assert.ok(
        rows.reduce((n, r) => n + r.bytesDown, 0) >= 2 * MiB,
        `the rollups keep the deleted customer's bytes: ${JSON.stringify(rows)}`,
      );
    });
  }
});
