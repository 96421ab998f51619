// Issue 5 end to end: the real daemon over the embedded sandbox (whose upstream proxies meter every byte
// against balances and sub-account limits), with real clients — curl through each listener and raw sockets.
// Limits hold to one chunk per connection and are then refused with a reason; counters survive a graceful
// restart and a kill -9 (losing at most one flush interval); the platform's accounts and whitelist match the
// config; the balance gauge tracks the sandbox; disabled accounts and empty balances are refused promptly.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { platformBackstopFor } from '../../src/accounting/units.ts';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { METRIC } from '../../src/telemetry/metrics.ts';
import { metricValue, startGateway, viaConnect, viaHttp, viaSocks5h, type Gateway } from './harness.ts';
import {
  CHUNK,
  MB5,
  cleanup,
  curl,
  rawConfig,
  socks5ReplyCode,
  spawnDaemon,
  startTarget,
  tempDir,
  userRow,
  waitFor,
  writeConfigFile,
  type BytesTarget,
  type TestUser,
} from './limits-harness.ts';

const MB20 = 20 * 1024 * 1024;

/** The user's counter as the daemon's SQLite file holds it (read-only, beside the running daemon); 0 before any flush. */
function storedUsedBytes(file: string, user: string): number {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const row = db.prepare('SELECT used_bytes FROM usage WHERE user = ?').get(user) as { used_bytes: number } | undefined;
    return Number(row?.used_bytes ?? 0);
  } finally {
    db.close();
  }
}
const FLOW = SIM_PRODUCTS.dynamicTraffic;
/** The sandbox's DYN-104-FLOW counts 1 MB = 1024² bytes. */
const MIB = 1024 * 1024;

let target: BytesTarget;
before(async () => {
  target = await startTarget();
});
after(async () => {
  await target?.close();
  cleanup();
});

/** users[] entries for startGateway's config (every key the schema wants spelled out). */
const configUsers = (users: TestUser[]) => users.map((u) => ({ draw: 'pwd', product: '', sessTime: 5, limitBytes: -1, ...u }));

