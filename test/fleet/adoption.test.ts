// billing.adoptPlatformUsage in a fleet: two daemons on one Redis, one sandbox platform (remote mode). The
// platform counts more for a user than Rotor did (traffic sent through the user's upstream credentials
// without Rotor), and both daemons' limit syncs see the same gap: it is added to the user's usage once for
// the fleet (the daemon holding the lease `usage-adoption` adopts), not once per daemon.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { startDaemon, type Daemon } from '../../src/main.ts';
import { PlatformClient } from '../../src/platform/client.ts';
import { startSimulator, SIM_PRODUCTS, type Simulator } from '../../src/sim/index.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import type { RedisConnection } from '../../src/store/redis-connection.ts';
import { testConfig } from '../e2e/harness.ts';
import { curl, startTarget, type BytesTarget } from '../e2e/limits-harness.ts';
import { connection, redisMissing, RedisServer } from './redis-server.ts';
import { poll } from '../support/wait.ts';
import { buyTraffic } from '../support/orders.ts';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const GAP = 3 * MiB;
const PREFIX = `fleetadopt${process.pid}:`;
const PRODUCT = SIM_PRODUCTS.dynamicTraffic;

const until = <T>(what: string, probe: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 30_000): Promise<T> =>
  poll(probe, { what, timeoutMs, everyMs: 50, ignoreErrors: true, done: (v) => v !== undefined && v !== false });

