// The gateway end to end (issue 4, "Done when"): the real daemon on the embedded sandbox, reached with curl
// (both listeners, every proxy mode) and Node clients, traffic to a loopback target that answers with the
// address it saw — one of the sandbox's exits (127.0.0.2 ..), never 127.0.0.1, when it went through Rotor.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Exits } from '../../src/sim/upstreams/exits.ts';
import {
  curl,
  curlVias,
  nodeConnectGet,
  nodeHttpGet,
  nodeSocksGet,
  openStaticInstance,
  startGateway,
  startRotorProcess,
  startTarget,
  viaConnect,
  viaHttp,
  viaSocks5h,
  viaSocks5Hostname,
  waitFor,
  type Gateway,
  type Target,
} from './harness.ts';

const ALICE = 'alice';
const ALICE_PASS = 'alice-pass';

interface SessionView {
  user: string;
  sessionId: string;
  nodeId: string;
}
interface PoolView {
  id: string;
  ready: number;
  cooling: number;
  nodes: Array<{ port: number; state: 'ready' | 'cooling'; fails: number }>;
}

describe('gateway: both listeners, rotation, refusals, static instances', () => {
  let gw: Gateway;
  let target: Target;

  before(async () => {
    [gw, target] = await Promise.all([startGateway(), startTarget()]);
  });
  after(async () => {
    await gw?.close();
    await target?.close();
  });

  test('the README curl line works right after startup (default config shape, ports 0)', async () => {
    // README: curl -x http://alice:alice-pass@127.0.0.1:8080 http://127.0.0.1:9090/healthz — the very first
    // connection, so the pool is empty and the gateway draws on demand.
    const r = await curl([...viaHttp(gw.ports.http, ALICE, ALICE_PASS), `${gw.adminUrl}/healthz`]);
    assert.equal(r.exitCode, 0, r.stderr);
    assert.equal(r.status, 200, r.body);
    assert.match(r.body, /ok/i);
    assert.equal(gw.config.users.map((u) => u.name).join(','), 'alice,bob');
  });

  test('requests reach a loopback target through both listeners (curl and Node clients)', async () => {
    assert.ok(gw.exits.length >= 2, 'the sandbox has several exits');
    assert.ok(!gw.exits.includes('127.0.0.1'));
    for (const via of curlVias(gw.ports)) {
      const r = await curl([...via.args(ALICE, ALICE_PASS), target.url('/via-curl')]);
      assert.equal(r.exitCode, 0, `${via.name}: ${r.stderr}`);
      assert.equal(r.status, 200, via.name);
      assert.ok(gw.exits.includes(r.body), `${via.name}: the target saw ${r.body}, not a sandbox exit`);
    }
    const plain = await nodeHttpGet(gw.ports.http, ALICE, ALICE_PASS, target.url('/via-node-http'));
    assert.equal(plain.status, 200);
    assert.ok(gw.exits.includes(plain.body), `node absolute-URI: ${plain.body}`);
    const tunnel = await nodeConnectGet(gw.ports.http, ALICE, ALICE_PASS, target.port, '/via-node-connect');
    assert.equal(tunnel.status, 200);
    assert.ok(gw.exits.includes(tunnel.body), `node CONNECT: ${tunnel.body}`);
    const socks = await nodeSocksGet(gw.ports.socks5, ALICE, ALICE_PASS, target.port, '/via-node-socks');
    assert.equal(socks.status, 200);
    assert.ok(gw.exits.includes(socks.body), `node SOCKS5: ${socks.body}`);

    // Traffic is metered per user in both directions.
    assert.ok((await gw.metric('rotor_proxy_bytes_total', { user: ALICE, direction: 'down' })) > 0);
    assert.ok((await gw.metric('rotor_proxy_connections_total', { listener: 'http', result: 'ok' })) >= 4);
    assert.ok((await gw.metric('rotor_proxy_connections_total', { listener: 'socks5', result: 'ok' })) >= 3);
  });

  test('bob (draw: api, whitelist extraction) reaches the target too', async () => {
    const r = await curl([...viaSocks5h(gw.ports.socks5, 'bob', 'bob-pass'), target.url('/bob')]);
    assert.equal(r.exitCode, 0, r.stderr);
    assert.ok(gw.exits.includes(r.body), r.body);
    const h = await curl([...viaConnect(gw.ports.http, 'bob', 'bob-pass'), target.url('/bob')]);
    assert.equal(h.status, 200, h.stderr);
    assert.ok(gw.exits.includes(h.body), h.body);
  });

  test('a rotating user (no session) spreads new connections over several exits', async () => {
    const seen: string[] = [];
    const clients: Array<() => Promise<string>> = [
      async () => (await curl([...viaHttp(gw.ports.http, ALICE, ALICE_PASS), target.url('/r')])).body,
      async () => (await curl([...viaSocks5h(gw.ports.socks5, ALICE, ALICE_PASS), target.url('/r')])).body,
      async () => (await nodeHttpGet(gw.ports.http, ALICE, ALICE_PASS, target.url('/r'))).body,
      async () => (await nodeSocksGet(gw.ports.socks5, ALICE, ALICE_PASS, target.port, '/r')).body,
    ];
    for (let i = 0; i < 12; i++) seen.push(await clients[i % clients.length]!());
    for (const exit of seen) assert.ok(gw.exits.includes(exit), `not an exit: ${exit}`);
    const distinct = new Set(seen);
    // Round robin over the drawn nodes: with 5 nodes per draw, 12 connections see several of them.
    assert.ok(distinct.size > 1, `12 rotating connections all left through ${[...distinct].join(', ')}`);
    assert.ok(distinct.size >= 3, `only ${distinct.size} exits over 12 rotating connections: ${seen.join(' ')}`);
  });

  test('wrong credentials, unknown user, unknown option: HTTP 407 and SOCKS5 auth failure', async () => {
    const before = await gw.metric('rotor_proxy_connections_total', { result: 'auth_failed' });
    const cases: Array<{ what: string; user: string; pass: string; reason: RegExp }> = [
      { what: 'wrong password', user: ALICE, pass: 'not-the-password', reason: /wrong user name or password/ },
      { what: 'unknown user', user: 'mallory', pass: ALICE_PASS, reason: /wrong user name or password|unknown user/ },
      { what: 'unknown option', user: `${ALICE}-colour-red`, pass: ALICE_PASS, reason: /unknown option 'colour'/ },
      { what: 'bad option value', user: `${ALICE}-session-a/b`, pass: ALICE_PASS, reason: /./ },
    ];
    for (const c of cases) {
      const plain = await curl([...viaHttp(gw.ports.http, c.user, c.pass), target.url('/denied')]);
      assert.equal(plain.status, 407, `${c.what} (absolute URI): ${plain.status} ${plain.body}`);
      assert.match(plain.body, c.reason, c.what);
      const tunnel = await curl([...viaConnect(gw.ports.http, c.user, c.pass), target.url('/denied')]);
      assert.equal(tunnel.exitCode, 56, `${c.what} (CONNECT): ${tunnel.stderr}`);
      assert.match(tunnel.stderr, /407/, c.what);
      for (const args of [viaSocks5h(gw.ports.socks5, c.user, c.pass), viaSocks5Hostname(gw.ports.socks5, c.user, c.pass)]) {
        const s = await curl([...args, target.url('/denied')]);
        assert.equal(s.exitCode, 97, `${c.what} (SOCKS5): exit ${s.exitCode} ${s.stderr}`);
        assert.match(s.stderr, /rejected|authentication/i, c.what);
      }
    }
    // Node clients see the same: 407 with a Basic challenge; the socks library reports failed authentication.
    const node = await nodeHttpGet(gw.ports.http, ALICE, 'nope', target.url('/denied'));
    assert.equal(node.status, 407);
    assert.match(String(node.headers['proxy-authenticate']), /^Basic/);
    const anonymous = await nodeHttpGet(gw.ports.http, undefined, '', target.url('/denied'));
    assert.equal(anonymous.status, 407);
    const connect = await nodeConnectGet(gw.ports.http, 'mallory', 'x', target.port);
    assert.equal(connect.status, 407);
    await assert.rejects(nodeSocksGet(gw.ports.socks5, ALICE, 'nope', target.port), /Authentication failed/i);
    assert.equal(target.requests > 0, true);
    const requestsBefore = target.requests;
    await curl([...viaHttp(gw.ports.http, ALICE, 'nope'), target.url('/denied')]);
    assert.equal(target.requests, requestsBefore, 'a refused client never reaches the target');
    const after = await gw.metric('rotor_proxy_connections_total', { result: 'auth_failed' });
    assert.ok(after - before >= 4 * 4 + 4, `auth_failed went from ${before} to ${after}`);
  });

  test('-instance-<instanceNo>: a static order opened through the admin API carries traffic via its exit', async () => {
    const unknown = await curl([...viaHttp(gw.ports.http, `${ALICE}-instance-INS99999999`, ALICE_PASS), target.url('/i')]);
    assert.equal(unknown.status, 403, unknown.body);
    assert.match(unknown.body, /instance/);
    const unknownSocks = await curl([...viaSocks5h(gw.ports.socks5, `${ALICE}-instance-INS99999999`, ALICE_PASS), target.url('/i')]);
    assert.equal(unknownSocks.exitCode, 97, unknownSocks.stderr);

    const instanceNo = await openStaticInstance(gw);
    // The sandbox pins a static instance to one exit (src/sim/upstreams/exits.ts: fixed per instance number).
    const instanceExit = new Exits(gw.exits, Date.now).fixed(instanceNo);
    const user = `${ALICE}-instance-${instanceNo}`;

    // The gateway learns running instances from the store on a short refresh: wait until it routes.
    const first = await waitFor(
      'the gateway to route the new instance',
      async () => {
        const r = await curl([...viaHttp(gw.ports.http, user, ALICE_PASS), target.url('/i')]);
        return r.status === 200 ? r : undefined;
      },
      10_000,
      250,
    );
    assert.equal(first.body, instanceExit);
    for (const args of [
      viaConnect(gw.ports.http, user, ALICE_PASS),
      viaSocks5h(gw.ports.socks5, user, ALICE_PASS),
      viaSocks5Hostname(gw.ports.socks5, user, ALICE_PASS),
    ]) {
      const r = await curl([...args, target.url('/i')]);
      assert.equal(r.exitCode, 0, r.stderr);
      assert.equal(r.body, instanceExit, `${args.join(' ')} left through ${r.body}`);
    }
    const viaNode = await nodeSocksGet(gw.ports.socks5, user, ALICE_PASS, target.port, '/i');
    assert.equal(viaNode.body, instanceExit);
  });
});