describe('a user limited to 5 MB who downloads 20 MB', () => {
  let gw: Gateway;
  const users: TestUser[] = [
    { name: 'lim_connect', password: 'pw-connect-1', mainAccount: 'shop1', limitBytes: MB5 },
    { name: 'lim_http', password: 'pw-http-2', mainAccount: 'shop1', limitBytes: MB5 },
    { name: 'lim_socks', password: 'pw-socks-3', mainAccount: 'shop1', limitBytes: MB5 },
  ];
  before(async () => {
    gw = await startGateway({
      config: { users: configUsers(users), store: { path: join(tempDir(), 'rotor.db') }, pool: { lowWater: 1, drawBatch: 2 } },
    });
  });
  after(() => gw?.close());

  // Two downloads at once: the limit is per user, across connections.
  const CONNS = 2;
  async function downloadAll(args: string[]): Promise<number> {
    const runs = await Promise.all(Array.from({ length: CONNS }, () => curl([...args, target.url(MB20)])));
    // Each download is cut mid-body, or (plain HTTP, when the other download reached the limit while this
    // request was still waiting for its response head) answered with an error status instead of a body.
    for (const r of runs) {
      assert.ok(r.code !== 0 || (r.http ?? 0) >= 400, `a 20 MB download must be cut (got ${r.size} bytes, HTTP ${r.http})`);
    }
    return runs.reduce((s, r) => s + r.size, 0);
  }

  async function assertCutByRotor(name: string, received: number): Promise<void> {
    assert.ok(received <= MB5 + CHUNK * CONNS, `received ${received} bytes > 5 MB + ${CONNS} chunks`);
    assert.ok(received >= MB5 - MIB, `received only ${received} bytes: cut well before the limit`);
    // Rotor itself counted the limit (the platform's own limit is a looser backstop and did not cut first).
    const row = await userRow(gw.ports.admin, name);
    assert.ok(row.usedBytes >= MB5, `usedBytes ${row.usedBytes} < limit: something other than Rotor cut`);
    assert.equal(row.limitBytes, MB5);
    assert.equal(row.activeConnections, 0);
  }

  test('HTTP CONNECT (curl -p): at most 5 MB + one chunk per connection; the next CONNECT gets 403 and a one-line reason', async () => {
    const u = users[0]!;
    const args = viaConnect(gw.ports.http, u.name, u.password);
    await assertCutByRotor(u.name, await downloadAll(args));
    const next = await curl([...args, '-v', target.url(1000)], { maxTimeS: 5 });
    assert.equal(next.connect, 403, `CONNECT answer ${next.connect}: ${next.stderr}`);
    assert.equal(next.code, 56);
    assert.ok(next.ms < 3000, `refusal took ${next.ms} ms`);
  });

  test('plain HTTP: at most 5 MB + one chunk per connection; the next request gets 403 and a one-line reason', async () => {
    const u = users[1]!;
    const args = viaHttp(gw.ports.http, u.name, u.password);
    await assertCutByRotor(u.name, await downloadAll(args));
    const next = await curl([...args, target.url(1000)], { maxTimeS: 5, body: true });
    assert.equal(next.http, 403);
    assert.match(next.body, /^traffic limit of user lim_http reached \(5242880 bytes\)$/);
    assert.ok(next.ms < 3000, `refusal took ${next.ms} ms`);
  });

  test('SOCKS5: at most 5 MB + one chunk per connection; the next CONNECT gets reply 0x02 (curl exit 97)', async () => {
    const u = users[2]!;
    const args = viaSocks5h(gw.ports.socks5, u.name, u.password);
    await assertCutByRotor(u.name, await downloadAll(args));
    const next = await curl([...args, target.url(1000)], { maxTimeS: 5 });
    assert.equal(next.code, 97, next.stderr);
    assert.equal(await socks5ReplyCode(gw.ports.socks5, u.name, u.password, target.port), 0x02);
    // A wrong password is still an auth failure (0x01 at the RFC 1929 step), not the limit.
    assert.equal(await socks5ReplyCode(gw.ports.socks5, u.name, 'wrong-password', target.port), 0x101);
  });

  test('the CONNECT refusal reason is one line naming the limit', async () => {
    const u = users[0]!;
    const r = await nodeConnectStatus(gw.ports.http, u.name, u.password, target.port);
    assert.equal(r.status, 403);
    assert.equal(r.body, 'traffic limit of user lim_connect reached (5242880 bytes)');
  });
});

/** A raw CONNECT; returns the status and body of the proxy's answer. */
async function nodeConnectStatus(port: number, user: string, pass: string, targetPort: number): Promise<{ status: number; body: string }> {
  const { connect } = await import('node:net');
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port });
    let text = '';
    s.setEncoding('utf8');
    s.on('data', (c: string) => (text += c));
    s.on('error', reject);
    s.on('close', () => {
      const at = text.indexOf('\r\n\r\n');
      resolve({ status: Number(/^HTTP\/1\.1 (\d+)/.exec(text)?.[1] ?? 0), body: at >= 0 ? text.slice(at + 4) : '' });
    });
    const auth = Buffer.from(`${user}:${pass}`).toString('base64');
    s.write(`CONNECT 127.0.0.1:${targetPort} HTTP/1.1\r\nHost: 127.0.0.1:${targetPort}\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`);
  });
}

