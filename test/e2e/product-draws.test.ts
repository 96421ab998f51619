// (f) The product record drives drawing, against the embedded sandbox over real sockets:
// - a `draw: pwd` user on a product whose sub accounts may not draw by password (pwdDrawProxyUser -1) is
//   served (Rotor draws as the main account) and the reason is logged once;
// - a `draw: api` user on a product without a whitelist draws by password instead;
// - on a 5-IP package (ipCount 5), 100 rotating connections spend at most 5 IPs and all succeed, and the IPs
//   left show in /v1/pools;
// - a product that refuses every way (no mixed region for either draw) is refused with the reason.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { planDraw } from '../../src/pool/draw-plan.ts';
import { captureLogger } from '../support/logger.ts';
import { nodeConnectGet, nodeHttpGet, nodeSocksGet, startGateway, startTarget, type Gateway, type Target } from './harness.ts';

const USERS = [
  {
    name: 'carol',
    password: 'carol-pass',
    mainAccount: 'shop1',
    product: SIM_PRODUCTS.dynamicMainOnly,
    draw: 'pwd',
    sessTime: 5,
    limitBytes: -1,
  },
  {
    name: 'erin',
    password: 'erin-pass',
    mainAccount: 'shop1',
    product: SIM_PRODUCTS.dynamicMainOnly,
    draw: 'api',
    sessTime: 5,
    limitBytes: -1,
  },
  {
    name: 'dave',
    password: 'dave-pass',
    mainAccount: 'shop2',
    product: SIM_PRODUCTS.dynamicIpFive,
    draw: 'pwd',
    sessTime: 5,
    limitBytes: -1,
  },
];

interface PoolView {
  key: { user: string };
  ipsLeft?: number;
  nodes: Array<{ id: string }>;
  drawError?: { message: string };
}

describe('(f) drawing as the product allows', () => {
  let gw: Gateway;
  let target: Target;
  const log = captureLogger('info');
  before(async () => {
    target = await startTarget();
    gw = await startGateway({ config: { users: USERS }, daemon: { logger: log.logger } });
  });
  after(async () => {
    await gw?.close();
    await target?.close();
  });

  test('pwdDrawProxyUser -1: a `draw: pwd` user is served, drawing as the main account; said once at start and once per pool', async () => {
    for (let i = 0; i < 5; i++) {
      const r = await nodeHttpGet(gw.ports.http, 'carol', 'carol-pass', target.url('/c'), 10_000);
      assert.equal(r.status, 200, r.body);
      assert.ok(gw.exits.includes(r.body), r.body);
    }
    const s = await nodeSocksGet(gw.ports.socks5, 'carol', 'carol-pass', target.port, '/c', 10_000);
    assert.equal(s.status, 200);
    const lines = log
      .text()
      .split('\n')
      .filter((l) => l.includes('pwdDrawProxyUser -1') && l.includes('carol'));
    // Once at start-up, once by the pool's drawer: not on every draw or connection.
    assert.ok(lines.length >= 1 && lines.length <= 2, lines.join('\n'));
    assert.ok(lines.every((l) => (JSON.parse(l) as { level: number }).level === 40));
  });

  test('ipWhiteList -1: a `draw: api` user draws by password instead', async () => {
    const r = await nodeConnectGet(gw.ports.http, 'erin', 'erin-pass', target.port, '/e', 10_000);
    assert.equal(r.status, 200, r.body);
    assert.ok(log.text().includes('has no IP whitelist'));
  });

  test('a 5-IP package: 100 rotating connections spend at most 5 IPs, all succeed; IPs left in /v1/pools', async () => {
    const sim = gw.daemon.sim!;
    const before = sim.inspect.balance('shop2', SIM_PRODUCTS.dynamicIpFive)!;
    assert.equal(before.ipTotal, 5);
    const exits = new Set<string>();
    for (let i = 0; i < 100; i++) {
      const r =
        i % 2 === 0
          ? await nodeHttpGet(gw.ports.http, 'dave', 'dave-pass', target.url('/d'), 10_000)
          : await nodeSocksGet(gw.ports.socks5, 'dave', 'dave-pass', target.port, '/d', 10_000);
      assert.equal(r.status, 200, `connection ${i}: ${r.body}`);
      exits.add(r.body);
    }
    const after = sim.inspect.balance('shop2', SIM_PRODUCTS.dynamicIpFive)!;
    assert.ok(after.ipUsed >= 1 && after.ipUsed <= 5, `IPs spent: ${after.ipUsed}`);
    // The drawn exit is kept: one IP carried every connection.
    assert.equal(after.ipUsed, 1);
    const { body } = await gw.admin<PoolView[]>('/v1/pools');
    const pool = body.find((p) => p.key.user === 'dave')!;
    assert.equal(pool.ipsLeft, 5 - after.ipUsed);
    assert.equal(pool.nodes.length, 1);
  });

  test('the exit is kept for its ipDuration (10 min), then one more IP is drawn', async () => {
    const sim = gw.daemon.sim!;
    const spent = sim.inspect.balance('shop2', SIM_PRODUCTS.dynamicIpFive)!.ipUsed;
    gw.clock.advance(9 * 60_000);
    assert.equal((await nodeHttpGet(gw.ports.http, 'dave', 'dave-pass', target.url('/d'), 10_000)).status, 200);
    assert.equal(sim.inspect.balance('shop2', SIM_PRODUCTS.dynamicIpFive)!.ipUsed, spent, 'still within ipDuration: no new IP');
    gw.clock.advance(60_000 + 1000);
    assert.equal((await nodeHttpGet(gw.ports.http, 'dave', 'dave-pass', target.url('/d'), 10_000)).status, 200);
    assert.equal(sim.inspect.balance('shop2', SIM_PRODUCTS.dynamicIpFive)!.ipUsed, spent + 1, 'past ipDuration: one new IP');
    const { body } = await gw.admin<PoolView[]>('/v1/pools');
    assert.equal(body.find((p) => p.key.user === 'dave')!.ipsLeft, 5 - spent - 1);
  });
});

