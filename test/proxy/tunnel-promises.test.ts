// What a tunnel creates on the common path: a login verified before, a pool with a ready node, and a ready warm
// connection to it. Everything up to the upstream's answer to the request on the warm connection is ready, so
// the listeners run it in the turn that read the client's request, and the one wait (that answer) costs no
// promise: the dial's end reaches the listener by a tick (DialPromise.whenEnded) — not an async function and its
// await per layer (router, race, dialer, pipeline, listener); the SOCKS5 listener drives its handshake's steps from its own listeners (no promise per step). Counted with async_hooks in this process around one tunnel through a real listener (HTTP CONNECT
// and SOCKS5), from the client's connect to the first byte back through the tunnel; the upstreams and the
// client here use callbacks only, so every promise counted is the gateway's. The least of a few tunnels is
// judged (anything else in the process could only add to a count).
import assert from 'node:assert/strict';
import { createHook } from 'node:async_hooks';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { AcquireOptions, UpstreamNode } from '../../src/pool/types.ts';
import { HttpListener } from '../../src/proxy/http.ts';
import { Router } from '../../src/proxy/router.ts';
import { Socks5Listener } from '../../src/proxy/socks5.ts';
import { WarmConnections } from '../../src/proxy/warm.ts';
import { createMetrics } from '../../src/telemetry/metrics.ts';
import { UnlimitedMeters } from '../support/meters.ts';
import { poll } from '../support/wait.ts';
import { FixedPool, FixedPools, MapSessions, Users, closeServer, listenPort, node, user } from './fixtures.ts';

/** A pool whose nodes are always ready: acquireNow answers at once (as src/pool/pool.ts does with a node ready). */
class ReadyPool extends FixedPool {
  acquireNow(exclude?: ReadonlySet<string>, _options?: AcquireOptions): UpstreamNode | undefined {
    const n = this.nodes.find((x) => !exclude?.has(x.id));
    if (n) this.acquired++;
    return n;
  }
}

/**
 * An upstream proxy written with callbacks only: HTTP CONNECT (answers 200) or SOCKS5 with user/password (the
 * greeting, auth and request may come in one chunk or several); after its answer it echoes what it gets.
 */
function upstream(kind: 'http' | 'socks5'): Server {
  return createServer((s: Socket) => {
    s.on('error', () => undefined);
    let buf = Buffer.alloc(0);
    let stage = 0; // socks5: 0 greeting, 1 auth, 2 request; http: 0 request head; 3 echo
    const onData = (chunk: Buffer): void => {
      if (stage === 3) {
        s.write(chunk);
        return;
      }
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        if (kind === 'http') {
          const end = buf.indexOf('\r\n\r\n');
          if (end < 0) return;
          s.write('HTTP/1.1 200 Connection established\r\n\r\n');
          buf = buf.subarray(end + 4);
          stage = 3;
        } else if (stage === 0) {
          if (buf.length < 2 || buf.length < 2 + buf[1]!) return;
          s.write(Buffer.from([5, 2]));
          buf = buf.subarray(2 + buf[1]!);
          stage = 1;
          continue;
        } else if (stage === 1) {
          if (buf.length < 2) return;
          const ulen = buf[1]!;
          if (buf.length < 3 + ulen || buf.length < 3 + ulen + buf[2 + ulen]!) return;
          s.write(Buffer.from([1, 0]));
          buf = buf.subarray(3 + ulen + buf[2 + ulen]!);
          stage = 2;
          continue;
        } else {
          if (buf.length < 5) return;
          const len = buf[3] === 1 ? 10 : buf[3] === 4 ? 22 : 7 + buf[4]!;
          if (buf.length < len) return;
          s.write(Buffer.from([5, 0, 0, 1, 127, 0, 0, 1, 0, 1]));
          buf = buf.subarray(len);
          stage = 3;
        }
        if (buf.length > 0) s.write(buf);
        buf = Buffer.alloc(0);
        return;
      }
    };
    s.on('data', onData);
  });
}