describe('counters survive a restart', () => {
  test('graceful close, then a new daemon over the same store file, shows the same usedBytes', async () => {
    const store = join(tempDir(), 'rotor.db');
    const user = { name: 'keeper', password: 'keeper-pw-7', mainAccount: 'shop1' };
    const config = {
      users: configUsers([user]),
      store: { path: store },
      accounts: { flushIntervalMs: 60_000 },
      pool: { lowWater: 1, drawBatch: 2 },
    };
    const first = await startGateway({ config });
    let used: number;
    try {
      const r = await curl([...viaSocks5h(first.ports.socks5, user.name, user.password), target.url(1_500_000)]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.size, 1_500_000);
      used = (await userRow(first.ports.admin, user.name)).usedBytes;
      assert.ok(used >= 1_500_000, `usedBytes ${used}`);
    } finally {
      // The flush interval is a minute: only the graceful close can have written the counter.
      await first.close();
    }
    const second = await startGateway({ config });
    try {
      assert.equal((await userRow(second.ports.admin, user.name)).usedBytes, used);
    } finally {
      await second.close();
    }
  });

  // SQLite only (also under ROTOR_TEST_STORE=redis): what survives a SIGKILL is what reached the store file;
  // in a fleet the bound is the allowance's (test/fleet/daemons.test.ts kills a daemon on Redis).
  test('kill -9 of `rotor start` loses at most the last flush interval', async () => {
    const dir = tempDir();
    const configFile = join(dir, 'rotor.yaml');
    const user = { name: 'crashy', password: 'crashy-pw-9', mainAccount: 'shop1' };
    const FLUSH_MS = 500;
    writeConfigFile(configFile, rawConfig(dir, [user], { accounts: { flushIntervalMs: FLUSH_MS } }));
    const first = await spawnDaemon(configFile, join(dir, 'first.log'));
    let persisted: number;
    let atKill: number;
    try {
      const a = await curl([...viaConnect(first.ports.http, user.name, user.password), target.url(1_000_000)]);
      assert.equal(a.code, 0, a.stderr);
      const counted = (await userRow(first.ports.admin, user.name)).usedBytes;
      // The flush timer (not a close) puts this much in the store file: read the file itself until it does.
      persisted = await waitFor(
        'the flush timer to write the counter',
        () => {
          const onDisk = storedUsedBytes(join(dir, 'rotor.db'), user.name);
          return onDisk >= counted ? onDisk : undefined;
        },
        20 * FLUSH_MS,
      );
      const b = await curl([...viaConnect(first.ports.http, user.name, user.password), target.url(300_000)]);
      assert.equal(b.code, 0, b.stderr);
      atKill = (await userRow(first.ports.admin, user.name)).usedBytes;
      assert.ok(atKill >= persisted + 300_000);
    } finally {
      first.signal('SIGKILL');
      assert.equal((await first.exited).signal, 'SIGKILL');
    }
    const second = await spawnDaemon(configFile, join(dir, 'second.log'));
    try {
      const after = (await userRow(second.ports.admin, user.name)).usedBytes;
      // Everything flushed before the last interval survived; what came after may or may not have.
      assert.ok(after >= persisted, `after restart ${after} < ${persisted} flushed before the last interval`);
      assert.ok(after <= atKill, `after restart ${after} > ${atKill} counted at the kill`);
    } finally {
      await second.stop();
    }
  });
});