describe('planDraw: every flag of seed 2.6 that shapes a draw', () => {
  const user = { name: 'u', mainAccount: 'm', draw: 'pwd' as const, sessTime: 0 };
  const P = 'P1';

  test('sub accounts allowed: the sub account; not allowed: the main account, with the reason', () => {
    const a = planDraw(user, { productNo: P, pwdDrawProxyUser: 1, proxyGlobalRandom: 1, proxyEverytimeChange: 1 }, '');
    assert.ok(a.ok && a.account === 'u' && !a.asMainAccount && a.sessTime === 0 && a.notes.length === 0);
    const b = planDraw(user, { productNo: P, pwdDrawProxyUser: -1, proxyGlobalRandom: 1, proxyEverytimeChange: 1 }, '');
    assert.ok(b.ok && b.account === 'm' && b.asMainAccount);
    assert.match(b.notes.join(), /pwdDrawProxyUser -1/);
  });

  test('every-use change unsupported: 5 minutes; outside pwdDrawSessionRange: clamped', () => {
    const a = planDraw(user, { productNo: P, pwdDrawProxyUser: 1, proxyGlobalRandom: 1, proxyEverytimeChange: -1 }, 'USA');
    assert.ok(a.ok && a.sessTime === 5);
    const b = planDraw({ ...user, sessTime: 120 }, { productNo: P, pwdDrawProxyUser: 1, pwdDrawSessionRange: '1-90' }, 'USA');
    assert.ok(b.ok && b.sessTime === 90);
    assert.match(b.notes.join(), /1-90/);
  });

  test('an empty region: the draw that allows a mixed region, or a refusal naming the fix', () => {
    const a = planDraw(user, { productNo: P, pwdDrawProxyUser: 1, proxyGlobalRandom: -1, apiDrawGlobalRandom: 1, ipWhiteList: 1 }, '');
    assert.ok(a.ok && a.method === 'api');
    const b = planDraw(user, { productNo: P, pwdDrawProxyUser: 1, proxyGlobalRandom: -1, apiDrawGlobalRandom: -1, ipWhiteList: 1 }, '');
    assert.ok(!b.ok);
    assert.match(b.reason, /-region-/);
    const c = planDraw(user, { productNo: P, pwdDrawProxyUser: 1, proxyGlobalRandom: -1 }, 'USA');
    assert.ok(c.ok && c.method === 'pwd');
  });

  test('by IP count: the exit is kept for ipDuration (within the session range)', () => {
    const a = planDraw(
      user,
      { productNo: P, pwdDrawProxyUser: 1, proxyGlobalRandom: 1, ipCount: 5, ipDuration: 30, pwdDrawSessionRange: '1-20' },
      '',
    );
    assert.ok(a.ok && a.byIp?.ipDurationMinutes === 20 && a.sessTime === 20);
  });
});
