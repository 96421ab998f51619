// Every module keeps its state on a socket in the socket's one slot (src/wire/socket-slot.ts), never in a property
// of its own: each property added to a socket is a new hidden class, and node's stream code, whose inline caches
// all sockets share, ran megamorphic on the nine classes or more a tunnel's sockets went through. Real listeners,
// real upstreams (tinyproxy for CONNECT, microsocks for SOCKS5), a tunnel held open while the process's sockets
// are looked at.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { HttpListener } from '../../src/proxy/http.ts';
import { Router } from '../../src/proxy/router.ts';
import { Socks5Listener } from '../../src/proxy/socks5.ts';
import { createMetrics } from '../../src/telemetry/metrics.ts';
import { UnlimitedMeters } from '../support/meters.ts';
import { socks5Connect } from '../support/socks5-connect.ts';
import { waitFor } from '../support/wait.ts';
import {
  FixedPool,
  FixedPools,
  MapSessions,
  Users,
  node,
  startMicrosocks,
  startTarget,
  startTinyproxy,
  user,
  type Child,
} from './fixtures.ts';

/** The own symbol properties named rotor.* of every socket in the process that has any. */
function rotorProperties(): string[][] {
  const handles = (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles();
  return handles
    .filter((h): h is Socket => h instanceof Socket)
    .map((s) => Object.getOwnPropertySymbols(s).map((k) => k.description ?? ''))
    .map((names) => names.filter((n) => n.startsWith('rotor.')))
    .filter((names) => names.length > 0);
}

describe("a tunnel's sockets carry one property of Rotor's each, its slot", () => {
  let target: Awaited<ReturnType<typeof startTarget>>;
  let socksUp: Child;
  let httpUp: Child;
  let http: HttpListener;
  let socks: Socks5Listener;
  let ports: { http: number; socks: number };
  const open: Socket[] = [];
  before(async () => {
    target = await startTarget();
    socksUp = await startMicrosocks('up', 'uppass');
    httpUp = await startTinyproxy('up', 'uppass');
    const metrics = createMetrics({ defaultMetrics: false });
    const router = (pool: FixedPool): Router =>
      new Router({
        users: new Users([user('alice', 'alice-pass')]),
        meters: new UnlimitedMeters(),
        pools: new FixedPools(pool),
        sessions: new MapSessions(),
        metrics,
        retries: 1,
        connectTimeoutMs: 2000,
        handshakeTimeoutMs: 2000,
        dialDeadlineMs: 5000,
      });
    http = new HttpListener({
      router: router(new FixedPool([node('http', httpUp.port, 'up', 'uppass')])),
      port: 0,
      metrics,
      responseTimeoutMs: 3000,
    });
    socks = new Socks5Listener({
      router: router(new FixedPool([node('socks5', socksUp.port, 'up', 'uppass')])),
      port: 0,
      metrics,
      handshakeTimeoutMs: 2000,
    });
    ports = { http: (await http.listen()).port, socks: (await socks.listen()).port };
  });
  after(async () => {
    for (const s of open) s.destroy();
    await http.close();
    await socks.close();
    await socksUp.stop();
    await httpUp.stop();
    await target.close();
  });

  /** Bytes through the tunnel `s` (a GET to the target and its answer): the relay runs on both sides. */
  async function exchange(s: Socket): Promise<void> {
    s.write(`GET /hello HTTP/1.1\r\nHost: 127.0.0.1:${target.port}\r\n\r\n`);
    let got = '';
    s.on('data', (c: Buffer) => (got += c.toString('latin1')));
    await waitFor(() => got.includes('hello from target'), 5000, 'the answer through the tunnel');
  }

  test('CONNECT: the client socket and the upstream socket', async () => {
    const s = connect(ports.http, '127.0.0.1');
    open.push(s);
    await once(s, 'connect');
    const auth = Buffer.from('alice:alice-pass').toString('base64');
    s.write(`CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nHost: 127.0.0.1:${target.port}\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`);
    const [head] = (await once(s, 'data')) as [Buffer];
    assert.match(head.toString('latin1'), /^HTTP\/1\.1 200/);
    await exchange(s);
    const props = rotorProperties();
    assert.ok(props.length >= 2, `the tunnel's client and upstream sockets were found: ${JSON.stringify(props)}`);
    assert.deepEqual(
      props.filter((names) => names.length !== 1 || names[0] !== 'rotor.slot'),
      [],
      'a socket with a property of its own besides its slot',
    );
    s.destroy();
  });

  test('SOCKS5: the client socket and the upstream socket', async () => {
    const s = connect(ports.socks, '127.0.0.1');
    open.push(s);
    await once(s, 'connect');
    await new Promise<void>((resolve, reject) =>
      socks5Connect(s, { host: '127.0.0.1', port: target.port }, { username: 'alice', password: 'alice-pass' }, (err) =>
        err ? reject(err) : resolve(),
      ),
    );
    s.resume();
    await exchange(s);
    const props = rotorProperties();
    assert.ok(props.length >= 2, `the tunnel's client and upstream sockets were found: ${JSON.stringify(props)}`);
    assert.deepEqual(
      props.filter((names) => names.length !== 1 || names[0] !== 'rotor.slot'),
      [],
      'a socket with a property of its own besides its slot',
    );
    s.destroy();
  });
});
