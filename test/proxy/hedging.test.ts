// Router.dial as a race, over real loopback sockets: a stalled node is a listener that accepts and never
// answers, a healthy one answers as soon as the TCP connect completes (the dialer here stands in for the
// protocol handshake, which test/e2e/upstream-health.test.ts runs for real). What is checked is the race's
// bookkeeping: who wins, who is marked, what Dialed says, what a departing client leaves recorded, and that
// a static instance is marked too.
import assert from 'node:assert/strict';
import { createHook } from 'node:async_hooks';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { DialCancel } from '../../src/proxy/cancel.ts';
import { hedgesWaiting } from '../../src/proxy/dial-race.ts';
import { connectTcp } from '../../src/proxy/dial-tcp.ts';
import { DialAbortedError, GatewayError } from '../../src/proxy/errors.ts';
import { UnlimitedMeters } from '../support/meters.ts';
import { Router, type Dialer } from '../../src/proxy/router.ts';
import type { InstanceDirectory } from '../../src/proxy/types.ts';
import { createMetrics } from '../../src/telemetry/metrics.ts';
import { FixedPool, FixedPools, MapSessions, Users, node, user } from './fixtures.ts';
import { waitFor } from '../support/wait.ts';

let stalled: Server;
let healthy: Server;
const held = new Set<Socket>();
let stalledPort = 0;
let healthyPort = 0;

async function listen(onConnection: (s: Socket) => void): Promise<[Server, number]> {
  const server = createServer(onConnection);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return [server, (server.address() as AddressInfo).port];
}

before(async () => {
  [stalled, stalledPort] = await listen((s) => {
    held.add(s);
    s.on('error', () => undefined);
  });
  [healthy, healthyPort] = await listen((s) => {
    held.add(s);
    s.on('error', () => undefined);
  });
});
after(async () => {
  for (const s of held) s.destroy();
  await new Promise<void>((r) => stalled.close(() => r()));
  await new Promise<void>((r) => healthy.close(() => r()));
});

/** A dialer whose "handshake" is the TCP connect plus the node's first byte: a stalled node never sends one. */
const firstByteDialer: Dialer = async (n, _target, options) => {
  const socket = await connectTcp(n.host, n.port, options.connectTimeoutMs, options.signal);
  if (n.port === healthyPort) return { socket, head: null };
  // Never answers; the race cancels us through the signal.
  return new Promise((_resolve, reject) => {
    options.signal?.addEventListener('abort', () => {
      socket.destroy();
      reject(new DialAbortedError());
    });
  });
};

function routerWith(pool: FixedPool, extra: { hedgeAfterMs?: number; instances?: InstanceDirectory; dialer?: Dialer } = {}) {
  const metrics = createMetrics({ defaultMetrics: false });
  const r = new Router({
    users: new Users([user('alice', 'secret')]),
    meters: new UnlimitedMeters(),
    pools: new FixedPools(pool),
    sessions: new MapSessions(),
    metrics,
    hedgeAfterMs: extra.hedgeAfterMs ?? 100,
    connectTimeoutMs: 2000,
    handshakeTimeoutMs: 5000,
    dialers: { socks5: extra.dialer ?? firstByteDialer, http: extra.dialer ?? firstByteDialer },
    ...(extra.instances ? { instances: extra.instances } : {}),
  });
  return { r, metrics };
}

async function counter(
  metrics: ReturnType<typeof createMetrics>,
  name: 'upstreamHedges' | 'upstreamFailures' | 'upstreamStallsForgiven',
  label: string,
  value: string,
): Promise<number> {
  const m = await metrics[name].get();
  return m.values.filter((v) => label === '' || (v.labels as Record<string, string>)[label] === value).reduce((s, v) => s + v.value, 0);
}