describe('accounts, whitelist and balances against the sandbox', () => {
  let gw: Gateway;
  const POLL_MS = 500;
  const users: TestUser[] = [
    { name: 'alice', password: 'alice-secret-pw', mainAccount: 'shop1', limitBytes: MB5 },
    { name: 'bob', password: 'bob-secret-pw', mainAccount: 'shop2', draw: 'api' },
    { name: 'carol', password: 'carol-secret-pw', mainAccount: 'shop3' },
    { name: 'dave', password: 'dave-secret-pw', mainAccount: 'shop4' },
  ];
  before(async () => {
    gw = await startGateway({
      config: {
        users: configUsers(users),
        store: { path: join(tempDir(), 'rotor.db') },
        accounts: { balancePollMs: POLL_MS },
        pool: { lowWater: 1, drawBatch: 2 },
      },
    });
  });
  after(() => gw?.close());

  test('after start the platform holds every main and sub account of the config, enabled, with the limits', async () => {
    // The limits are checked in the background after start (src/users/platform-check.ts): its end is the gauge's.
    await waitFor(
      'the background platform check',
      async () => {
        const text = await gw.metricsText();
        return metricValue(text, METRIC.usersPlatformCheck, { state: 'pending' }) === 0 &&
          metricValue(text, METRIC.usersPlatformCheck, { state: 'checked' }) > 0
          ? true
          : undefined;
      },
      30_000,
    );
    const sim = gw.daemon.sim!;
    const mains = sim.inspect.accounts();
    for (const u of users) {
      const main = mains.find((m) => m.appUsername === u.mainAccount);
      assert.ok(main, `main account ${u.mainAccount} on the platform`);
      assert.equal(main.status, 1);
      const sub = main.subs.find((s) => s.appUsername === u.name);
      assert.ok(sub, `sub account ${u.name} under ${u.mainAccount}`);
      assert.equal(sub.status, 1);
      // The same through the platform API (GetProxyUserInfo via the admin escape hatch).
      const info = await gw.admin<{ data: { appUsername: string; status: number; limitFlow: number } }>(`/v1/platform/GetProxyUserInfo`, {
        body: { appUsername: u.name, productNo: FLOW },
      });
      assert.equal(info.status, 200, JSON.stringify(info.body));
      assert.equal(info.body.data.appUsername, u.name);
      assert.equal(info.body.data.status, 1);
      // Limited users carry a looser platform backstop; unlimited ones stay unlimited.
      assert.equal(Number(info.body.data.limitFlow), u.limitBytes ? platformBackstopFor(u.limitBytes) : -1);
    }
    assert.ok(platformBackstopFor(MB5) > MB5 + 2 * CHUNK);
  });

  test("the whitelist of the api user's main account holds the egress address 127.0.0.1", async () => {
    assert.ok(gw.daemon.sim!.inspect.balance('shop2', FLOW)?.whitelist.includes('127.0.0.1'));
    const wl = await gw.admin<unknown>(`/v1/whitelist?account=shop2&productNo=${FLOW}`);
    assert.equal(wl.status, 200);
    assert.match(JSON.stringify(wl.body), /"127\.0\.0\.1"/);
    // And the api user really works through it.
    const r = await curl([...viaSocks5h(gw.ports.socks5, 'bob', 'bob-secret-pw'), target.url(10_000)]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.size, 10_000);
  });

  test('rotor_flow_balance_bytes follows the sandbox balance within one poll interval of traffic', async () => {
    const sim = gw.daemon.sim!;
    const simMb = () => sim.inspect.balance('shop1', FLOW)!.remainingBytes / MIB;
    // The gauge is bytes at the product's MB size (1024² for this product): compared in MB here.
    const gauge = async () => metricValue(await gw.metricsText(), METRIC.flowBalance, { account: 'shop1', product: FLOW }) / MIB;
    const before = await waitFor(
      'the first balance poll',
      async () => (Math.abs((await gauge()) - simMb()) < 0.002 ? gauge() : undefined),
      15_000,
    );
    const r = await curl([...viaHttp(gw.ports.http, 'alice', 'alice-secret-pw'), target.url(3 * MIB)]);
    assert.equal(r.code, 0, r.stderr);
    const doneAt = Date.now();
    const expected = simMb();
    assert.ok(before - expected >= 3, `the sandbox charged the 3 MB (${before} -> ${expected})`);
    // One poll interval, plus scheduling slack on a loaded machine (timers and scrapes there run seconds late;
    // a gauge that stopped following never catches up at all).
    const SLACK_MS = 8000;
    const seen = await waitFor(
      'the gauge to show the new balance',
      async () => (Math.abs((await gauge()) - expected) < 0.002 ? true : undefined),
      POLL_MS + SLACK_MS,
      25,
    );
    assert.equal(seen, true);
    const lag = Date.now() - doneAt;
    assert.ok(lag <= POLL_MS + SLACK_MS, `gauge caught up after ${lag} ms`);
  });

  test('a disabled main account is refused at once with a reason (403 / SOCKS 0x02) after a reload', async () => {
    const ok = await curl([...viaConnect(gw.ports.http, 'carol', 'carol-secret-pw'), target.url(1000)]);
    assert.equal(ok.code, 0, ok.stderr);
    const disable = await gw.admin('/v1/platform/CreateUser', { body: { appUsername: 'shop3', status: 2 } });
    assert.equal(disable.status, 200, JSON.stringify(disable.body));
    await gw.daemon.reload(gw.config);
    const plain = await curl([...viaHttp(gw.ports.http, 'carol', 'carol-secret-pw'), target.url(1000)], { maxTimeS: 5, body: true });
    assert.equal(plain.http, 403);
    assert.equal(plain.body, 'main account shop3 is disabled on the platform');
    assert.ok(plain.ms < 3000, `refusal took ${plain.ms} ms`);
    const tunnel = await nodeConnectStatus(gw.ports.http, 'carol', 'carol-secret-pw', target.port);
    assert.deepEqual(tunnel, { status: 403, body: 'main account shop3 is disabled on the platform' });
    assert.equal(await socks5ReplyCode(gw.ports.socks5, 'carol', 'carol-secret-pw', target.port), 0x02);
    // Other users are untouched.
    assert.equal((await curl([...viaHttp(gw.ports.http, 'dave', 'dave-secret-pw'), target.url(1000)])).code, 0);
  });

  test('an exhausted balance is refused with a reason within a poll, not hung', async () => {
    const sim = gw.daemon.sim!;
    // Give back every whole MB the sandbox credited (DynamicProxyReturn), leaving less than 1 MB …
    const wholeMb = Math.floor(sim.inspect.balance('shop4', FLOW)!.remainingBytes / MIB);
    const ret = await gw.admin(`/v1/accounts/shop4/return`, { body: { productNo: FLOW, flowNum: wholeMb } });
    assert.equal(ret.status, 200, JSON.stringify(ret.body));
    assert.ok(sim.inspect.balance('shop4', FLOW)!.remainingBytes < MIB);
    // … which a download uses up: the platform cuts it.
    const drain = await curl([...viaSocks5h(gw.ports.socks5, 'dave', 'dave-secret-pw'), target.url(2 * MIB)]);
    assert.notEqual(drain.code, 0);
    assert.equal(sim.inspect.balance('shop4', FLOW)!.remainingBytes, 0);
    // Within a poll interval Rotor refuses dave with the reason, promptly, on both listeners. Until the balance
    // is read again, the sandbox's upstream cuts the exhausted account's requests (502) or refuses its
    // credentials (403, ACCOUNT_REFUSED): the only other answers allowed meanwhile, each prompt.
    const reason = `traffic balance of main account shop4 for product ${FLOW} is exhausted`;
    const interim: string[] = [];
    const refused = await waitFor(
      'dave to be refused for the balance',
      async () => {
        const r = await curl([...viaHttp(gw.ports.http, 'dave', 'dave-secret-pw'), target.url(1000)], { maxTimeS: 5, body: true });
        if (r.http === 403 && r.body === reason) return r;
        interim.push(`${r.http} ${r.body}`);
        return undefined;
      },
      POLL_MS + 3000,
      100,
    );
    for (const a of interim)
      assert.match(a, /^(403 the platform refused the user's account|502 )/, `answered before the reason: ${interim.join(' | ')}`);
    assert.ok(refused.ms < 3000, `refusal took ${refused.ms} ms`);
    assert.equal(await socks5ReplyCode(gw.ports.socks5, 'dave', 'dave-secret-pw', target.port), 0x02);
    const tunnel = await curl([...viaConnect(gw.ports.http, 'dave', 'dave-secret-pw'), target.url(1000)], { maxTimeS: 5 });
    assert.equal(tunnel.connect, 403);
    assert.equal(metricValue(await gw.metricsText(), METRIC.flowBalance, { account: 'shop4', product: FLOW }), 0);
  });
});