describe('gateway: sticky sessions on a controllable clock', () => {
  let gw: Gateway;
  let target: Target;

  before(async () => {
    [gw, target] = await Promise.all([startGateway(), startTarget()]);
  });
  after(async () => {
    await gw?.close();
    await target?.close();
  });

  /** One connection as `user` through the listener and client picked by `i` (sessions span listeners). */
  async function exitOf(user: string, i: number): Promise<string> {
    const r =
      i % 3 === 0
        ? (await curl([...viaHttp(gw.ports.http, user, ALICE_PASS), target.url('/s')])).body
        : i % 3 === 1
          ? (await curl([...viaSocks5h(gw.ports.socks5, user, ALICE_PASS), target.url('/s')])).body
          : (await nodeConnectGet(gw.ports.http, user, ALICE_PASS, target.port, '/s')).body;
    assert.ok(gw.exits.includes(r), `${user}: not an exit: ${r}`);
    return r;
  }
  async function sessionNode(id: string): Promise<string | undefined> {
    const r = await gw.admin<SessionView[]>('/v1/sessions');
    assert.equal(r.status, 200);
    return r.body.find((s) => s.user === ALICE && s.sessionId === id)?.nodeId;
  }
  async function sameExit(user: string, n: number): Promise<string> {
    const exits: string[] = [];
    for (let i = 0; i < n; i++) exits.push(await exitOf(user, i));
    assert.equal(new Set(exits).size, 1, `${user} moved between exits: ${exits.join(' ')}`);
    return exits[0]!;
  }
  const expired = () => gw.metric('rotor_session_rotations_total', { reason: 'expired' });

  // Each session's new node is one no connection used before, so the sandbox gives it an exit of its own:
  // a moved session shows up as a different remoteAddress at the target.
  // First in this daemon: the pool draws at the session's first connection, so nodes and session start together.
  test('default sesstime (5 minutes): pool nodes and the session expire together, the session moves', async () => {
    const user = `${ALICE}-session-b1`;
    const exit1 = await sameExit(user, 3);
    const node1 = await sessionNode('b1');
    const expiredBefore = await expired();

    gw.clock.advance(4 * 60_000);
    assert.equal(await exitOf(user, 1), exit1);
    gw.clock.advance(60_000 + 1000);
    const exit2 = await sameExit(user, 3);
    assert.notEqual(exit2, exit1);
    const node2 = await sessionNode('b1');
    assert.ok(node2 && node2 !== node1, `new upstream after sesstime (${node1} → ${node2})`);
    assert.ok((await expired()) - expiredBefore >= 1);
    // The nodes drawn before the jump expired with their sesstime; the pool drew fresh ones.
    const pools = await gw.admin<PoolView[]>('/v1/pools');
    assert.ok(pools.body.find((p) => p.id.startsWith(`${ALICE}/`))!.nodes.length > 0);
  });

  test('-sesstime-1: one exit across connections, a new one after a minute', async () => {
    const user = `${ALICE}-session-a1-sesstime-1`;
    const exit1 = await sameExit(user, 4);
    const node1 = await sessionNode('a1');
    assert.ok(node1, 'the session is listed by GET /v1/sessions');
    const expiredBefore = await expired();

    gw.clock.advance(30_000);
    assert.equal(await exitOf(user, 0), exit1, 'half-way through its sesstime the session keeps its exit');
    gw.clock.advance(31_000);
    const exit2 = await sameExit(user, 4);
    assert.notEqual(exit2, exit1, 'after sesstime the session moved to another exit');
    const node2 = await sessionNode('a1');
    assert.ok(node2 && node2 !== node1, `the session got a new upstream (${node1} → ${node2})`);
    assert.equal((await expired()) - expiredBefore, 1, 'one rotation counted as expired');
  });

  test('forced rotation through the admin API moves the session at once', async () => {
    const user = `${ALICE}-session-c1`;
    const exit1 = await sameExit(user, 2);
    const manualBefore = await gw.metric('rotor_session_rotations_total', { reason: 'manual' });
    const del = await gw.admin('/v1/sessions/alice/c1', { method: 'DELETE' });
    assert.equal(del.status, 200);
    const exit2 = await sameExit(user, 2);
    assert.notEqual(exit2, exit1);
    assert.equal((await gw.metric('rotor_session_rotations_total', { reason: 'manual' })) - manualBefore, 1);
    assert.equal((await gw.admin('/v1/sessions/alice/nope', { method: 'DELETE' })).status, 404);
  });
});