/** One tunnel with callbacks only: resolves (outside the counted part) once the echo came back through it. */
function tunnel(kind: 'http' | 'socks5', port: number, done: (err?: Error) => void): void {
  const c = connect(port, '127.0.0.1');
  let got = Buffer.alloc(0);
  let stage = 0;
  const fail = (err: Error): void => {
    c.destroy();
    done(err);
  };
  c.on('error', fail);
  c.on('connect', () => {
    if (kind === 'http')
      c.write('CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: 127.0.0.1:9\r\nProxy-Authorization: Basic YWxpY2U6YWxpY2UtcGFzcw==\r\n\r\n');
    else c.write(Buffer.from([5, 1, 2]));
  });
  c.on('data', (chunk: Buffer) => {
    got = Buffer.concat([got, chunk]);
    if (kind === 'http') {
      if (stage === 0) {
        const end = got.indexOf('\r\n\r\n');
        if (end < 0) return;
        if (!got.subarray(0, end).toString().startsWith('HTTP/1.1 200')) return fail(new Error(`answered ${got.toString()}`));
        got = got.subarray(end + 4);
        stage = 9;
        c.write('ping');
      }
    } else if (stage === 0 && got.length >= 2) {
      got = got.subarray(2);
      stage = 1;
      const u = Buffer.from('alice');
      const p = Buffer.from('alice-pass');
      c.write(Buffer.concat([Buffer.from([1, u.length]), u, Buffer.from([p.length]), p]));
    } else if (stage === 1 && got.length >= 2) {
      if (got[1] !== 0) return fail(new Error('auth refused'));
      got = got.subarray(2);
      stage = 2;
      c.write(Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, 0, 9]));
    } else if (stage === 2 && got.length >= 10) {
      if (got[1] !== 0) return fail(new Error(`reply ${got[1]}`));
      got = got.subarray(10);
      stage = 9;
      c.write('ping');
    }
    if (stage === 9 && got.toString() === 'ping') {
      c.destroy();
      done();
    }
  });
}

describe('what a tunnel creates on the ready path (verified login, ready node, ready warm connection)', () => {
  const servers: Server[] = [];
  let http: HttpListener;
  let socks: Socks5Listener;
  let warm: WarmConnections;
  let ports: { http: number; socks5: number };
  const metrics = createMetrics({ defaultMetrics: false });
  const used = async (): Promise<number> =>
    (await metrics.upstreamWarmTotal.get()).values.find((v) => v.labels.outcome === 'used')?.value ?? 0;

  before(async () => {
    const httpUp = upstream('http');
    const socksUp = upstream('socks5');
    servers.push(httpUp, socksUp);
    const httpNode = node('http', await listenPort(httpUp), 'up', 'up-pass');
    const socksNode = node('socks5', await listenPort(socksUp), 'up', 'up-pass');
    warm = new WarmConnections({ perNode: 2, maxPerPool: 8, idleMs: 60_000, connectTimeoutMs: 5000, handshakeTimeoutMs: 5000, metrics });
    const pools = { http: new ReadyPool([httpNode]), socks5: new ReadyPool([socksNode]) };
    const make = (pool: ReadyPool): Router =>
      new Router({
        users: new Users([user('alice', 'alice-pass')]),
        meters: new UnlimitedMeters(),
        pools: new FixedPools(pool),
        sessions: new MapSessions(),
        metrics,
        dialers: { socks5: warm.socks5, http: warm.http },
      });
    http = new HttpListener({ router: make(pools.http), port: 0, metrics, responseTimeoutMs: 3000 });
    socks = new Socks5Listener({ router: make(pools.socks5), port: 0, metrics });
    ports = { http: (await http.listen()).port, socks5: (await socks.listen()).port };
  });

  after(async () => {
    await http.close();
    await socks.close();
    warm.close();
    for (const s of servers) await closeServer(s);
  });

  // The dial's end reaches the listener by a tick (DialPromise.whenEnded), not a promise and a reaction.
  for (const [kind, bound] of [
    ['http', 0],
    ['socks5', 0],
  ] as const) {
    test(`${kind === 'http' ? 'CONNECT' : 'SOCKS5'}: at most ${bound} promises per tunnel`, { timeout: 60_000 }, async () => {
      const port = ports[kind];
      const one = (): Promise<void> => new Promise((resolve, reject) => tunnel(kind, port, (err) => (err ? reject(err) : resolve())));
      // Demand for the node (the warm set keeps connections for a node with recent tunnels), and the login verified.
      for (let i = 0; i < 3; i++) await one();
      const counts: number[] = [];
      for (let i = 0; i < 6; i++) {
        await poll(() => warm.size > 0, { what: 'a ready warm connection', timeoutMs: 10_000, everyMs: 5 });
        const usedBefore = await used();
        let promises = 0;
        const hook = createHook({
          init(_id, type) {
            if (type === 'PROMISE') promises++;
          },
        });
        let finish: (err?: Error) => void = () => undefined;
        const measured = new Promise<void>((resolve, reject) => (finish = (err) => (err ? reject(err) : resolve())));
        // Started from a callback of its own: the await below (a promise of its own) comes before the counting.
        setImmediate(() => {
          hook.enable();
          tunnel(kind, port, (err) => {
            hook.disable();
            finish(err);
          });
        });
        await measured;
        // The tunnel took the ready warm connection (the path this test is about).
        if ((await used()) === usedBefore + 1) counts.push(promises);
      }
      assert.ok(counts.length >= 3, `tunnels measured on a warm connection: ${counts.length}`);
      const least = Math.min(...counts);
      assert.ok(least <= bound, `promises per ${kind} tunnel: ${counts.join(', ')} (at most ${bound})`);
    });
  }
});
