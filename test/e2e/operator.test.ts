// Issue 7 end to end, against `rotor start --config FILE` as a child process (the real CLI, its signal
// handling and its JSON logs on stdout, written to a file at level debug):
// - SIGHUP applies new limits while downloads run: a lowered limit cuts the running download at the new
//   limit and refuses the next connection; a raised one lets a download that would have been cut finish;
// - an invalid config on SIGHUP is refused with the reason in the log, and the old config keeps running;
// - /metrics after traffic holds every metric of docs/reference.md's table, with samples for those traffic moves;
// - after traffic, an order, bad logins and a bad admin token, no log line holds the platform secret, a user
//   password, a tried password or the admin token.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SIM_DEFAULTS, SIM_PRODUCTS } from '../../src/sim/index.ts';
import { METRIC } from '../../src/telemetry/metrics.ts';
import { metricValue, viaConnect, viaHttp, viaSocks5h } from './harness.ts';
import { testStoreConfig } from '../support/store.ts';
import {
  CHUNK,
  adminGet,
  adminSend,
  cleanup,
  curl,
  rawConfig,
  scrape,
  spawnDaemon,
  startTarget,
  tempDir,
  userRow,
  waitFor,
  writeConfigFile,
  type BytesTarget,
  type ChildDaemon,
  type TestUser,
} from './limits-harness.ts';

const MIB = 1024 * 1024;
const TOKEN = 'op-admin-token-Zq81xK';
const WRONG_PASSWORD = 'not-the-pw-Hh72';

const users: TestUser[] = [
  // Lowered on SIGHUP while it downloads.
  { name: 'shrink', password: 'shrink-pw-Ab12', mainAccount: 'shop1', limitBytes: 40 * MIB },
  // Raised on SIGHUP while it downloads something its old limit would cut.
  { name: 'grow', password: 'grow-pw-Cd34', mainAccount: 'shop1', limitBytes: 3 * MIB },
  // Traffic for the metrics and the log.
  { name: 'plain', password: 'plain-pw-Ef56', mainAccount: 'shop2' },
];

let target: BytesTarget;
let daemon: ChildDaemon;
let dir: string;
let configFile: string;
let store: Awaited<ReturnType<typeof testStoreConfig>>;

function config(limits: Record<string, number>): ReturnType<typeof rawConfig> {
  return rawConfig(
    dir,
    users.map((u) => ({ ...u, limitBytes: limits[u.name] ?? u.limitBytes })),
    { admin: { token: TOKEN }, log: 'debug', accounts: { balancePollMs: 500, flushIntervalMs: 500 }, store },
  );
}

before(async () => {
  target = await startTarget();
  dir = tempDir();
  // The child daemon's store follows ROTOR_TEST_STORE (on Redis: a fleet of one on this process's test Redis).
  store = await testStoreConfig(join(dir, 'rotor.db'));
  configFile = join(dir, 'rotor.yaml');
  writeConfigFile(configFile, config({}));
  daemon = await spawnDaemon(configFile, join(dir, 'rotor.log'));
});
after(async () => {
  await daemon?.stop();
  await target?.close();
  cleanup();
});

const reloads = (): number => daemon.lines().filter((l) => l.msg === 'configuration reloaded').length;