describe('platform usage adopted once per fleet', { skip: redisMissing }, () => {
  const redis = new RedisServer();
  let sim: Simulator;
  let client: PlatformClient;
  let a: Daemon;
  let b: Daemon;
  let bytes: BytesTarget;
  let conn: RedisConnection;

  /** Each daemon's adoption log lines ("platform reports more usage than counted locally; adopting it"). */
  const adoptions: Record<string, { localBytes: number; platformBytes: number }[]> = {};
  const logger = (id: string) => {
    const seen: { localBytes: number; platformBytes: number }[] = (adoptions[id] = []);
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const l of chunk.toString().split('\n')) {
          if (!l) continue;
          const line = JSON.parse(l) as { msg: string; localBytes: number; platformBytes: number };
          if (/adopting it/.test(line.msg)) seen.push({ localBytes: line.localBytes, platformBytes: line.platformBytes });
        }
        done();
      },
    });
    return createLogger({ level: 'info', destination: sink });
  };

  const start = (id: string): Promise<Daemon> =>
    startDaemon(
      testConfig({
        platform: { mode: 'remote', baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret, timeoutMs: 5000 },
        proxy: { connectTimeoutMs: 3000, handshakeTimeoutMs: 3000 },
        store: { path: redis.url },
        // The adoption lease outlives a slow renewal on a loaded machine (a lease moving mid-test is not the case here).
        fleet: { prefix: PREFIX, instanceId: id, sliceBytes: MiB, aliveTtlMs: 3000, leaseTtlMs: 15_000 },
        users: [{ name: 'hank', password: 'hank-pass', mainAccount: 'shop1', product: PRODUCT, limitBytes: GiB }],
        // Limit syncs far more often than flushes: without the lease each daemon would see the gap (and adopt it)
        // long before the other's adoption reached Redis and came back through its flush.
        accounts: { balancePollMs: 300, flushIntervalMs: 2000, limitSyncMs: 200 },
        billing: { adoptPlatformUsage: true },
      }),
      { logger: logger(id) },
    );

  /** What the platform counted for hank (GetProxyUserInfo useFlow, bytes). */
  const platformUsed = async (): Promise<number> =>
    Number((await client.call('GetProxyUserInfo', { appUsername: 'hank', productNo: PRODUCT })).useFlow ?? 0);
  const sharedUsed = async (): Promise<number> => Number((await conn.run('usage', (r) => r.hget(`${PREFIX}u:hank`, 'used'))) ?? 0);
  const infoCalls = (): number => sim.inspect.calls().GetProxyUserInfo ?? 0;

  before(async () => {
    await redis.start();
    sim = await startSimulator({ orderDelayMs: 200 });
    client = new PlatformClient({ baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret, retries: 0 });
    a = await start('adopt-a');
    await buyTraffic(client, 'shop1', PRODUCT, 10_240);
    b = await start('adopt-b');
    bytes = await startTarget();
    conn = await connection(redis.url);
    for (const d of [a, b])
      await until(
        'hank served',
        async () => (await curl(['-x', `http://hank:hank-pass@127.0.0.1:${d.ports.http}`, bytes.url(1000)])).http === 200,
      );
  });

  after(async () => {
    await Promise.allSettled([a?.close(), b?.close()]);
    client?.close();
    await Promise.allSettled([conn?.close(), bytes?.close(), sim?.close()]);
    await redis.stop();
  });

  test('a gap the platform reports to both daemons is added once', async () => {
    // Rotor and the platform agree first (whatever the platform counts on top of Rotor's own traffic is adopted).
    await until('Rotor to have caught up with the platform', async () => (await sharedUsed()) >= (await platformUsed()));
    const before = await sharedUsed();
    const platformBefore = await platformUsed();

    // GAP bytes through hank's own upstream credentials, not through Rotor: only the platform counts them.
    const pool = a.pools.list().find((p) => p.key.user === 'hank');
    assert.ok(pool, "A has drawn hank's pool");
    const node = await pool.acquire();
    pool.release(node);
    const direct = await curl(['-x', `http://${node.username}:${node.password}@${node.host}:${node.port}`, bytes.url(GAP)]);
    assert.equal(direct.size, GAP, `direct through the upstream: ${direct.code} ${direct.stderr}`);
    const platform = await platformUsed();
    assert.ok(platform >= platformBefore + GAP, `the platform counted the gap: ${platform} vs ${platformBefore} + ${GAP}`);

    // Both daemons' limit syncs see the gap, several times over.
    await until('the gap to be adopted', async () => (await sharedUsed()) >= platform);
    const calls = infoCalls();
    await until('both daemons to have synced hank again several times', () => infoCalls() >= calls + 10);
    await Promise.all([a.fleet!.allowance.syncAll(), b.fleet!.allowance.syncAll()]);
    const after = await sharedUsed();
    console.log(
      `adoption: rotor ${before} B, platform ${platform} B after a ${GAP} B gap; fleet usage now ${after} B; ` +
        `adoptions a=${JSON.stringify(adoptions['adopt-a'])} b=${JSON.stringify(adoptions['adopt-b'])}`,
    );
    assert.ok(after >= platform, `adopted: ${after} >= ${platform}`);
    // One daemon adopted the gap: both saw it (their syncs ran every 200 ms, their flushes every 2 s).
    const adopters = Object.entries(adoptions).filter(([, seen]) => seen.some((x) => x.platformBytes >= platformBefore + GAP));
    assert.deepEqual(
      adopters.map(([id]) => id).length,
      1,
      `daemons that adopted the gap: ${adopters.map(([id, seen]) => `${id} ${JSON.stringify(seen)}`).join('; ')}`,
    );
    // Once: a second daemon adopting the same gap would put usage a whole GAP above the platform's figure.
    assert.ok(after < platform + GAP / 2, `usage ${after} B against the platform's ${platform} B: the gap was added more than once`);
    // Each daemon's view (re-read from Redis at its flush) comes to the same figure.
    for (const d of [a, b]) {
      const seen = await until(`daemon ${d.fleet!.instance} to see the adopted usage`, () => {
        const u = d.accounting.get('hank')!.usedBytes;
        return u >= platform ? u : undefined;
      });
      assert.ok(seen < platform + GAP / 2, `daemon ${d.fleet!.instance} sees ${seen} B`);
    }
  });
});