describe('gateway: upstream failures', () => {
  const CONNECT_TIMEOUT_MS = 1500;
  const RETRIES = 3;
  let gw: Gateway;
  let target: Target;

  before(async () => {
    [gw, target] = await Promise.all([
      startGateway({ config: { proxy: { connectTimeoutMs: CONNECT_TIMEOUT_MS, retries: RETRIES } } }),
      startTarget(),
    ]);
  });
  after(async () => {
    await gw?.close();
    await target?.close();
  });

  test('a killed upstream node is retried transparently, marked, then avoided', async () => {
    const upstreams = gw.daemon.sim!.upstreams!;
    // Warm the pool: one draw spreads its nodes over the sandbox's gateway ports.
    const warm = await curl([...viaHttp(gw.ports.http, ALICE, ALICE_PASS), target.url('/warm')]);
    assert.equal(warm.status, 200, warm.stderr);
    const pool = async () => (await gw.admin<PoolView[]>('/v1/pools')).body.find((p) => p.id.startsWith(`${ALICE}/`))!;
    const killed = gw.gatewayPorts[0]!;
    assert.ok(
      (await pool()).nodes.some((n) => n.port === killed),
      'some node points at the port about to die',
    );
    const failuresBefore = await gw.metric('rotor_upstream_failures_total');

    upstreams.setFault(killed, { mode: 'refuse' });
    try {
      await killedNodeIsAvoided(killed, failuresBefore);
    } finally {
      upstreams.setFault(killed, null);
    }
  });

  async function killedNodeIsAvoided(killed: number, failuresBefore: number): Promise<void> {
    const pool = async () => (await gw.admin<PoolView[]>('/v1/pools')).body.find((p) => p.id.startsWith(`${ALICE}/`))!;
    const vias = curlVias(gw.ports);
    // Every request succeeds (the gateway retries on another node before any byte reached the client) until
    // every node on the dead port is cooling (maxFails failures each).
    let allCooling = false;
    for (let i = 0; i < 20 && !allCooling; i++) {
      const via = vias[i % vias.length]!;
      const r = await curl([...via.args(ALICE, ALICE_PASS), target.url('/k')]);
      assert.equal(r.exitCode, 0, `${via.name}: ${r.stderr}`);
      assert.equal(r.status, 200, `${via.name}: ${r.body}`);
      assert.ok(gw.exits.includes(r.body), `${via.name}: ${r.body}`);
      allCooling = (await pool()).nodes.filter((n) => n.port === killed).every((n) => n.state === 'cooling');
    }
    assert.ok(allCooling, `the nodes on the dead port were not marked: ${JSON.stringify((await pool()).nodes)}`);
    const failuresMarked = await gw.metric('rotor_upstream_failures_total');
    assert.ok(failuresMarked > failuresBefore, 'rotor_upstream_failures_total moved');
    const marked = await pool();
    assert.equal(marked.cooling, marked.nodes.filter((n) => n.port === killed).length, JSON.stringify(marked));
    assert.ok(marked.ready > 0, 'the healthy nodes stay ready');

    // Avoided: while it cools, no connection tries the dead node again.
    for (let k = 0; k < 6; k++) {
      const r = await nodeHttpGet(gw.ports.http, ALICE, ALICE_PASS, target.url('/avoid'));
      assert.equal(r.status, 200);
    }
    const s = await nodeSocksGet(gw.ports.socks5, ALICE, ALICE_PASS, target.port, '/avoid');
    assert.equal(s.status, 200);
    assert.equal(await gw.metric('rotor_upstream_failures_total'), failuresMarked, 'no dial went to the cooling node');
  }

  test('a silent upstream fails the client within the configured timeout: 504 / SOCKS5 0x04', async () => {
    const upstreams = gw.daemon.sim!.upstreams!;
    const reachedBefore = target.requests;
    upstreams.setFault('*', { mode: 'stall' });
    try {
      // Each attempt is bounded by connectTimeoutMs; at most 1 + retries attempts.
      const bound = (RETRIES + 1) * CONNECT_TIMEOUT_MS + 3000;
      const [plain, tunnel, socks, socksHostname, node] = await Promise.all([
        curl([...viaHttp(gw.ports.http, ALICE, ALICE_PASS), target.url('/stall')]),
        curl([...viaConnect(gw.ports.http, ALICE, ALICE_PASS), target.url('/stall')]),
        curl([...viaSocks5h(gw.ports.socks5, ALICE, ALICE_PASS), target.url('/stall')]),
        curl([...viaSocks5Hostname(gw.ports.socks5, ALICE, ALICE_PASS), target.url('/stall')]),
        nodeHttpGet(gw.ports.http, ALICE, ALICE_PASS, target.url('/stall')),
      ]);
      assert.equal(plain.status, 504, `absolute URI: ${plain.status} ${plain.body}`);
      assert.equal(tunnel.exitCode, 56, tunnel.stderr);
      assert.match(tunnel.stderr, /504/);
      assert.equal(node.status, 504, node.body);
      for (const s of [socks, socksHostname]) {
        assert.equal(s.exitCode, 97, s.stderr);
        // curl prints the SOCKS5 reply code in parentheses: 4 = host unreachable.
        assert.match(s.stderr, /\(4\)/, s.stderr);
      }
      for (const [name, ms] of [
        ['plain', plain.elapsedMs],
        ['connect', tunnel.elapsedMs],
        ['socks5h', socks.elapsedMs],
        ['socks5-hostname', socksHostname.elapsedMs],
        ['node', node.elapsedMs],
      ] as const) {
        assert.ok(ms >= CONNECT_TIMEOUT_MS - 100, `${name} failed after ${ms} ms: it did not wait for the upstream`);
        assert.ok(ms <= bound, `${name} took ${ms} ms, more than ${bound} ms`);
      }
      assert.ok(
        (await gw.metric('rotor_upstream_failures_total', { reason: 'connect_timeout' })) +
          (await gw.metric('rotor_upstream_failures_total', { reason: 'handshake' })) >
          0,
      );
      assert.equal(target.requests, reachedBefore, 'nothing reached the target through a silent upstream');
    } finally {
      upstreams.setFault('*', null);
    }
  });
});

test('`rotor start` on config/default.yaml (ports from the environment = 0): the README curl line works', async () => {
  const rotor = await startRotorProcess();
  try {
    const health = await curl([...viaHttp(rotor.ports.http, ALICE, ALICE_PASS), `http://127.0.0.1:${rotor.ports.admin}/healthz`]);
    assert.equal(health.exitCode, 0, health.stderr);
    assert.equal(health.status, 200, health.body);
    const viaSocks = await curl([
      '-x',
      `socks5h://bob:bob-pass@127.0.0.1:${rotor.ports.socks5}`,
      `http://127.0.0.1:${rotor.ports.admin}/healthz`,
    ]);
    assert.equal(viaSocks.status, 200, viaSocks.stderr);
  } finally {
    const code = await rotor.stop();
    assert.equal(code, 0, rotor.output().slice(-2000));
  }
});
