// Users as data in a fleet: two daemons (startDaemon twice) on one redis-server and one sandbox platform.
// A user created through one daemon's admin API is served by the other; its quota is one quota for both
// (the allowance leases are keyed by the user's period); a change (disable) and a delete made on one daemon
// take effect on the other.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon, type Daemon } from '../../src/main.ts';
import { PlatformClient } from '../../src/platform/client.ts';
import { startSimulator, SIM_PRODUCTS, type Simulator } from '../../src/sim/index.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { testConfig } from '../e2e/harness.ts';
import { curl, startTarget, waitFor, type BytesTarget } from '../e2e/limits-harness.ts';
import { redisMissing, RedisServer } from './redis-server.ts';
import { buyTraffic } from '../support/orders.ts';

const MiB = 1024 * 1024;
const SLICE = 512 * 1024;
/** Downloads are paced at the source (the slice sizing rule of README "Running a fleet"). */
const RATE = 2 * MiB;
const LIMIT = 3 * MiB;
const PREFIX = `fleetusers${process.pid}:`;
const PRODUCT = SIM_PRODUCTS.dynamicTraffic;

interface View {
  name: string;
  usedBytes: number;
  enabled: boolean;
  periodKey: string;
}

async function admin<T>(d: Daemon, method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(`http://127.0.0.1:${d.ports.admin}${path}`, {
    method,
    headers: body !== undefined ? { 'content-type': 'application/json' } : {},
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
}

describe('users shared by two daemons on one Redis', { skip: redisMissing }, () => {
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
        users: [{ name: 'dave', password: 'dave-pass', mainAccount: 'shop1', product: PRODUCT }],
        accounts: { balancePollMs: 300, flushIntervalMs: 300 },
      }),
      { logger: createLogger({ level: 'silent' }) },
    );

  before(async () => {
    await redis.start();
    sim = await startSimulator({ orderDelayMs: 200 });
    a = await start('users-a');
    const client = new PlatformClient({ baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret, retries: 0 });
    await buyTraffic(client, 'shop1', PRODUCT, 10_240);
    client.close();
    b = await start('users-b');
    bytes = await startTarget();
    for (const d of [a, b]) {
      await waitFor(
        'the daemon to serve',
        async () =>
          (await curl(['-x', `http://dave:dave-pass@127.0.0.1:${d.ports.http}`, bytes.url(10)])).http === 200 ? true : undefined,
        15_000,
        100,
      );
    }
  });

  after(async () => {
    await bytes?.close();
    await Promise.allSettled([a?.close(), b?.close()]);
    await sim?.close();
    await redis.stop();
  });

  test('created on A, served by B; one day quota for both; disable and delete on one act on the other', async () => {
    const created = await admin<View>(a, 'POST', '/v1/users', {
      name: 'shared1',
      password: 'shared1-pass',
      mainAccount: 'shop1',
      product: PRODUCT,
      quota: { bytes: LIMIT, period: 'day' },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    await waitFor(
      'B to know the user',
      async () => ((await admin(b, 'GET', '/v1/users/shared1')).status === 200 ? true : undefined),
      5000,
      100,
    );

    // 2 MiB through A, then as much as the user may through B: the two together stay within the quota.
    const viaA = await curl(['-p', '-x', `http://shared1:shared1-pass@127.0.0.1:${a.ports.http}`, bytes.url(2 * MiB, RATE)]);
    assert.equal(viaA.size, 2 * MiB, viaA.stderr);
    const viaB = await curl(['-x', `socks5h://shared1:shared1-pass@127.0.0.1:${b.ports.socks5}`, bytes.url(4 * MiB, RATE)]);
    const total = viaA.size + viaB.size;
    // Bound (src/fleet/allowance.ts): limit + per daemon the lease overdraft (half a slice) + a chunk per connection.
    const bound = LIMIT + 2 * (SLICE / 2) + 2 * 64 * 1024;
    console.log(`# fleet day quota ${LIMIT} bytes: A ${viaA.size} + B ${viaB.size} = ${total} (bound ${bound})`);
    assert.ok(viaB.size < 2 * MiB, `B was not cut: ${viaB.size}`);
    assert.ok(total <= bound, `total ${total} > ${bound}`);
    // Cut early by at most what the other daemon still holds of its lease (one slice) and a refill window.
    assert.ok(total >= LIMIT - 2 * SLICE, `total ${total}: cut far below the quota`);
    // Both daemons see the fleet's usage of the same period.
    await waitFor(
      'both to see the shared usage',
      async () => {
        const [va, vb] = [(await admin<View>(a, 'GET', '/v1/users/shared1')).body, (await admin<View>(b, 'GET', '/v1/users/shared1')).body];
        return va.usedBytes >= LIMIT - SLICE && vb.usedBytes >= LIMIT - SLICE && va.periodKey === vb.periodKey ? true : undefined;
      },
      10_000,
      200,
    );
    const refusedOnA = await curl(['-p', '-x', `http://shared1:shared1-pass@127.0.0.1:${a.ports.http}`, bytes.url(MiB)]);
    assert.ok(
      refusedOnA.connect === 403 || refusedOnA.size < MiB,
      `A still serves the spent user: ${refusedOnA.connect} ${refusedOnA.size}`,
    );

    // Disabled on B: A refuses within its follow interval; deleted on A: B forgets the user.
    await admin(b, 'POST', '/v1/users', { name: 'shared2', password: 'shared2-pass', mainAccount: 'shop1', product: PRODUCT });
    await waitFor(
      'A to know shared2',
      async () => ((await admin(a, 'GET', '/v1/users/shared2')).status === 200 ? true : undefined),
      5000,
      100,
    );
    await waitFor(
      'A to serve shared2',
      async () =>
        (await curl(['-p', '-x', `http://shared2:shared2-pass@127.0.0.1:${a.ports.http}`, bytes.url(10)])).http === 200 ? true : undefined,
      15_000,
      200,
    );
    assert.equal((await admin(b, 'PATCH', '/v1/users/shared2', { enabled: false })).status, 200);
    await waitFor(
      'A to refuse the disabled user',
      async () =>
        (await curl(['-p', '-x', `http://shared2:shared2-pass@127.0.0.1:${a.ports.http}`, bytes.url(10)])).connect === 403
          ? true
          : undefined,
      5000,
      100,
    );
    assert.equal((await admin(a, 'DELETE', '/v1/users/shared2')).status, 204);
    await waitFor(
      'B to forget the deleted user',
      async () => ((await admin(b, 'GET', '/v1/users/shared2')).status === 404 ? true : undefined),
      5000,
      100,
    );
    assert.equal((await curl(['-x', `socks5h://shared2:shared2-pass@127.0.0.1:${b.ports.socks5}`, bytes.url(10)])).code, 97);
  });
});