describe('SIGHUP', () => {
  test('applies a lower and a higher limit while downloads continue', async () => {
    const shrink = users[0]!;
    const grow = users[1]!;
    // Both downloads are paced by the target (512 KiB/s) so they are mid-way when the signal lands: the reload,
    // with the admin reads around it, has about 5 s before grow's old 3 MiB limit and 10 s before shrink's new
    // 6 MiB (at 2 MiB/s a loaded machine's reload came after shrink had reached 6 MiB).
    const RATE = MIB / 2;
    const shrinking = curl([...viaConnect(daemon.ports.http, shrink.name, shrink.password), target.url(30 * MIB, RATE)], { maxTimeS: 30 });
    const growing = curl([...viaSocks5h(daemon.ports.socks5, grow.name, grow.password), target.url(5 * MIB, RATE)], { maxTimeS: 30 });
    await waitFor(
      'both downloads to pass 512 KiB',
      async () => {
        const [a, b] = await Promise.all([userRow(daemon.ports.admin, shrink.name, TOKEN), userRow(daemon.ports.admin, grow.name, TOKEN)]);
        return a.usedBytes > MIB / 2 && b.usedBytes > MIB / 2 ? true : undefined;
      },
      10_000,
      50,
    );
    const before = reloads();
    const NEW_SHRINK = 6 * MIB;
    writeConfigFile(configFile, config({ shrink: NEW_SHRINK, grow: 50 * MIB }));
    daemon.signal('SIGHUP');
    await waitFor('the reload', () => (reloads() > before ? true : undefined), 10_000);
    const usedAtReload = (await userRow(daemon.ports.admin, shrink.name, TOKEN)).usedBytes;
    assert.ok(usedAtReload < NEW_SHRINK - MIB, `the download was still under the new limit at the reload (${usedAtReload})`);

    const [s, g] = await Promise.all([shrinking, growing]);
    // Lowered: the running download went on past the reload and was cut at the new limit.
    assert.notEqual(s.code, 0, "the lowered user's download is cut");
    assert.ok(s.size <= NEW_SHRINK + CHUNK, `received ${s.size} > new limit + one chunk`);
    assert.ok(s.size >= NEW_SHRINK - 512 * 1024, `received ${s.size}: cut before the new limit`);
    // Raised: 5 MB through a user whose old limit was 3 MB finished.
    assert.equal(g.code, 0, g.stderr);
    assert.equal(g.size, 5 * MIB);

    const rows = await adminGet<Array<{ name: string; limitBytes: number; usedBytes: number }>>(daemon.ports.admin, '/v1/users', TOKEN);
    assert.equal(rows.find((r) => r.name === shrink.name)?.limitBytes, NEW_SHRINK);
    assert.equal(rows.find((r) => r.name === grow.name)?.limitBytes, 50 * MIB);
    // A later connection of the lowered user is refused.
    const next = await curl([...viaHttp(daemon.ports.http, shrink.name, shrink.password), target.url(1000)], { maxTimeS: 5, body: true });
    assert.equal(next.http, 403);
    assert.match(next.body, /^traffic limit of user shrink reached \(6291456 bytes\)$/);
  });

  test('an invalid config is refused with the reason in the log; the old config keeps running', async () => {
    const good = readFileSync(configFile, 'utf8');
    const bad = config({});
    (bad.users as Array<{ limitBytes: number }>)[2]!.limitBytes = -7;
    (bad.proxy as Record<string, unknown>).bogusKey = true;
    writeConfigFile(configFile, bad);
    const before = daemon.lines().length;
    const reloadsBefore = reloads();
    daemon.signal('SIGHUP');
    const refused = await waitFor(
      'the refusal in the log',
      () =>
        daemon
          .lines()
          .slice(before)
          .find((l) => l.msg === 'reload refused; the running configuration is kept'),
      10_000,
    );
    assert.equal(refused.level, 50, 'logged as an error');
    const reason = JSON.stringify(refused.err);
    assert.match(reason, /users\.2\.limitBytes/);
    assert.match(reason, /proxy\.bogusKey: unknown key/);
    // Still running with the previous configuration: limits as before, users served. (The refusal line is
    // the reload's last act: nothing further is pending.)
    assert.equal(daemon.child.exitCode, null);
    assert.equal(reloads(), reloadsBefore, 'no reload since the bad file');
    assert.equal((await userRow(daemon.ports.admin, 'shrink', TOKEN)).limitBytes, 6 * MIB);
    assert.equal((await userRow(daemon.ports.admin, 'plain', TOKEN)).limitBytes, -1);
    const r = await curl([...viaHttp(daemon.ports.http, 'plain', 'plain-pw-Ef56'), target.url(1000)]);
    assert.equal(r.code, 0, r.stderr);
    writeFileSync(configFile, good);
  });
});

