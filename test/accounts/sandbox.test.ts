// Accounts, whitelist, balances, platform-side limits, flow log and traffic return against the real sandbox
// platform, through the real client and a real store (SQLite, or Redis under ROTOR_TEST_STORE=redis).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import http from 'node:http';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { SocksClient } from 'socks';
import { startSimulator, SIM_PRODUCTS, type Simulator } from '../../src/sim/index.ts';
import { PlatformClient } from '../../src/platform/client.ts';
import type { Store } from '../../src/store/index.ts';
import { openTestStore } from '../support/store.ts';
import { Accounting } from '../../src/accounting/accounting.ts';
import { ProductCatalog } from '../../src/accounting/products.ts';
import { PlatformLimitSync } from '../../src/accounting/platform-sync.ts';
import { platformBackstopFor } from '../../src/accounting/units.ts';
import { UnitsError } from '../../src/accounting/units.ts';
import { AccountReconciler, type AccountUser } from '../../src/accounts/reconcile.ts';
import { Whitelist, fetchEgressIp } from '../../src/accounts/whitelist.ts';
import { BalanceWatcher, smellsOfBalance } from '../../src/accounts/balances.ts';
import { Traffic } from '../../src/accounts/traffic.ts';
import { AccountsError } from '../../src/accounts/errors.ts';
import { PlatformError } from '../../src/platform/errors.ts';
import { createMetrics, type Metrics } from '../../src/telemetry/metrics.ts';
import { buyTraffic } from '../support/orders.ts';
import { poll } from '../support/wait.ts';

const FLOW = SIM_PRODUCTS.dynamicTraffic; // 104, base 1024, sub-account limits, whitelist, flow log
const FLOW_CN = SIM_PRODUCTS.dynamicTrafficCn; // 105, base 1000

let sim: Simulator;
let client: PlatformClient;
let products: ProductCatalog;
let dir: string;
let store: Store;
let accounting: Accounting;
let target: Server;
let targetPort: number;

const users: AccountUser[] = [
  { name: 'alice', mainAccount: 'shop1', product: FLOW, draw: 'pwd', limitBytes: 500_000 },
  { name: 'bob', mainAccount: 'shop1', product: FLOW_CN, draw: 'api', limitBytes: -1 },
  { name: 'carl', mainAccount: 'shop2', product: FLOW, draw: 'pwd', limitBytes: 5_000_000 },
];

/** Sends `bytes` through a DrawByPwd node of the sub account; resolves once the target has them all. */
async function relay(sub: string, productNo: string, bytes: number): Promise<void> {
  const drawn = await client.call('DrawByPwd', { appUsername: sub, productNo, num: 1 });
  const raw = drawn.list[0]?.list?.[0] ?? drawn.list[0]?.proxyUrl ?? '';
  const url = new URL(raw);
  const { socket } = await SocksClient.createConnection({
    proxy: {
      host: url.hostname,
      port: Number(url.port),
      type: 5,
      userId: decodeURIComponent(url.username),
      password: decodeURIComponent(url.password),
    },
    command: 'connect',
    destination: { host: '127.0.0.1', port: targetPort },
    timeout: 3000,
  });
  await new Promise<void>((resolve, reject) => {
    socket.on('data', () => undefined);
    socket.once('end', () => resolve());
    socket.once('close', () => resolve());
    socket.once('error', reject);
    socket.write(Buffer.alloc(bytes, 7));
    socket.end();
  });
}

async function gauge(metrics: Metrics, name: string, labels: Record<string, string>): Promise<number | undefined> {
  const m = (await metrics.registry.getMetricsAsJSON()).find((x) => x.name === name);
  return m?.values.find((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val))?.value;
}

const eventually = (check: () => Promise<boolean> | boolean, ms = 2000): Promise<boolean> => poll(check, { timeoutMs: ms, everyMs: 10 });

