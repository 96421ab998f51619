// Redis restarted under a running fleet (stopped, then started again on the same port, empty: the test server
// keeps nothing on disk), and later emptied by FLUSHALL while the fleet runs. Two daemons, one sandbox
// platform (remote mode), downloads running through both:
//   (a) during the outage each daemon serves every user from what it holds (its share of what the user has
//       left): no download of a user with budget is cut, no 407/403 for them, before, during or after;
//   (b) the emptied Redis is rebuilt by the daemons from what they hold: the user records (password hashes
//       included), the meters (not counted twice), the sticky sessions; a daemon started afterwards serves a
//       user made through the API before the loss;
//   (c) each daemon warned at start, once, that this Redis keeps nothing on disk.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { startDaemon, type Daemon } from '../../src/main.ts';
import { PlatformClient } from '../../src/platform/client.ts';
import { startSimulator, SIM_PRODUCTS, type Simulator } from '../../src/sim/index.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import type { RedisConnection } from '../../src/store/redis-connection.ts';
import { startTarget as startExitTarget, testConfig, type Target } from '../e2e/harness.ts';
import { curl, startTarget, type BytesTarget, type CurlResult } from '../e2e/limits-harness.ts';
import { connection, ping, redisMissing, RedisServer } from './redis-server.ts';
import { poll } from '../support/wait.ts';
import { buyTraffic } from '../support/orders.ts';

const KiB = 1024;
const MiB = 1024 * KiB;
const SLICE = 256 * KiB;
const OFFLINE = 128 * KiB;
const GiB = 1024 * MiB;
/** Each download: paced at the source, long enough to span the outage. */
const RATE = MiB;
const DOWNLOAD = 8 * MiB;
const PREFIX = `fleetrestart${process.pid}:`;
const PRODUCT = SIM_PRODUCTS.dynamicTraffic;

interface LogLine {
  level: number;
  msg: string;
}

function memoryLogger(): { logger: ReturnType<typeof createLogger>; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n')) if (l) lines.push(JSON.parse(l) as LogLine);
      done();
    },
  });
  return { logger: createLogger({ level: 'info', destination: sink }), lines };
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

const until = <T>(what: string, probe: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 20_000): Promise<T> =>
  poll(probe, { what, timeoutMs, everyMs: 50, ignoreErrors: true, done: (v) => v !== undefined && v !== false });

