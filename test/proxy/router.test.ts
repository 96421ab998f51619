import assert from 'node:assert/strict';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { describe, test } from 'node:test';
import { UnlimitedMeters } from '../support/meters.ts';
import { waitFor } from '../support/wait.ts';
import { relay, type RelayStats } from '../../src/proxy/relay.ts';
import { Router } from '../../src/proxy/router.ts';
import { GatewayError } from '../../src/proxy/errors.ts';
import { PoolEmptyError } from '../../src/pool/types.ts';
import type { InstanceDirectory } from '../../src/proxy/types.ts';
import { FixedPool, FixedPools, MapSessions, Users, node, user } from './fixtures.ts';

function router(extra: { instances?: InstanceDirectory; limits?: Map<string, number> } = {}) {
  const pools = new FixedPools(new FixedPool([node('socks5', 1)]));
  const r = new Router({
    users: new Users([user('alice', 'secret', { product: 'P0', sessTime: 7 }), user('bob-smith', 'pw')]),
    meters: new UnlimitedMeters(extra.limits),
    pools,
    sessions: new MapSessions(),
    ...(extra.instances ? { instances: extra.instances } : {}),
  });
  return { r, pools };
}

describe('Router.authorize', () => {
  test('route from user defaults', () => {
    const a = router().r.authorize('alice', 'secret');
    assert.ok(a.ok);
    assert.deepEqual(a.route.poolKey, { user: 'alice', productNo: 'P0', region: '' });
    assert.equal(a.route.sessTime, 7);
    assert.equal(a.route.sessionId, undefined);
  });

  test('options override product, region, sessTime; session id carried', () => {
    const a = router().r.authorize('alice-session-s9-sesstime-30-region-US-product-P2', 'secret');
    assert.ok(a.ok);
    assert.deepEqual(a.route.poolKey, { user: 'alice', productNo: 'P2', region: 'US' });
    assert.equal(a.route.sessTime, 30);
    assert.equal(a.route.sessionId, 's9');
  });

  test('a user whose name has a dash', () => {
    const a = router().r.authorize('bob-smith-region-DE', 'pw');
    assert.ok(a.ok && a.route.user.name === 'bob-smith' && a.route.poolKey.region === 'DE');
  });

  test('wrong password, unknown user, unknown option: auth refusals with one-line reasons', () => {
    const { r } = router();
    for (const [name, pass, reason] of [
      ['alice', 'wrong', 'wrong user name or password'],
      ['alice', '', 'wrong user name or password'],
      ['nobody', 'secret', 'wrong user name or password'],
      ['alice-colour-red', 'secret', "unknown option 'colour'"],
      ['alice-sesstime-0', 'secret', "bad value for option 'sesstime': minutes 1-120"],
    ] as const) {
      const a = r.authorize(name, pass);
      assert.ok(!a.ok && a.kind === 'auth', name);
      assert.equal(a.reason, reason);
    }
  });

  test('one reason for every failed authentication unless the password is right (no user enumeration)', () => {
    const { r } = router();
    for (const name of [
      'nobody',
      'alice',
      'alice-colour-red',
      'alice-sesstime-0',
      'alice-session-a-session-b',
      'bob-smith-colour-x',
      'x'.repeat(2000),
      `alice-session-${'s'.repeat(65)}`,
    ]) {
      const a = r.authorize(name, 'not-the-password');
      assert.ok(!a.ok && a.kind === 'auth', name);
      assert.equal(a.reason, 'wrong user name or password', name.slice(0, 40));
    }
    const long = r.authorize(`alice-session-${'s'.repeat(65)}`, 'secret');
    assert.ok(!long.ok && /at most 64/.test(long.reason));
    const ok = r.authorize(`alice-session-${'s'.repeat(64)}`, 'secret');
    assert.ok(ok.ok && ok.route.sessionId?.length === 64);
  });

  test('-region- codes the dictionaries do not know are refused (403) before any pool exists', () => {
    const pools = new FixedPools(new FixedPool([node('socks5', 1)]));
    const known = new Set(['US', 'DE']);
    const r = new Router({
      users: new Users([user('alice', 'secret')]),
      meters: new UnlimitedMeters(),
      pools,
      sessions: new MapSessions(),
      regionKnown: (code) => known.has(code.toUpperCase()),
    });
    assert.ok(r.authorize('alice-region-us', 'secret').ok);
    const bad = r.authorize('alice-region-ZZ9', 'secret');
    assert.ok(!bad.ok && bad.kind === 'forbidden' && bad.reason === "unknown region 'ZZ9'");
    // Not loaded yet (undefined): let through.
    const early = new Router({
      users: new Users([user('alice', 'secret')]),
      meters: new UnlimitedMeters(),
      pools,
      sessions: new MapSessions(),
      regionKnown: () => undefined,
    });
    assert.ok(early.authorize('alice-region-ZZ9', 'secret').ok);
  });

  test("-region- in another case is routed in the dictionary's spelling (one pool per code, the draw sends it)", () => {
    const spelling = new Map([
      ['US', 'US'],
      ['CHN001', 'CHN001'],
    ]);
    const r = new Router({
      users: new Users([user('alice', 'secret')]),
      meters: new UnlimitedMeters(),
      pools: new FixedPools(new FixedPool([node('socks5', 1)])),
      sessions: new MapSessions(),
      regionKnown: (code) => spelling.get(code.toUpperCase()) ?? false,
    });
    for (const typed of ['us', 'Us', 'US']) {
      const a = r.authorize(`alice-region-${typed}`, 'secret');
      assert.ok(a.ok && a.route.poolKey.region === 'US', typed);
    }
    const city = r.authorize('alice-region-chn001', 'secret');
    assert.ok(city.ok && city.route.poolKey.region === 'CHN001');
    const bad = r.authorize('alice-region-zz9', 'secret');
    assert.ok(!bad.ok && bad.reason === "unknown region 'zz9'");
  });

  test('a pool the registry refuses (every pool of the user busy) is NO_UPSTREAM, not an internal error', async () => {
    const r = new Router({
      users: new Users([user('alice', 'secret')]),
      meters: new UnlimitedMeters(),
      pools: {
        pool: (key) => {
          throw new PoolEmptyError(`${key.user}/${key.productNo}/${key.region}`, 'user alice has 32 pools in use (pool.maxPerUser)');
        },
      },
      sessions: new MapSessions(),
    });
    const a = r.authorize('alice-region-US', 'secret');
    assert.ok(a.ok);
    await assert.rejects(
      r.dial(a.route, { host: 'example.com', port: 443 }),
      (err: unknown) => err instanceof GatewayError && err.code === 'NO_UPSTREAM' && err.httpStatus === 503,
    );
  });

  test('instances: unknown or not allowed -> forbidden; allowed -> route', () => {
    const inst = node('http', 2);
    const instances: InstanceDirectory = {
      get: (no) => (no === 'I1' || no === 'I2' ? inst : undefined),
      allowed: (u, no) => u === 'alice' && no === 'I1',
    };
    const { r } = router({ instances });
    const unknown = r.authorize('alice-instance-I9', 'secret');
    assert.ok(!unknown.ok && unknown.kind === 'forbidden' && unknown.reason.includes('I9'));
    const denied = r.authorize('alice-instance-I2', 'secret');
    assert.ok(!denied.ok && denied.kind === 'forbidden');
    const ok = r.authorize('alice-instance-I1', 'secret');
    assert.ok(ok.ok && ok.route.instanceNo === 'I1');
  });

  test('exhausted limit -> forbidden, and dial refuses LIMITED', async () => {
    const { r } = router({ limits: new Map([['alice', 10]]) });
    const a = r.authorize('alice', 'secret');
    assert.ok(a.ok);
    r.meters.meter('alice').add(6, 6);
    const b = r.authorize('alice', 'secret');
    assert.ok(!b.ok && b.kind === 'forbidden' && /limit/.test(b.reason));
    await assert.rejects(r.dial(a.route, { host: '127.0.0.1', port: 1 }), (e: unknown) => (e as { code?: string }).code === 'LIMITED');
  });

  test('setUsers swaps the directory (config reload)', () => {
    const { r } = router();
    assert.ok(r.authorize('alice', 'secret').ok);
    r.setUsers(new Users([user('carol', 'c')]));
    assert.ok(r.authorize('carol', 'c').ok);
    assert.ok(!r.authorize('alice', 'secret').ok);
  });

  test('repeated credentials (credential cache) still see reloads in place, limits and the options', () => {
    const alice = user('alice', 'secret', { product: 'P0' });
    const map = new Map([['alice', alice]]);
    const limits = new Map([['alice', 10]]);
    const r = new Router({
      users: { get: (name) => map.get(name) },
      meters: new UnlimitedMeters(limits),
      pools: new FixedPools(new FixedPool([node('socks5', 1)])),
      sessions: new MapSessions(),
    });
    const first = r.authorize('alice-session-s1-region-US', 'secret');
    const again = r.authorize('alice-session-s1-region-US', 'secret');
    assert.ok(first.ok && again.ok);
    assert.deepEqual(again.route, first.route);
    assert.ok(!r.authorize('alice', 'Secret').ok);
    // The directory's contents change without setUsers: a new object, then a password changed in place.
    const renewed = user('alice', 'new-pass', { product: 'P0' });
    map.set('alice', renewed);
    assert.ok(!r.authorize('alice-session-s1-region-US', 'secret').ok);
    assert.ok(r.authorize('alice', 'new-pass').ok);
    renewed.password = 'third';
    assert.ok(!r.authorize('alice', 'new-pass').ok);
    assert.ok(r.authorize('alice', 'third').ok);
    // Admission is checked on every call, cached or not.
    r.meters.meter('alice').add(10, 0);
    const limited = r.authorize('alice', 'third');
    assert.ok(!limited.ok && limited.kind === 'forbidden');
  });
});