before(async () => {
  target = createServer((s) => {
    s.on('data', () => undefined);
    s.on('end', () => s.end('ok'));
    s.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
  targetPort = (target.address() as AddressInfo).port;
  sim = await startSimulator({ orderDelayMs: 20 });
  client = new PlatformClient({ baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret, retries: 0, timeoutMs: 5000 });
  products = new ProductCatalog({ client });
  dir = mkdtempSync(join(tmpdir(), 'rotor-accounts-'));
  store = await openTestStore(join(dir, 'rotor.db'));
  accounting = new Accounting({ store, flushIntervalMs: 60_000 });
  await accounting.start(users);
});

after(async () => {
  await accounting.close();
  await store.close();
  client.close();
  await sim.close();
  await new Promise<void>((resolve) => target.close(() => resolve()));
  rmSync(dir, { recursive: true, force: true });
});

describe('reconcile', () => {
  test('creates main and sub accounts, then is idempotent', async () => {
    const reconciler = new AccountReconciler({ client, products, accounting });
    const first = await reconciler.reconcile(users);
    assert.deepEqual(
      first.mains.map((m) => [m.account, m.action, m.status]),
      [
        ['shop1', 'created', 1],
        ['shop2', 'created', 1],
      ],
    );
    assert.deepEqual(
      first.subs.map((s) => [s.user, s.action]),
      [
        ['alice', 'created'],
        ['bob', 'created'],
        ['carl', 'created'],
      ],
    );
    const accounts = sim.inspect.accounts();
    const shop1 = accounts.find((a) => a.appUsername === 'shop1');
    assert.ok(shop1);
    const alice = shop1.subs.find((s) => s.appUsername === 'alice');
    assert.equal(alice?.limitMb, 1, '500,000 bytes -> 1 MB (rounded up, never 0) at create');
    assert.ok(shop1.subs.some((s) => s.appUsername === 'bob'));
    assert.ok(accounts.find((a) => a.appUsername === 'shop2')?.subs.some((s) => s.appUsername === 'carl'));

    const second = await reconciler.reconcile(users);
    assert.deepEqual(
      second.mains.map((m) => m.action),
      ['exists', 'exists'],
    );
    assert.deepEqual(
      second.subs.map((s) => s.action),
      ['exists', 'exists', 'exists'],
    );
    assert.deepEqual(second.refused, []);
    assert.equal(sim.inspect.accounts().length, 2, 'nothing created twice');
  });

  test('a disabled main account refuses its users with a reason, and is not re-enabled', async () => {
    const reconciler = new AccountReconciler({ client, products, accounting });
    await client.call('CreateUser', { appUsername: 'shop2', status: 2 });
    const dave: AccountUser = { name: 'dave', mainAccount: 'shop2', product: FLOW, draw: 'pwd', limitBytes: -1 };
    await accounting.setUsers([...users, dave]);
    const report = await reconciler.reconcile([...users, dave]);
    assert.equal(report.mains.find((m) => m.account === 'shop2')?.status, 2);
    const daveSub = report.subs.find((s) => s.user === 'dave');
    assert.equal(daveSub?.action, 'error');
    assert.match(daveSub?.error ?? '', /MAIN_ACCOUNT_UNUSABLE/);
    assert.equal(sim.inspect.accounts().find((a) => a.appUsername === 'shop2')?.status, 2, 'reconcile did not re-enable it');
    for (const user of ['carl', 'dave']) {
      const admission = accounting.admit(user);
      assert.equal(admission.ok, false);
      assert.match((admission as { reason: string }).reason, /main account shop2 is disabled/);
    }
    assert.deepEqual(accounting.admit('alice'), { ok: true });
    // Enabled again by the operator: the next pass admits them.
    await client.call('CreateUser', { appUsername: 'shop2', status: 1 });
    const again = await reconciler.reconcile([...users, dave]);
    assert.deepEqual(again.refused, []);
    assert.equal(again.subs.find((s) => s.user === 'dave')?.action, 'created');
    assert.deepEqual(accounting.admit('carl'), { ok: true });
    assert.equal(reconciler.refusal('carl'), undefined);
    await accounting.setUsers(users);
  });

  test('10051 for a name that is not a main account: a clear error and a refusal', async () => {
    const reconciler = new AccountReconciler({ client, products, accounting });
    // 'alice' is a sub account of shop1; using it as a main account name collides.
    const eve: AccountUser = { name: 'eve', mainAccount: 'alice', product: FLOW, draw: 'pwd', limitBytes: -1 };
    await accounting.setUsers([...users, eve]);
    const report = await reconciler.reconcile([eve]);
    assert.equal(report.mains[0]?.action, 'error');
    assert.match(report.mains[0]?.error ?? '', /MAIN_ACCOUNT_NAME_TAKEN/);
    assert.match((accounting.admit('eve') as { reason: string }).reason, /main account name alice is taken/);
    await accounting.setUsers(users);
  });

  test('verification is synced when configured', async () => {
    const reconciler = new AccountReconciler({ client, products, accounting });
    const report = await reconciler.reconcile(users, { auth: { shop1: { authType: 2, authName: 'Shop One' } } });
    assert.equal(report.mains.find((m) => m.account === 'shop1')?.authStatus, 2);
    assert.equal(sim.inspect.accounts().find((a) => a.appUsername === 'shop1')?.authStatus, 2);
  });
});

describe('whitelist', () => {
  test('holds the egress address for api users after reconcile; removes only what Rotor added', async () => {
    const whitelist = new Whitelist({ client, products, store, egressIp: '127.0.0.1' });
    const report = await whitelist.reconcile(users);
    assert.deepEqual(report.added, [{ account: 'shop1', productNo: FLOW_CN, ip: '127.0.0.1' }]);
    assert.deepEqual(await whitelist.list('shop1', FLOW_CN), ['127.0.0.1']);
    assert.deepEqual(await whitelist.list('shop1', FLOW), [], 'pwd users need no whitelist');
    assert.deepEqual(await whitelist.added(), [{ account: 'shop1', productNo: FLOW_CN, ip: '127.0.0.1' }]);

    const again = await whitelist.reconcile(users);
    assert.deepEqual(again.added, []);
    assert.equal(again.kept.length, 1);
    await whitelist.ensure('shop1', FLOW_CN);

    // The operator adds an address through the admin route; then the api user goes away.
    assert.deepEqual(await whitelist.add('shop1', FLOW_CN, '127.0.0.2'), ['127.0.0.1', '127.0.0.2']);
    const gone = await whitelist.reconcile(users.filter((u) => u.draw !== 'api'));
    assert.deepEqual(gone.removed, [{ account: 'shop1', productNo: FLOW_CN, ip: '127.0.0.1' }]);
    assert.deepEqual(sim.inspect.balance('shop1', FLOW_CN)?.whitelist, ['127.0.0.2'], "the operator's entry stays");
    assert.deepEqual(await whitelist.added(), []);
    assert.deepEqual(await whitelist.remove('shop1', FLOW_CN, '127.0.0.2'), []);
    await assert.rejects(
      whitelist.add('shop1', FLOW_CN, 'not-an-ip'),
      (e: unknown) => e instanceof AccountsError && e.code === 'INVALID_INPUT',
    );
    // Back to the config state for the tests below.
    await whitelist.reconcile(users);
    assert.deepEqual(sim.inspect.balance('shop1', FLOW_CN)?.whitelist, ['127.0.0.1']);
  });

  test('the egress address can be learned from a URL', async () => {
    const server = http.createServer((_req, res) => res.end('127.0.0.1\n'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/ip`;
    try {
      assert.equal(await fetchEgressIp(url), '127.0.0.1');
      const whitelist = new Whitelist({ client, products, store, egressIp: () => fetchEgressIp(url) });
      assert.equal(await whitelist.egress(), '127.0.0.1');
      const bad = new Whitelist({ client, products, store, egressIp: () => Promise.resolve('nonsense') });
      await assert.rejects(bad.egress(), (e: unknown) => e instanceof AccountsError && e.code === 'EGRESS_UNKNOWN');
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe('balances', () => {
  test('empty balance: canDraw false and users refused; a dynamic order brings it back; the gauge follows traffic', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const watcher = new BalanceWatcher({ client, products, metrics, accounting, intervalMs: 100 });
    watcher.setUsers(users);
    try {
      await watcher.start();
      assert.equal(watcher.hasBalance('shop1', FLOW), false);
      assert.equal(watcher.canDraw('shop1', FLOW), false);
      assert.equal(await gauge(metrics, 'rotor_flow_balance_bytes', { account: 'shop1', product: FLOW }), 0);
      assert.match(
        (accounting.admit('alice') as { reason: string }).reason,
        /traffic balance of main account shop1 for product DYN-104-FLOW is exhausted/,
      );

      await buyTraffic(client, 'shop1', FLOW, 100);
      await buyTraffic(client, 'shop1', FLOW_CN, 100);
      await buyTraffic(client, 'shop2', FLOW, 100);
      await watcher.nudge();
      assert.equal(watcher.canDraw('shop1', FLOW), true);
      // Bytes at the product's MB size (1024² for this product).
      assert.equal(await gauge(metrics, 'rotor_flow_balance_bytes', { account: 'shop1', product: FLOW }), 100 * 1_048_576);
      assert.deepEqual(accounting.admit('alice'), { ok: true });

      // Traffic through the sandbox's upstream: the gauge follows within one poll interval, unnudged.
      await relay('alice', FLOW, 300_000);
      await eventually(
        async () =>
          ((await gauge(metrics, 'rotor_flow_balance_bytes', { account: 'shop1', product: FLOW })) ?? 100 * 1_048_576) < 100 * 1_048_576,
        1000,
      );
      const info = await client.call('ProxyInfo', { appUsername: 'shop1', proxyType: 104, productNo: FLOW });
      await eventually(
        async () =>
          (await gauge(metrics, 'rotor_flow_balance_bytes', { account: 'shop1', product: FLOW })) ===
          Math.floor(Number(info.list?.[0]?.balance) * 1_048_576),
        1000,
      );
      const remaining = sim.inspect.balance('shop1', FLOW)?.remainingBytes ?? 0;
      assert.ok(remaining <= 100 * 1_048_576 - 300_000);
      assert.ok(
        Math.abs((watcher.get('shop1', FLOW)?.balanceBytes ?? 0) - remaining) < 1_048_576 / 100,
        'bytes at the product base (1024)',
      );
    } finally {
      await watcher.stop();
    }
  });

  test("a burst of user changes reads its own users' new pairs without walking every user", async () => {
    const watcher = new BalanceWatcher({ client, products, accounting, intervalMs: 60_000 });
    watcher.setUsers(users);
    // Every user of a large directory, counting the walks over it.
    let walks = 0;
    class Walked<T> extends Array<T> {
      override [Symbol.iterator](): ArrayIterator<T> {
        walks++;
        return super[Symbol.iterator]();
      }
    }
    const everyone = new Walked<AccountUser>();
    for (let i = 0; i < 2000; i++) everyone.push({ name: `imp${i}`, mainAccount: 'shop1', product: FLOW, draw: 'pwd', limitBytes: -1 });
    const joined: AccountUser = { name: 'erin', mainAccount: 'shop1', product: FLOW, draw: 'pwd', limitBytes: -1 };
    const made: AccountUser = { name: 'dora', mainAccount: 'shop2', product: FLOW_CN, draw: 'pwd', limitBytes: -1 };
    everyone.push(...users, joined);
    try {
      await watcher.start();
      assert.equal(watcher.get('shop2', FLOW_CN), undefined, 'a pair no user named is not read');
      // A burst that made a user on a pair already read: nothing to read, and no walk of everyone.
      walks = 0;
      watcher.setUsers(everyone, [joined]);
      assert.equal(walks, 0, 'the burst walked only the user it changed');
      // A burst that made a user on a pair never read: that pair is read now (and its users refused if empty).
      everyone.push(made);
      watcher.setUsers(everyone, [made]);
      await poll(() => watcher.get('shop2', FLOW_CN) !== undefined, { what: "the new user's pair read", timeoutMs: 5000 });
      // A reload names nobody: every user's pair may be new, so all are walked.
      walks = 0;
      watcher.setUsers(everyone);
      assert.equal(walks, 1);
      // Given as how to list them (the daemon's way): a burst lists nobody, a poll lists them once.
      let listed = 0;
      const list = (): readonly AccountUser[] => {
        listed++;
        return everyone;
      };
      watcher.setUsers(list, [joined]);
      assert.equal(listed, 0, 'a burst listed every user');
      await watcher.poll();
      assert.equal(listed, 1, 'a poll lists the users once');
    } finally {
      await watcher.stop();
    }
  });

  test('draining the balance stops draws; topping up resumes them', async () => {
    const watcher = new BalanceWatcher({ client, products, accounting, intervalMs: 60_000 });
    watcher.setUsers(users);
    const traffic = new Traffic({ client, products, onReturned: () => void watcher.nudge() });
    try {
      await watcher.start();
      assert.equal(watcher.canDraw('shop2', FLOW), true);
      const { returnAmount } = await traffic.returnTraffic({ account: 'shop2', productNo: FLOW, flowNum: 100 });
      assert.ok((returnAmount ?? 0) > 0);
      await watcher.nudge();
      assert.equal(watcher.canDraw('shop2', FLOW), false);
      assert.equal(accounting.admit('carl').ok, false);
      await assert.rejects(
        client.call('DynamicProxyReturn', { appUsername: 'shop2', proxyType: 104, productNo: FLOW, flowNum: 1 }),
        (e: unknown) => {
          assert.ok(smellsOfBalance(e));
          return e instanceof PlatformError && e.platformCode === 10081;
        },
      );
      await buyTraffic(client, 'shop2', FLOW, 100);
      watcher.drawFailed(new PlatformError({ operation: 'DrawByPwd', reqId: 'x', platformCode: 10072, platformMsg: '' }));
      await eventually(() => watcher.canDraw('shop2', FLOW));
      assert.deepEqual(accounting.admit('carl'), { ok: true });
    } finally {
      await watcher.stop();
    }
  });
});

describe('platform-side limits and usage', () => {
  test('by default the platform figure is reported, never adopted into the meter', async () => {
    const sync = new PlatformLimitSync({ client, products, accounting, intervalMs: 60_000 });
    const before = accounting.get('alice')?.usedBytes ?? 0;
    const r = await sync.syncUser({ name: 'alice', product: FLOW });
    assert.equal(r.outcome, 'synced');
    assert.ok((r.platformUsedBytes ?? 0) >= 300_000 && (r.platformUsedBytes ?? 0) > before, JSON.stringify(r));
    assert.equal(r.adopted, false);
    assert.equal(accounting.get('alice')?.usedBytes, before, 'what the customer is billed for: the bytes Rotor relayed');
    // The next test's first pass must find the platform limit to set again.
    await client.call('SetProxyUserFlowLimit', { appUsername: 'alice', productNo: FLOW, limitFlow: -1 });
  });

  test('limits are sent with headroom (at least 1,024,000); admin changes follow; with adoption on, higher platform usage is adopted', async () => {
    const sync = new PlatformLimitSync({ client, products, accounting, intervalMs: 60_000, adopt: () => true });
    sync.setUsers(users);
    try {
      const results = await sync.start();
      const alice = results.find((r) => r.user === 'alice');
      assert.equal(alice?.outcome, 'synced');
      assert.equal(alice?.limitSent, platformBackstopFor(500_000));
      const subs = () => sim.inspect.accounts().flatMap((a) => a.subs);
      assert.equal(subs().find((s) => s.appUsername === 'alice')?.limits[FLOW], platformBackstopFor(500_000));
      assert.equal(subs().find((s) => s.appUsername === 'carl')?.limits[FLOW], platformBackstopFor(5_000_000));
      assert.equal(results.find((r) => r.user === 'bob')?.limitSent, undefined, 'unlimited since creation: nothing to send');
      assert.equal((await client.call('GetProxyUserInfo', { appUsername: 'bob', productNo: FLOW_CN })).limitFlow, -1);
      // Idempotent: nothing sent when the platform already holds the limit.
      const again = await sync.reconcile();
      assert.equal(again.find((r) => r.user === 'alice')?.limitSent, undefined);

      await accounting.setLimit('alice', 8_000_000);
      await eventually(() => subs().find((s) => s.appUsername === 'alice')?.limits[FLOW] === platformBackstopFor(8_000_000));

      // alice relayed 300,000+ bytes through the sandbox directly (not through Rotor): the first pass adopted it.
      const platformUsed = alice?.platformUsedBytes ?? 0;
      assert.ok(platformUsed >= 300_000);
      assert.equal(alice?.adopted, true);
      assert.equal(accounting.get('alice')?.usedBytes, platformUsed);
      accounting.meter('alice').add(0, 10_000_000);
      const later = await sync.reconcile();
      assert.equal(later.find((r) => r.user === 'alice')?.adopted, false, 'a lower platform number never lowers the count');
      assert.ok((accounting.get('alice')?.usedBytes ?? 0) > platformUsed);
      await accounting.setLimit('alice', 500_000);
    } finally {
      await sync.stop();
    }
  });
});

describe('flow log and traffic return', () => {
  test('the flow log pages in bytes over the default 7 days', async () => {
    const traffic = new Traffic({ client, products });
    const page = await traffic.flowLog({ account: 'shop1', productNo: FLOW });
    assert.ok(page.total >= 1);
    assert.match(page.startTime, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
    assert.match(page.endTime, /^\d{4}-\d{2}-\d{2} 23:59:59$/);
    const start = Date.parse(page.startTime.replace(' ', 'T') + 'Z');
    assert.ok(Math.abs(Date.now() - 7 * 86_400_000 - start) < 5000);
    const used = page.entries.reduce((s, e) => s + e.usedBytes, 0);
    assert.equal(used, sim.inspect.balance('shop1', FLOW)?.usedBytes, 'log entries are bytes');
    const all = await traffic.flowLogAll({ account: 'shop1', productNo: FLOW });
    assert.equal(all.entries.length, all.total);
    await assert.rejects(
      traffic.flowLog({ account: 'shop1', productNo: FLOW, pageSize: 101 }),
      (e: unknown) => e instanceof AccountsError && e.code === 'INVALID_INPUT',
    );
  });

  test('traffic return takes whole MB and lowers the balance by that many MB at the product base', async () => {
    const traffic = new Traffic({ client, products });
    const before = sim.inspect.balance('shop1', FLOW_CN)?.totalBytes ?? 0;
    await traffic.returnTraffic({ account: 'shop1', productNo: FLOW_CN, flowNum: 3, remark: 'test' });
    assert.equal(sim.inspect.balance('shop1', FLOW_CN)?.totalBytes, before - 3_000_000);
    await assert.rejects(traffic.returnTraffic({ account: 'shop1', productNo: FLOW_CN, flowNum: 0 }), UnitsError);
    await assert.rejects(traffic.returnTraffic({ account: 'shop1', productNo: FLOW_CN, flowNum: 1.5 }), UnitsError);
    await assert.rejects(
      traffic.returnTraffic({ account: 'shop1', productNo: FLOW_CN }),
      (e: unknown) => e instanceof AccountsError && e.code === 'INVALID_INPUT',
    );
  });
});