describe('a fleet through a Redis restart and an emptied Redis', { skip: redisMissing }, () => {
  const redis = new RedisServer();
  let sim: Simulator;
  let a: Daemon;
  let b: Daemon;
  let c: Daemon | undefined;
  const logs: Record<string, LogLine[]> = {};
  let bytes: BytesTarget;
  let exits: Target;
  let conn: RedisConnection;
  /** Body bytes each user's clients received through the fleet (downloads and probes). */
  const received: Record<string, number> = { frank: 0, gina: 0 };

  const start = (name: string): Promise<Daemon> => {
    const { logger, lines } = memoryLogger();
    logs[name] = lines;
    return startDaemon(
      testConfig({
        platform: { mode: 'remote', baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret, timeoutMs: 5000 },
        proxy: { connectTimeoutMs: 3000, handshakeTimeoutMs: 3000 },
        store: { path: redis.url },
        fleet: { prefix: PREFIX, instanceId: `restart-${name}`, sliceBytes: SLICE, offlineBytes: OFFLINE, aliveTtlMs: 3000 },
        users: [{ name: 'frank', password: 'frank-pass', mainAccount: 'shop1', product: PRODUCT, limitBytes: GiB }],
        accounts: { balancePollMs: 300, flushIntervalMs: 300 },
      }),
      { logger },
    );
  };

  const via = (d: Daemon, user: string, kind: 'http' | 'socks' = 'http'): string[] =>
    kind === 'http'
      ? ['-x', `http://${user}:${user}-pass@127.0.0.1:${d.ports.http}`]
      : ['-x', `socks5h://${user}:${user}-pass@127.0.0.1:${d.ports.socks5}`];

  before(async () => {
    await redis.start();
    sim = await startSimulator({ orderDelayMs: 200 });
    a = await start('a');
    const client = new PlatformClient({ baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret, retries: 0 });
    await buyTraffic(client, 'shop1', PRODUCT, 10_240);
    client.close();
    b = await start('b');
    bytes = await startTarget();
    exits = await startExitTarget();
    conn = await connection(redis.url);
    // gina exists only as data: made through A's admin API, never in any config.
    const made = await admin(a, 'POST', '/v1/users', {
      name: 'gina',
      password: 'gina-pass',
      mainAccount: 'shop1',
      product: PRODUCT,
      quota: { bytes: GiB, period: 'total' },
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    for (const d of [a, b])
      for (const user of ['frank', 'gina'])
        await until(`${user} served`, async () => {
          const r = await curl([...via(d, user), bytes.url(10)]);
          if (r.http === 200) received[user]! += r.size;
          return r.http === 200;
        });
  });

  after(async () => {
    await Promise.allSettled([a?.close(), b?.close(), c?.close()]);
    await Promise.allSettled([conn?.close(), bytes?.close(), exits?.close(), sim?.close()]);
    await redis.stop();
  });

  test('(a) a Redis restart during downloads: no download cut, no refusal for users with budget', async () => {
    const downloads: Promise<CurlResult>[] = [];
    const plan: { user: string; d: Daemon; kind: 'http' | 'socks' }[] = [
      { user: 'frank', d: a, kind: 'http' },
      { user: 'frank', d: b, kind: 'socks' },
      { user: 'gina', d: a, kind: 'socks' },
      { user: 'gina', d: b, kind: 'http' },
    ];
    for (const p of plan) downloads.push(curl([...via(p.d, p.user, p.kind), bytes.url(DOWNLOAD, RATE)], { maxTimeS: 90 }));
    let running = true;
    const all = Promise.all(downloads).finally(() => (running = false));
    // New connections all along (407 = not recognised, 403 = refused), through both daemons, both users.
    const refusals: string[] = [];
    let probes = 0;
    const probing = (async () => {
      while (running) {
        await Promise.all(
          [a, b].flatMap((d) =>
            ['frank', 'gina'].map(async (user) => {
              const r = await curl(['-p', ...via(d, user), bytes.url(1000)]);
              probes++;
              if (r.http === 200) received[user]! += r.size;
              else refusals.push(`${user}@${d.fleet!.instance}: ${r.connect || r.http} (curl ${r.code})`);
            }),
          ),
        );
      }
    })();
    // Every download under way before Redis goes.
    const spent = (d: Daemon, user: string) => d.accounting.get(user)?.usedBytes ?? 0;
    await until('the downloads to be under way', () => plan.every((p) => spent(p.d, p.user) > 256 * KiB), 30_000);

    await redis.kill();
    const t0 = Date.now();
    for (const name of ['a', 'b'])
      await until(`daemon ${name} to see the outage`, () => logs[name]!.some((l) => l.level >= 50 && /redis is unreachable/.test(l.msg)));
    // Down long enough that each daemon relays, per user, several times its slice plus its offline allowance.
    const mark = new Map(plan.map((p) => [`${p.user}@${p.d.fleet!.instance}`, spent(p.d, p.user)]));
    await until(
      'each daemon to relay 4 × (slice + offline) per user while Redis is down (or the downloads to end)',
      () => !running || plan.every((p) => spent(p.d, p.user) - mark.get(`${p.user}@${p.d.fleet!.instance}`)! >= 4 * (SLICE + OFFLINE)),
      30_000,
    );
    const outageMs = Date.now() - t0;
    await redis.start();
    await until('redis to answer PING', () => ping(redis.port));

    const results = await all;
    await probing;
    results.forEach((r, i) => {
      received[plan[i]!.user]! += r.size;
    });
    console.log(
      `redis restart: down ${outageMs} ms; ${plan.length} downloads of ${DOWNLOAD} B at ${RATE} B/s: ` +
        `${results.map((r) => `${r.size}/${r.code}`).join(' ')}; ${refusals.length} refusals of ${probes} probes`,
    );
    assert.deepEqual(refusals, [], `refused during the restart: ${refusals.slice(0, 10).join('; ')}`);
    results.forEach((r, i) => assert.equal(r.size, DOWNLOAD, `download ${i} (${plan[i]!.user}) cut: curl ${r.code} ${r.stderr}`));
  });

  test('(b) an emptied Redis is rebuilt from what the daemons hold: users, meters, sessions', async () => {
    // After (a)'s restart Redis came back empty: the daemons put back what they hold.
    const key = (k: string) => `${PREFIX}${k}`;
    const rebuilt = async () => {
      await until('gina and frank back in redis', async () => {
        const [g, f] = await conn.run('check', (r) => Promise.all([r.exists(key('usr:gina')), r.exists(key('usr:frank'))]));
        return g === 1 && f === 1;
      });
    };
    await rebuilt();
    const sessionExit = async (d: Daemon): Promise<string> => {
      const r = await curl(['-x', `http://frank-session-keep1:frank-pass@127.0.0.1:${d.ports.http}`, exits.url()], { body: true });
      assert.equal(r.http, 200, `${r.code} ${r.stderr}`);
      return r.body;
    };
    const exit = await sessionExit(a);
    assert.equal(await sessionExit(b), exit);

    // Emptied again while the fleet runs.
    await conn.run('flushall', (r) => r.flushall());
    await rebuilt();
    await until('the sticky session back in redis', async () => (await conn.run('keys', (r) => r.keys(key('sess:frank:*')))).length > 0);
    // Meters: each user's shared usage is what its clients received (plus requests and headers), never twice.
    // The rebuild converges over sync rounds: a daemon that sees the loss inside a round folds its view in, and
    // every user is synced in the round after (syncAll's everyoneNext). So the usage is read once it covers what
    // the clients received, within the safety timeout; a byte lost for good still fails here.
    for (const user of ['frank', 'gina']) {
      let seen: Record<string, string> = {};
      const u = await until(`${user}'s usage back`, async () => {
        await Promise.all([a.fleet!.allowance.syncAll(), b.fleet!.allowance.syncAll()]);
        seen = await conn.run('usage', (r) => r.hgetall(key(`u:${user}`)));
        return seen.used !== undefined && seen.limit !== undefined && Number(seen.used) >= received[user]! ? seen : undefined;
      }).catch((err: unknown) => {
        throw new Error(`${(err as Error).message}: used ${seen.used}, limit ${seen.limit}; clients received ${received[user]} B`);
      });
      const used = Number(u.used);
      console.log(`rebuilt ${user}: used ${used} B, limit ${u.limit}; clients received ${received[user]} B`);
      assert.equal(Number(u.limit), GiB);
      assert.ok(used >= received[user]!, `${user}: used ${used} < received ${received[user]}`);
      assert.ok(used <= received[user]! * 1.05 + 256 * KiB, `${user}: used ${used} vs received ${received[user]} (counted twice?)`);
    }
    // Both daemons still know both users; a session id keeps its exit through either.
    for (const d of [a, b]) {
      for (const user of ['frank', 'gina']) assert.equal((await admin(d, 'GET', `/v1/users/${user}`)).status, 200);
    }
    assert.equal(await sessionExit(b), exit);
    // A daemon started after the loss serves the API-made user (its record and hash came back from A and B).
    c = await start('c');
    assert.equal((await admin(c, 'GET', '/v1/users/gina')).status, 200);
    const r = await curl([...via(c, 'gina'), bytes.url(1000)]);
    assert.equal(r.http, 200, `gina through a daemon started after the loss: ${r.connect || r.http} ${r.stderr}`);
  });

  test('(c) each daemon warned once at start that Redis keeps nothing on disk', () => {
    for (const name of ['a', 'b']) {
      const warned = logs[name]!.filter((l) => l.level === 40 && /persistence off/.test(l.msg));
      assert.equal(warned.length, 1, `daemon ${name}: ${warned.map((l) => l.msg).join(' | ')}`);
    }
  });
});