describe('hedged dialing', () => {
  test('a stalled first node: the hedge wins after the delay, the stalled node is marked, Dialed says hedges 1', async () => {
    const pool = new FixedPool([node('socks5', stalledPort), node('socks5', healthyPort)]);
    const { r, metrics } = routerWith(pool);
    const a = r.authorize('alice', 'secret');
    assert.ok(a.ok);
    const started = performance.now();
    const dialed = await r.dial(a.route, { host: '127.0.0.1', port: 9 });
    const took = performance.now() - started;
    assert.equal(dialed.node.port, healthyPort);
    assert.equal(dialed.hedges, 1);
    assert.equal(dialed.retries, 0);
    assert.ok(took >= 95, `won after ${took} ms, before the hedge delay`);
    assert.deepEqual(
      pool.failures.map((f) => [f.id, f.reason]),
      [[node('socks5', stalledPort).id, 'stalled']],
    );
    assert.equal(await counter(metrics, 'upstreamHedges', 'outcome', 'won'), 1);
    dialed.socket.destroy();
    dialed.release();
    // The stalled loser gets a grace to answer; still silent, it is counted a stall and both nodes go back.
    await waitFor(() => pool.released === pool.acquired, 5000, 'both nodes released');
    assert.equal(await counter(metrics, 'upstreamFailures', 'reason', 'stalled'), 1);
    assert.equal(await counter(metrics, 'upstreamStallsForgiven', '', ''), 0);
  });

  test('a loser marked when the hedge won, that answers within the grace, is forgiven', async () => {
    // The "slow" node answers once the hedge has won (past the 100 ms hedge delay, within the 1 s grace). A fixed
    // 300 ms wait raced the hedge's own dial on a loaded machine: answered first, it was never a loser.
    let answer!: () => void;
    const hedgeWon = new Promise<void>((resolve) => (answer = resolve));
    const slowDialer: Dialer = async (n, target, options) => {
      if (n.port !== stalledPort) return firstByteDialer(n, target, options);
      const socket = await connectTcp(n.host, n.port, options.connectTimeoutMs, options.signal);
      await hedgeWon;
      return { socket, head: null };
    };
    const pool = new FixedPool([node('socks5', stalledPort), node('socks5', healthyPort)]);
    const { r, metrics } = routerWith(pool, { dialer: slowDialer });
    const a = r.authorize('alice', 'secret');
    assert.ok(a.ok);
    const dialed = await r.dial(a.route, { host: '127.0.0.1', port: 9 });
    assert.equal(dialed.node.port, healthyPort);
    answer();
    // The loser's late tunnel is closed and its node released (the winner is still held).
    await waitFor(() => pool.released === pool.acquired - 1, 5000, 'the loser released');
    assert.deepEqual(
      pool.failures.map((f) => f.reason),
      ['stalled'],
      'marked at once, so the next connections avoid it',
    );
    assert.ok(pool.successes.includes(node('socks5', stalledPort).id), 'then forgiven: it answered');
    assert.equal(await counter(metrics, 'upstreamFailures', 'reason', 'stalled'), 0);
    assert.equal(await counter(metrics, 'upstreamStallsForgiven', '', ''), 1, 'the forgiven stall is counted');
    dialed.socket.destroy();
    dialed.release();
  });

  test('a healthy first node answers before the delay: no hedge, nothing marked', async () => {
    const pool = new FixedPool([node('socks5', healthyPort), node('socks5', stalledPort)]);
    const { r, metrics } = routerWith(pool, { hedgeAfterMs: 1000 });
    const a = r.authorize('alice', 'secret');
    assert.ok(a.ok);
    const dialed = await r.dial(a.route, { host: '127.0.0.1', port: 9 });
    assert.equal(dialed.hedges, 0);
    assert.equal(pool.failures.length, 0);
    assert.equal(await counter(metrics, 'upstreamHedges', 'outcome', 'won'), 0);
    dialed.socket.destroy();
    dialed.release();
  });

  test('the hedge delays of many dials share one timer; a dial stalled among them still gets its hedge', async () => {
    // Timeouts dial-race.ts creates (async_hooks sees each; the dialer's and the test's own are not counted).
    let timers = 0;
    const hook = createHook({
      init(_id, type) {
        if (type === 'Timeout' && /src[\\/]proxy[\\/]dial-race\.ts/.test(new Error().stack ?? '')) timers++;
      },
    });
    const pool = new FixedPool([node('socks5', healthyPort)]);
    const { r } = routerWith(pool, { hedgeAfterMs: 5_000 });
    const a = r.authorize('alice', 'secret');
    assert.ok(a.ok);
    hook.enable();
    for (let i = 0; i < 10; i++) {
      const dialed = await r.dial(a.route, { host: '127.0.0.1', port: 9 });
      assert.equal(dialed.hedges, 0);
      dialed.socket.destroy();
      dialed.release();
    }
    hook.disable();
    assert.ok(timers <= 2, `${timers} timers for 10 dials`);
    // Behind those, a stalled first node still gets its hedge at the delay (the queue's timer re-armed).
    const stalledFirst = new FixedPool([node('socks5', stalledPort), node('socks5', healthyPort)]);
    const second = routerWith(stalledFirst, { hedgeAfterMs: 100 });
    const b = second.r.authorize('alice', 'secret');
    assert.ok(b.ok);
    const started = performance.now();
    const dialed = await second.r.dial(b.route, { host: '127.0.0.1', port: 9 });
    const took = performance.now() - started;
    assert.equal(dialed.hedges, 1);
    assert.ok(took >= 95, `won after ${took} ms, before the hedge delay`);
    dialed.socket.destroy();
    dialed.release();
    await waitFor(() => stalledFirst.released === stalledFirst.acquired, 5000, 'both nodes released');
  });

  test('a dial that answered leaves nothing of itself in the hedge queue while its delay runs', async () => {
    // The queue held each attempt until its delay passed, and with it the race and the tunnel it made (sockets,
    // relay, connection record): at 1,000 tunnels a second, 150 of them, which the scavenger then copied.
    const delay = 30_000 + Math.floor(Math.random() * 1000);
    const pool = new FixedPool([node('socks5', healthyPort)]);
    const { r } = routerWith(pool, { hedgeAfterMs: delay });
    const a = r.authorize('alice', 'secret');
    assert.ok(a.ok);
    for (let i = 0; i < 5; i++) {
      const dialed = await r.dial(a.route, { host: '127.0.0.1', port: 9 });
      assert.equal(dialed.hedges, 0);
      dialed.socket.destroy();
      dialed.release();
    }
    assert.equal(hedgesWaiting(delay), 0);
    // One still dialing stays in it (a stalled node: its hedge is still due).
    const stalledOnly = routerWith(new FixedPool([node('socks5', stalledPort)]), { hedgeAfterMs: delay });
    const b = stalledOnly.r.authorize('alice', 'secret');
    assert.ok(b.ok);
    const abort = new AbortController();
    const pending = stalledOnly.r.dial(b.route, { host: '127.0.0.1', port: 9 }, abort.signal);
    await waitFor(() => hedgesWaiting(delay) === 1, 5000, 'the stalled dial waits for its hedge');
    abort.abort();
    await assert.rejects(pending);
    assert.equal(hedgesWaiting(delay), 0);
  });

  test('a client that leaves past the hedge delay still marks the nodes it waited on; before it, nothing', async () => {
    const pool = new FixedPool([node('socks5', stalledPort)]);
    const { r, metrics } = routerWith(pool, { hedgeAfterMs: 100 });
    const a = r.authorize('alice', 'secret');
    assert.ok(a.ok);
    const early = new DialCancel();
    const p1 = r.dial(a.route, { host: '127.0.0.1', port: 9 }, early);
    setTimeout(() => early.abort(), 20); // timing under test: before the 100 ms hedge delay
    await assert.rejects(p1, (e: unknown) => e instanceof GatewayError && e.code === 'DIAL_ABORTED');
    assert.equal(pool.failures.length, 0, 'left before the hedge delay: nothing learnt');
    const late = new DialCancel();
    const p2 = r.dial(a.route, { host: '127.0.0.1', port: 9 }, late);
    setTimeout(() => late.abort(), 250); // timing under test: past the 100 ms hedge delay
    await assert.rejects(p2, (e: unknown) => e instanceof GatewayError && e.code === 'DIAL_ABORTED');
    assert.deepEqual(
      pool.failures.map((f) => f.reason),
      ['stalled'],
    );
    assert.equal(await counter(metrics, 'upstreamFailures', 'reason', 'stalled'), 1);
    assert.equal(await counter(metrics, 'upstreamHedges', 'outcome', 'abandoned'), 0, 'no other node: no hedge was started');
    assert.equal(pool.released, pool.acquired);
  });

  test('a static instance that stalls is marked on its StaticPool when the client leaves', async () => {
    const inst = node('socks5', stalledPort, 'iu', 'ip');
    const instances: InstanceDirectory = { get: (no) => (no === 'I1' ? inst : undefined), allowed: () => true };
    const { r } = routerWith(new FixedPool([node('socks5', healthyPort)]), { instances, hedgeAfterMs: 100 });
    const a = r.authorize('alice-instance-I1', 'secret');
    assert.ok(a.ok);
    const cancel = new DialCancel();
    const p = r.dial(a.route, { host: '127.0.0.1', port: 9 }, cancel);
    setTimeout(() => cancel.abort(), 250); // timing under test: the client leaves past the 100 ms hedge delay
    await assert.rejects(p);
    const [pool] = r.staticPools();
    assert.ok(pool);
    const snap = pool.snapshot();
    assert.equal(snap.consecutiveFailures, 1);
    assert.equal(snap.lastFailure, 'stalled');
    assert.equal(snap.activeConnections, 0);
    // As GET /v1/pools lists it.
    const listed = pool.poolSnapshot();
    assert.equal(listed.id, 'instance/I1');
    assert.equal(listed.nodes[0]!.fails, 1);
    assert.ok(listed.nodes[0]!.lastFailedAt);
  });
});
