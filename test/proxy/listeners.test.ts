// End to end on loopback: curl -> Rotor's listener -> a real upstream (microsocks, tinyproxy) -> target.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { UpstreamNode } from '../../src/pool/types.ts';
import { HttpListener } from '../../src/proxy/http.ts';
import { UnlimitedMeters } from '../support/meters.ts';
import { waitFor } from '../support/wait.ts';
import { Router } from '../../src/proxy/router.ts';
import { Socks5Listener } from '../../src/proxy/socks5.ts';
import { createMetrics, type Metrics } from '../../src/telemetry/metrics.ts';
import {
  FixedPool,
  FixedPools,
  MapSessions,
  Users,
  curl,
  deadPort,
  node,
  startMicrosocks,
  startSilent,
  startTarget,
  startTinyproxy,
  user,
  type Child,
} from './fixtures.ts';

interface Gateway {
  http: number;
  socks: number;
  pool: FixedPool;
  sessions: MapSessions;
  meters: UnlimitedMeters;
  metrics: Metrics;
  close: () => Promise<void>;
}

async function gateway(
  nodes: UpstreamNode[],
  options: { limits?: Map<string, number>; handshakeTimeoutMs?: number } = {},
): Promise<Gateway> {
  const pool = new FixedPool(nodes);
  const sessions = new MapSessions();
  const meters = new UnlimitedMeters(options.limits);
  const metrics = createMetrics({ defaultMetrics: false });
  const router = new Router({
    users: new Users([user('alice', 'alice-pass'), user('lim', 'lim-pass')]),
    meters,
    pools: new FixedPools(pool),
    sessions,
    metrics,
    retries: 3,
    connectTimeoutMs: 1000,
    handshakeTimeoutMs: options.handshakeTimeoutMs ?? 2000,
    dialDeadlineMs: 5000,
  });
  const http = new HttpListener({ router, port: 0, metrics, responseTimeoutMs: 3000 });
  const socks = new Socks5Listener({ router, port: 0, metrics, handshakeTimeoutMs: 2000 });
  const h = await http.listen();
  const s = await socks.listen();
  assert.equal(h.host, '127.0.0.1');
  return {
    http: h.port,
    socks: s.port,
    pool,
    sessions,
    meters,
    metrics,
    close: async () => {
      await http.close();
      await socks.close();
    },
  };
}

/** The SOCKS5 reply code curl prints: "Can't complete SOCKS5 connection to 127.0.0.1. (4)". */
function socksReply(stderr: string): number | undefined {
  const m = /Can't complete SOCKS5 connection to [^ ]+\. \((\d+)\)/.exec(stderr);
  return m ? Number(m[1]) : undefined;
}

async function counter(metrics: Metrics, listener: string, result: string): Promise<number> {
  const m = await metrics.connectionsTotal.get();
  return m.values.find((v) => v.labels.listener === listener && v.labels.result === result)?.value ?? 0;
}