async function socketPair(): Promise<{ a: Socket; b: Socket; close: () => void }> {
  const server = createServer({ allowHalfOpen: true });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const accepted = new Promise<Socket>((r) => server.once('connection', r));
  const a = connect({ host: '127.0.0.1', port: (server.address() as AddressInfo).port, allowHalfOpen: true });
  const b = await accepted;
  await new Promise((r) => (a.connecting ? a.once('connect', r) : r(null)));
  return { a, b, close: () => server.close() };
}

describe('relay', () => {
  test('moves bytes both ways, heads first, counts them, and ends on idle', async () => {
    // client <-> [c1 | relay | u1] <-> upstream
    const client = await socketPair();
    const upstream = await socketPair();
    const meters = new UnlimitedMeters();
    const ended = new Promise<RelayStats>((resolve) =>
      relay(client.b, upstream.a, {
        meter: meters.meter('x'),
        idleTimeoutMs: 150,
        clientHead: Buffer.from('H'),
        upstreamHead: Buffer.from('U'),
        end: { relayEnded: resolve },
      }),
    );
    const atUpstream: Buffer[] = [];
    const atClient: Buffer[] = [];
    upstream.b.on('data', (c: Buffer) => atUpstream.push(c));
    client.a.on('data', (c: Buffer) => atClient.push(c));
    client.a.write('ello');
    upstream.b.write('pstream');
    const started = Date.now();
    const stats = await ended;
    assert.equal(stats.end, 'idle');
    assert.ok(Date.now() - started >= 140);
    assert.equal(Buffer.concat(atUpstream).toString(), 'Hello');
    assert.equal(Buffer.concat(atClient).toString(), 'Upstream');
    assert.deepEqual({ up: stats.up, down: stats.down }, { up: 5, down: 8 });
    assert.deepEqual(meters.usage('x'), { up: 5, down: 8, active: 0 });
    // Both sides were closed by the relay.
    await waitFor(() => client.b.destroyed && upstream.a.destroyed, 2000, 'the relay to close both sides');
    client.a.destroy();
    upstream.b.destroy();
    client.close();
    upstream.close();
  });

  test('half-close is passed on and the connection ends cleanly', async () => {
    const client = await socketPair();
    const upstream = await socketPair();
    const meters = new UnlimitedMeters();
    const ended = new Promise<RelayStats>((resolve) =>
      relay(client.b, upstream.a, { meter: meters.meter('x'), idleTimeoutMs: 5000, end: { relayEnded: resolve } }),
    );
    upstream.b.on('data', () => {});
    // The client sends and half-closes; the upstream answers after seeing the FIN, then closes.
    upstream.b.on('end', () => upstream.b.end('reply after fin'));
    client.a.end('request');
    const got: Buffer[] = [];
    client.a.on('data', (c: Buffer) => got.push(c));
    const stats = await ended;
    assert.equal(stats.end, 'closed');
    await new Promise((r) => client.a.once('end', r));
    assert.equal(Buffer.concat(got).toString(), 'reply after fin');
    client.a.destroy();
    client.close();
    upstream.close();
  });
});
