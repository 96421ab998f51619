// On Redis (the fleet's store) one customer's portal reads read that customer's keys only: the portal's own page
// polls GET /portal/api/connections?limit=20 every 5 s for every signed-in customer (web/portal/app/portal.js), and
// its usage page asks for up to 400 days of hourly rows. Without a per-user index (src/store/redis-connection-log.ts)
// a customer with fewer than 20 records among the log's (up to 1,000,000) made each poll read and parse the whole
// log (201 HMGETs of 500 records, 581 ms, for 100,000 records of another customer), and one usage page fetched every
// customer's rollups of every hour in its window (39.9 MB). Run on a real redis-server with the in-process daemon.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { startGateway, type Gateway } from '../e2e/harness.ts';
import { testRedisUrl } from '../support/store.ts';
import { openBackends, type Backends } from '../../src/store/index.ts';
import type { ConnectionRecord } from '../../src/connlog/types.ts';

const TOKEN = 'r12-scan-token';
const OTHERS = 100_000;
let gw: Gateway;
let backends: Backends;
let redis: Redis;

async function hmgetCalls(): Promise<number> {
  const info = await redis.info('commandstats');
  return Number(/cmdstat_hmget:calls=(\d+)/.exec(info)?.[1] ?? 0);
}

before(async () => {
  const url = await testRedisUrl();
  const prefix = `r12scan${randomBytes(4).toString('hex')}:`;
  gw = await startGateway({ config: { admin: { token: TOKEN }, store: { path: url }, fleet: { prefix } } });
  redis = new Redis(url);
  // The setup's own connection is not under test: a generous timeout (the run's Redis is shared by every test file).
  backends = await openBackends(url, { prefix, commandTimeoutMs: 10_000 });
  // Another customer's busy week: 100,000 records in the fleet's log (written through the store's own append).
  const log = backends.connectionLog({ maxRecords: 1_000_000 });
  const t0 = Date.now() - 3_600_000;
  // Batches of 500 as the recorder writes them (log.access.batchSize): one script each, within the command timeout
  // on a loaded machine.
  for (let b = 0; b < OTHERS / 500; b++) {
    const batch: ConnectionRecord[] = [];
    for (let i = 0; i < 500; i++) {
      const n = b * 500 + i;
      batch.push({
        id: `other-${n}`,
        user: 'bob',
        session: null,
        listener: 'http',
        client: '127.0.0.1',
        target: 'example.com:443',
        node: 'socks5://x@127.0.0.2:1080',
        bytesUp: 100,
        bytesDown: 1000,
        startedAt: t0 + n,
        durationMs: 5,
        result: 'ok',
        reason: 'closed',
        retries: 0,
        hedges: 0,
      } as ConnectionRecord);
    }
    await log.append(batch);
  }
  // And 2,000 customers' hourly usage over the last 200 hours (their rollups, as the recorder writes them).
  const hour0 = Math.floor(Date.now() / 3_600_000) * 3_600_000 - 200 * 3_600_000;
  for (let h = 0; h < 200; h++) {
    const rows = [];
    for (let k = h; k < h + 1; k++)
      for (let u = 0; u < 2000; u++)
        rows.push({
          user: `cust${u}`,
          granularity: 'hour' as const,
          period: hour0 + k * 3_600_000,
          bytesUp: 10,
          bytesDown: 100,
          connections: 1,
          failures: 0,
        });
    await log.append([], rows);
  }
  assert.equal((await gw.admin('/v1/users', { body: { name: 'carol', mainAccount: 'shop1', password: 'alice-pass-1' } })).status, 201);
});

after(async () => {
  await backends?.close();
  redis?.disconnect();
  await gw?.close();
});

test("one customer's portal poll of its connections does not read the whole fleet's log", async (tc) => {
  const login = await fetch(`${gw.adminUrl}/portal/api/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ user: 'carol', password: 'alice-pass-1' }),
  });
  assert.equal(login.status, 204);
  const cookie = /^(rotor_portal=[A-Za-z0-9_-]+)/.exec(login.headers.get('set-cookie') ?? '')?.[1];
  assert.ok(cookie);
  const before = await hmgetCalls();
  const t = performance.now();
  const res = await fetch(`${gw.adminUrl}/portal/api/connections?limit=20`, { headers: { cookie } });
  const ms = Math.round(performance.now() - t);
  assert.equal(res.status, 200);
  const body = (await res.json()) as { recent: unknown[] };
  const reads = (await hmgetCalls()) - before;
  tc.diagnostic(`poll: ${reads} HMGETs, ${body.recent.length} records, ${ms} ms`);
  assert.ok(
    reads <= 10,
    `the portal's 5-second poll of one customer (${body.recent.length} records of its own) made ${reads} HMGETs of 500 records ` +
      `(~${reads * 500} other customers' records read and parsed) and took ${ms} ms`,
  );
});

async function netOut(): Promise<number> {
  return Number(/total_net_output_bytes:(\d+)/.exec(await redis.info('stats'))?.[1] ?? 0);
}

test("one customer's portal usage read does not fetch every customer's rollups", async (tc) => {
  const login = await fetch(`${gw.adminUrl}/portal/api/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ user: 'carol', password: 'alice-pass-1' }),
  });
  const cookie = /^(rotor_portal=[A-Za-z0-9_-]+)/.exec(login.headers.get('set-cookie') ?? '')?.[1];
  assert.ok(cookie);
  const to = Date.now();
  const from = to - 9 * 86_400_000;
  const before = await netOut();
  const t = performance.now();
  const res = await fetch(`${gw.adminUrl}/portal/api/usage?granularity=hour&from=${from}&to=${to}`, { headers: { cookie } });
  const ms = Math.round(performance.now() - t);
  assert.equal(res.status, 200);
  const rows = (await res.json()) as unknown[];
  const sent = (await netOut()) - before;
  tc.diagnostic(`usage page: Redis sent ${sent} B, ${rows.length} rows, ${ms} ms`);
  assert.ok(
    sent < 256 * 1024,
    `one customer's hourly usage page (${rows.length} rows of its own) made Redis send ${sent} bytes (every customer's rollups of every hour) and took ${ms} ms`,
  );
});