describe('listeners end to end with curl', () => {
  let target: Awaited<ReturnType<typeof startTarget>>;
  let socksUp: Child;
  let httpUp: Child;
  let url: string;
  before(async () => {
    target = await startTarget();
    socksUp = await startMicrosocks('up', 'uppass');
    httpUp = await startTinyproxy('up', 'uppass');
    url = `http://127.0.0.1:${target.port}/hello`;
  });
  after(async () => {
    await socksUp.stop();
    await httpUp.stop();
    await target.close();
  });

  for (const kind of ['socks5', 'http'] as const) {
    describe(`through a ${kind} upstream`, () => {
      let gw: Gateway;
      before(async () => {
        gw = await gateway([kind === 'socks5' ? node('socks5', socksUp.port, 'up', 'uppass') : node('http', httpUp.port, 'up', 'uppass')]);
      });
      after(() => gw.close());

      test('HTTP listener, absolute-URI request', async () => {
        const r = await curl(['-x', `http://alice:alice-pass@127.0.0.1:${gw.http}`, url]);
        assert.equal(r.stdout, 'hello from target', r.stderr);
        assert.equal(r.code, 0);
      });

      test('HTTP listener, plain POST with a body', async () => {
        const r = await curl([
          '-x',
          `http://alice:alice-pass@127.0.0.1:${gw.http}`,
          '--data-binary',
          'ping-body',
          `http://127.0.0.1:${target.port}/echo`,
        ]);
        assert.equal(r.stdout, 'ping-body', r.stderr);
      });

      test('HTTP listener, CONNECT (curl -p)', async () => {
        const r = await curl(['-p', '-x', `http://alice:alice-pass@127.0.0.1:${gw.http}`, url]);
        assert.equal(r.stdout, 'hello from target', r.stderr);
      });

      test('SOCKS5 listener, --socks5-hostname with --proxy-user', async () => {
        const r = await curl(['--socks5-hostname', `127.0.0.1:${gw.socks}`, '--proxy-user', 'alice:alice-pass', url]);
        assert.equal(r.stdout, 'hello from target', r.stderr);
      });

      test('SOCKS5 listener, -x socks5h:// with a domain target', async () => {
        const r = await curl(['-x', `socks5h://alice:alice-pass@127.0.0.1:${gw.socks}`, `http://localhost:${target.port}/hello`]);
        assert.equal(r.stdout, 'hello from target', r.stderr);
      });

      test('SOCKS5 listener, -x socks5:// (client resolves, IPv4 address)', async () => {
        const r = await curl(['-x', `socks5://alice:alice-pass@127.0.0.1:${gw.socks}`, url]);
        assert.equal(r.stdout, 'hello from target', r.stderr);
      });

      test('a large download arrives whole', async () => {
        const r = await curl([
          '-p',
          '-x',
          `http://alice:alice-pass@127.0.0.1:${gw.http}`,
          '-o',
          '/dev/null',
          '-w',
          '%{size_download}',
          `http://127.0.0.1:${target.port}/bytes/3000000`,
        ]);
        assert.equal(r.stdout, '3000000', r.stderr);
        const s = await curl([
          '-x',
          `socks5h://alice:alice-pass@127.0.0.1:${gw.socks}`,
          '-o',
          '/dev/null',
          '-w',
          '%{size_download}',
          `http://127.0.0.1:${target.port}/bytes/3000000`,
        ]);
        assert.equal(s.stdout, '3000000', s.stderr);
      });
    });
  }

  describe('refusals', () => {
    let gw: Gateway;
    before(async () => {
      gw = await gateway([node('socks5', socksUp.port, 'up', 'uppass')]);
    });
    after(() => gw.close());

    test('wrong password -> 407 with a reason (plain and CONNECT)', async () => {
      const r = await curl(['-x', `http://alice:nope@127.0.0.1:${gw.http}`, '-w', '\n%{http_code}', url]);
      assert.match(r.stdout, /wrong user name or password\n407$/);
      const c = await curl(['-p', '-x', `http://alice:nope@127.0.0.1:${gw.http}`, '-w', '%{http_connect}', url]);
      assert.equal(c.stdout.trim(), '407');
      assert.notEqual(c.code, 0);
    });

    test('no credentials -> 407 with Proxy-Authenticate', async () => {
      const r = await curl(['-x', `http://127.0.0.1:${gw.http}`, '-i', url]);
      assert.match(r.stdout, /^HTTP\/1\.1 407/);
      assert.match(r.stdout, /Proxy-Authenticate: Basic realm="rotor"/i);
    });

    test('unknown user and unknown option -> 407 with a one-line reason', async () => {
      const r = await curl(['-x', `http://nobody:x@127.0.0.1:${gw.http}`, '-w', '\n%{http_code}', url]);
      assert.match(r.stdout, /407$/);
      const o = await curl(['-x', `http://alice-colour-red:alice-pass@127.0.0.1:${gw.http}`, '-w', '\n%{http_code}', url]);
      assert.match(o.stdout, /^unknown option 'colour'\n407$/);
    });

    test('SOCKS5 wrong password -> auth failure (curl reports the rejection)', async () => {
      const before = await counter(gw.metrics, 'socks5', 'auth_failed');
      const r = await curl(['-x', `socks5h://alice:nope@127.0.0.1:${gw.socks}`, url]);
      assert.equal(r.code, 97, r.stderr);
      assert.equal(await counter(gw.metrics, 'socks5', 'auth_failed'), before + 1);
    });

    test('unknown instance -> 403 / SOCKS 0x02', async () => {
      const r = await curl(['-x', `http://alice-instance-I1:alice-pass@127.0.0.1:${gw.http}`, '-w', '\n%{http_code}', url]);
      assert.match(r.stdout, /unknown instance 'I1'\n403$/);
      const s = await curl(['-x', `socks5h://alice-instance-I1:alice-pass@127.0.0.1:${gw.socks}`, url]);
      assert.equal(socksReply(s.stderr), 2, s.stderr);
    });
  });

  test('retry: the first node refuses, the second works; the first is reported failed', async () => {
    const dead = await deadPort();
    const gw = await gateway([node('socks5', dead), node('socks5', socksUp.port, 'up', 'uppass')]);
    try {
      const r = await curl(['-x', `socks5h://alice:alice-pass@127.0.0.1:${gw.socks}`, url]);
      assert.equal(r.stdout, 'hello from target', r.stderr);
      assert.deepEqual(gw.pool.failures, [{ id: node('socks5', dead).id, reason: 'refused' }]);
      assert.deepEqual(gw.pool.successes, [node('socks5', socksUp.port, 'up', 'uppass').id]);
      const f = await gw.metrics.upstreamFailures.get();
      assert.equal(f.values.find((v) => v.labels.reason === 'refused')?.value, 1);
    } finally {
      await gw.close();
    }
    // Every acquired node was handed back once the connection ended.
    assert.equal(gw.pool.released, gw.pool.acquired);
  });

  test('sticky session: same node across connections; a failed node rotates the session', async () => {
    const a = node('socks5', socksUp.port, 'up', 'uppass');
    const b = node('http', httpUp.port, 'up', 'uppass');
    const gw = await gateway([a, b]);
    try {
      for (let i = 0; i < 3; i++) {
        const r = await curl(['-x', `socks5h://alice-session-s1:alice-pass@127.0.0.1:${gw.socks}`, url]);
        assert.equal(r.stdout, 'hello from target');
      }
      assert.equal(gw.sessions.get('alice', 's1')?.node.id, a.id);
      assert.deepEqual(gw.pool.successes, [a.id, a.id, a.id]);
      // The bound node stops being usable: the next connection gets a new node and the session moves.
      gw.pool.failures.push({ id: a.id, reason: 'refused' });
      const r = await curl(['-p', '-x', `http://alice-session-s1:alice-pass@127.0.0.1:${gw.http}`, url]);
      assert.equal(r.stdout, 'hello from target');
      assert.equal(gw.sessions.get('alice', 's1')?.node.id, b.id);
      assert.deepEqual(gw.sessions.rotations, ['alice/s1:failed']);
    } finally {
      await gw.close();
    }
  });

  test('a silent upstream: CONNECT answers 504 and SOCKS5 0x04 within the timeout', async () => {
    const silent = await startSilent();
    const gw = await gateway([node('http', silent.port)], { handshakeTimeoutMs: 300 });
    try {
      const started = Date.now();
      const r = await curl(['-p', '-x', `http://alice:alice-pass@127.0.0.1:${gw.http}`, '-w', '%{http_connect}', url]);
      assert.equal(r.stdout.trim(), '504');
      const s = await curl(['-x', `socks5h://alice:alice-pass@127.0.0.1:${gw.socks}`, url]);
      assert.equal(socksReply(s.stderr), 4, s.stderr);
      // Both within the per-attempt timeout times one node (it is excluded after failing).
      assert.ok(Date.now() - started < 3000);
      assert.equal(await counter(gw.metrics, 'http', 'upstream_error'), 1);
      // Plain HTTP through a silent HTTP upstream: bounded by the response timeout.
      const p = await curl(['-x', `http://alice:alice-pass@127.0.0.1:${gw.http}`, '-w', '\n%{http_code}', url]);
      assert.match(p.stdout, /504$/);
    } finally {
      await gw.close();
      await silent.close();
    }
  });

  test('all nodes refuse: 502 / SOCKS 0x05 after the retries', async () => {
    const gw = await gateway([node('socks5', await deadPort()), node('http', await deadPort())]);
    try {
      const r = await curl(['-p', '-x', `http://alice:alice-pass@127.0.0.1:${gw.http}`, '-w', '%{http_connect}', url]);
      assert.equal(r.stdout.trim(), '502');
      const s = await curl(['-x', `socks5h://alice:alice-pass@127.0.0.1:${gw.socks}`, url]);
      assert.equal(socksReply(s.stderr), 5, s.stderr);
      assert.equal(gw.pool.failures.length, 4);
    } finally {
      await gw.close();
    }
  });

  test('no node at all: 503 / SOCKS 0x03', async () => {
    const gw = await gateway([]);
    try {
      const r = await curl(['-p', '-x', `http://alice:alice-pass@127.0.0.1:${gw.http}`, '-w', '%{http_connect}', url]);
      assert.equal(r.stdout.trim(), '503');
      const s = await curl(['-x', `socks5h://alice:alice-pass@127.0.0.1:${gw.socks}`, url]);
      assert.equal(socksReply(s.stderr), 3, s.stderr);
    } finally {
      await gw.close();
    }
  });

  for (const via of ['socks5', 'connect', 'plain'] as const) {
    test(`limit: a running download is closed at the limit and the next connection refused (${via})`, async () => {
      const limit = 256 * 1024;
      const gw = await gateway([node('socks5', socksUp.port, 'up', 'uppass')], { limits: new Map([['lim', limit]]) });
      try {
        const big = `http://127.0.0.1:${target.port}/bytes/20000000`;
        const proxyArgs =
          via === 'socks5'
            ? ['-x', `socks5h://lim:lim-pass@127.0.0.1:${gw.socks}`]
            : [...(via === 'connect' ? ['-p'] : []), '-x', `http://lim:lim-pass@127.0.0.1:${gw.http}`];
        const r = await curl([...proxyArgs, '-o', '/dev/null', '-w', '%{size_download}', big]);
        assert.notEqual(r.code, 0);
        const got = Number(r.stdout);
        assert.ok(got > 0 && got <= limit, `downloaded ${got}`);
        const used = gw.meters.usage('lim');
        assert.ok(used.up + used.down >= limit);
        // The next connection is refused: 403 on HTTP, 0x02 on SOCKS5.
        const h = await curl(['-x', `http://lim:lim-pass@127.0.0.1:${gw.http}`, '-w', '\n%{http_code}', url]);
        assert.match(h.stdout, /limit.*\n403$/);
        const s = await curl(['-x', `socks5h://lim:lim-pass@127.0.0.1:${gw.socks}`, url]);
        assert.equal(socksReply(s.stderr), 2, s.stderr);
        assert.ok((await counter(gw.metrics, 'http', 'limited')) >= 1);
        // Connections are counted closed again.
        await waitFor(() => gw.meters.usage('lim').active === 0, 5000, "lim's connections counted closed");
      } finally {
        await gw.close();
      }
    });
  }

  test('bytes per user reach rotor_proxy_bytes_total when the connection closes', async () => {
    const gw = await gateway([node('socks5', socksUp.port, 'up', 'uppass')]);
    try {
      await curl([
        '-x',
        `socks5h://alice:alice-pass@127.0.0.1:${gw.socks}`,
        '-o',
        '/dev/null',
        `http://127.0.0.1:${target.port}/bytes/100000`,
      ]);
      // The bytes are counted when the relay ends, which follows curl's exit by a moment.
      await waitFor(() => gw.meters.usage('alice').active === 0, 5000, 'the relay to end');
      const m = await gw.metrics.bytesTotal.get();
      const down = m.values.find((v) => v.labels.user === 'alice' && v.labels.direction === 'down')?.value ?? 0;
      const up = m.values.find((v) => v.labels.user === 'alice' && v.labels.direction === 'up')?.value ?? 0;
      assert.ok(down > 100000 && down < 101000, `down ${down}`);
      assert.ok(up > 50 && up < 500, `up ${up}`);
      const active = await gw.metrics.connectionsActive.get();
      assert.equal(active.values.find((v) => v.labels.listener === 'socks5')?.value, 0);
    } finally {
      await gw.close();
    }
  });

  test('a client that leaves during a slow dial cancels it', async () => {
    const silent = await startSilent();
    const gw = await gateway([node('socks5', silent.port)], { handshakeTimeoutMs: 5000 });
    try {
      const s = connect({ host: '127.0.0.1', port: gw.http });
      s.write(
        `CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nProxy-Authorization: Basic ${Buffer.from('alice:alice-pass').toString('base64')}\r\n\r\n`,
      );
      await waitFor(() => gw.meters.usage('alice').active === 1, 5000, 'the dial to start');
      s.destroy();
      await waitFor(() => gw.meters.usage('alice').active === 0 && gw.pool.released === gw.pool.acquired, 5000, 'the dial to be cancelled');
      assert.equal(gw.pool.released, gw.pool.acquired);
      assert.deepEqual(gw.pool.failures, []);
    } finally {
      await gw.close();
      await silent.close();
    }
  });
});