describe('metrics and logs after a full run', () => {
  test('/metrics has every metric of docs/reference.md; the ones traffic and orders move have samples', async () => {
    const plain = users[2]!;
    // Traffic through every path, a sticky session rotated by hand, a refused target, a bad login.
    const downBefore = metricValue(await scrape(daemon.ports.admin), METRIC.bytesTotal, { user: plain.name, direction: 'down' });
    for (const args of [
      viaConnect(daemon.ports.http, plain.name, plain.password),
      viaHttp(daemon.ports.http, plain.name, plain.password),
      viaSocks5h(daemon.ports.socks5, plain.name, plain.password),
    ]) {
      const r = await curl([...args, target.url(200_000)]);
      assert.equal(r.code, 0, r.stderr);
    }
    const sticky = await curl([...viaSocks5h(daemon.ports.socks5, `${plain.name}-session-s1`, plain.password), target.url(1000)]);
    assert.equal(sticky.code, 0, sticky.stderr);
    assert.equal((await adminSend(daemon.ports.admin, 'DELETE', `/v1/sessions/${plain.name}/s1`, undefined, TOKEN)).status < 300, true);
    const dead = await curl([...viaConnect(daemon.ports.http, plain.name, plain.password), 'http://127.0.0.1:1/'], { maxTimeS: 10 });
    assert.equal(dead.connect >= 500 ? 'refused' : dead.connect, 'refused');
    await badLogins();
    // A static order, completed through the sandbox's callback.
    const order = await adminSend<{ orderNo?: string; appOrderNo: string }>(
      daemon.ports.admin,
      'POST',
      '/v1/orders/open',
      { productNo: SIM_PRODUCTS.staticUsSocks, count: 1, cycleTimes: 1 },
      TOKEN,
    );
    assert.equal(order.status, 202, JSON.stringify(order.body));
    await waitFor(
      'the order to complete',
      async () => {
        const o = await adminGet<{ status: number }>(daemon.ports.admin, `/v1/orders/${order.body.appOrderNo}`, TOKEN);
        return o.status >= 3 ? o : undefined;
      },
      15_000,
      200,
    );

    const text = await waitFor(
      'counters and gauges to be flushed',
      async () => {
        const t = await scrape(daemon.ports.admin);
        return metricValue(t, METRIC.callbacks) > 0 &&
          metricValue(t, METRIC.instances) > 0 &&
          metricValue(t, METRIC.userUsedBytes, { user: plain.name }) > 600_000
          ? t
          : undefined;
      },
      10_000,
      200,
    );
    for (const name of Object.values(METRIC)) {
      assert.match(text, new RegExp(`^# TYPE ${name} (counter|gauge|histogram)$`, 'm'), `${name} registered`);
    }
    // Every metric has samples after this run (histograms as _count).
    const moved = (name: string, labels: Record<string, string> = {}) => metricValue(text, name, labels);
    assert.ok(moved(METRIC.connectionsTotal, { listener: 'http', result: 'ok' }) >= 2);
    assert.ok(moved(METRIC.connectionsTotal, { listener: 'socks5', result: 'ok' }) >= 2);
    assert.ok(moved(METRIC.connectionsTotal, { result: 'auth_failed' }) >= 2);
    assert.ok(moved(METRIC.connectionsTotal, { result: 'limited' }) >= 1);
    assert.match(text, new RegExp(`^${METRIC.connectionsActive}\\{listener="(http|socks5)"\\} \\d+$`, 'm'));
    // Bytes are counted once: three 200,000-byte bodies plus headers, not twice that.
    const down = moved(METRIC.bytesTotal, { user: plain.name, direction: 'down' }) - downBefore;
    assert.ok(down >= 600_000 && down < 700_000, `rotor_proxy_bytes_total down moved by ${down}`);
    assert.ok(moved(METRIC.bytesTotal, { user: plain.name, direction: 'up' }) > 0);
    assert.ok(moved(`${METRIC.upstreamConnectSeconds}_count`) >= 3);
    assert.ok(moved(METRIC.upstreamFailures) >= 1);
    assert.ok(moved(METRIC.poolProxies) >= 1);
    assert.match(text, new RegExp(`^${METRIC.sessionsActive} \\d+$`, 'm'));
    assert.ok(moved(METRIC.sessionRotations, { reason: 'manual' }) >= 1);
    assert.ok(moved(METRIC.draws, { method: 'pwd' }) >= 1);
    assert.ok(moved(METRIC.platformRequests, { operation: 'DrawByPwd' }) >= 1);
    assert.ok(moved(`${METRIC.platformRequestSeconds}_count`, { operation: 'ProxyInfo' }) >= 1);
    assert.ok(moved(METRIC.flowBalance, { account: 'shop2', product: SIM_PRODUCTS.dynamicTraffic }) > 0);
    assert.ok(moved(METRIC.userUsedBytes, { user: plain.name }) > 600_000);
    assert.equal(moved(METRIC.userLimitBytes, { user: 'shrink' }), 6 * MIB);
    assert.ok(moved(METRIC.orders) >= 1);
    assert.ok(moved(METRIC.callbacks) >= 1);
    assert.ok(moved(METRIC.instances) >= 1);
    // Labels never carry client addresses or target hosts.
    assert.doesNotMatch(text, /127\.0\.0\.1/);
  });

  test('no log line holds the platform secret, a password or the admin token', async () => {
    const logged = daemon.lines().length;
    await badLogins();
    // The SOCKS5 refusal is the last one the daemon logs (the admin server logs nothing of a 401): once its
    // line is in the file, so are the lines before it (one stream, in order).
    await waitFor(
      'the SOCKS5 refusal in the log',
      () =>
        daemon
          .lines()
          .slice(logged)
          .find((l) => l.msg === 'socks5 handshake failed'),
      10_000,
      20,
    );
    const log = readFileSync(daemon.logFile, 'utf8');
    const lines = log.split('\n').filter((l) => l.trim() !== '');
    // A real run was logged at debug: per-connection lines, platform calls, the order, the refusals.
    assert.ok(lines.length > 50, `only ${lines.length} log lines`);
    assert.ok(
      lines.some((l) => /"level":20/.test(l)),
      'debug lines present',
    );
    assert.ok(
      lines.some((l) => l.includes('"reqId"')),
      'platform lines present',
    );
    const secrets = {
      appSecret: SIM_DEFAULTS.appSecret,
      adminToken: TOKEN,
      triedPassword: WRONG_PASSWORD,
      ...Object.fromEntries(users.map((u) => [`password of ${u.name}`, u.password])),
    };
    for (const [what, secret] of Object.entries(secrets)) {
      const hit = lines.find((l) => l.includes(secret));
      assert.equal(hit, undefined, `${what} appears in the log: ${hit?.slice(0, 300)}`);
      // Base64 (Basic auth) and URL-encoded forms too.
      const b64 = Buffer.from(secret).toString('base64').replace(/=+$/, '');
      assert.equal(
        lines.find((l) => l.includes(b64)),
        undefined,
        `${what} appears base64-encoded in the log`,
      );
    }
  });
});

/** Wrong passwords through both listeners and a wrong admin token. */
async function badLogins(): Promise<void> {
  const r1 = await curl([...viaConnect(daemon.ports.http, 'plain', WRONG_PASSWORD), target.url(10)], { maxTimeS: 5 });
  assert.equal(r1.connect, 407);
  const r2 = await curl([...viaHttp(daemon.ports.http, 'plain', WRONG_PASSWORD), target.url(10)], { maxTimeS: 5 });
  assert.equal(r2.http, 407);
  const r3 = await curl([...viaSocks5h(daemon.ports.socks5, 'plain', WRONG_PASSWORD), target.url(10)], { maxTimeS: 5 });
  assert.equal(r3.code, 97);
  const r4 = await fetch(`http://127.0.0.1:${daemon.ports.admin}/v1/users`, { headers: { authorization: `Bearer wrong-${TOKEN}` } });
  assert.equal(r4.status, 401);
}
