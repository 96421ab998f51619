// Proxy-Status (RFC 9209) on every answer Rotor writes itself, read off the wire with raw sockets, and strict
// sticky sessions (`-session-<id>-strict-1`): a 502 with Proxy-Status (SOCKS5: reply 0x03) instead of a move
// when the session's exit fails; a soft session moves as before.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { UpstreamNode } from '../../src/pool/types.ts';
import { HttpListener } from '../../src/proxy/http.ts';
import { proxyStatus } from '../../src/proxy/proxy-status.ts';
import { Router } from '../../src/proxy/router.ts';
import { Socks5Listener } from '../../src/proxy/socks5.ts';
import { parseUsername } from '../../src/proxy/username.ts';
import { DestinationPolicy } from '../../src/proxy/destination-rules.ts';
import { UnlimitedMeters } from '../support/meters.ts';
import {
  deadPort,
  FixedPool,
  FixedPools,
  MapSessions,
  node,
  startMicrosocks,
  startSilent,
  startTarget,
  user,
  Users,
  type Child,
} from './fixtures.ts';

const basic = (name: string, pass: string): string => `Basic ${Buffer.from(`${name}:${pass}`).toString('base64')}`;

/** Sends `text` on a raw socket and resolves with the answer's head (status and headers, lower-cased names). */
function rawHead(port: number, text: string): Promise<{ status: number; headers: Map<string, string>; raw: string }> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => s.write(text));
    let got = '';
    const done = (): void => {
      s.destroy();
      const end = got.indexOf('\r\n\r\n');
      const lines = got.slice(0, end < 0 ? got.length : end).split('\r\n');
      const headers = new Map<string, string>();
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(':');
        if (colon > 0) headers.set(line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim());
      }
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(lines[0] ?? '')?.[1] ?? 0), headers, raw: got });
    };
    s.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      if (got.includes('\r\n\r\n')) done();
    });
    s.on('error', reject);
    s.on('close', done);
  });
}

/** A SOCKS5 CONNECT with user/password; resolves with the reply code of the CONNECT (or the auth status + 0x100). */
function socksConnect(port: number, username: string, password: string, host: string, targetPort: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const s: Socket = connect(port, '127.0.0.1', () => s.write(Buffer.from([5, 1, 2])));
    let stage = 0;
    let buf = Buffer.alloc(0);
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (stage === 0 && buf.length >= 2) {
        buf = buf.subarray(2);
        stage = 1;
        const u = Buffer.from(username);
        const p = Buffer.from(password);
        s.write(Buffer.concat([Buffer.from([1, u.length]), u, Buffer.from([p.length]), p]));
      }
      if (stage === 1 && buf.length >= 2) {
        if (buf[1] !== 0) return (s.destroy(), resolve(0x100 + buf[1]!));
        buf = buf.subarray(2);
        stage = 2;
        const h = Buffer.from(host);
        const req = Buffer.concat([Buffer.from([5, 1, 0, 3, h.length]), h, Buffer.from([targetPort >> 8, targetPort & 0xff])]);
        s.write(req);
      }
      if (stage === 2 && buf.length >= 2) {
        s.destroy();
        resolve(buf[1]!);
      }
    });
    s.on('error', reject);
  });
}

function expectStatus(head: { status: number; headers: Map<string, string>; raw: string }, status: number, error: string): void {
  assert.equal(head.status, status, head.raw);
  const value = head.headers.get('proxy-status');
  assert.ok(value, `no Proxy-Status on the ${status}: ${head.raw}`);
  assert.match(value, new RegExp(`^rotor; error=${error}; details="[^"]*"$`), value);
}

describe('Proxy-Status on every answer Rotor writes itself', () => {
  let socksUp: Child;
  let target: Awaited<ReturnType<typeof startTarget>>;
  let silent: Awaited<ReturnType<typeof startSilent>>;
  let http: HttpListener;
  let httpPort: number;
  let emptyPort: number;
  let emptyListener: HttpListener;
  let silentListener: HttpListener;
  let silentPort: number;
  let dead: number;
  const meters = new UnlimitedMeters(new Map([['spent', 0]]));

  function makeRouter(nodes: UpstreamNode[]): Router {
    return new Router({
      users: new Users([user('alice', 'alice-pass'), user('spent', 'spent-pass')]),
      meters,
      pools: new FixedPools(new FixedPool(nodes)),
      sessions: new MapSessions(),
      retries: 1,
      connectTimeoutMs: 1000,
      handshakeTimeoutMs: 500,
      hedgeAfterMs: 5000,
      dialDeadlineMs: 3000,
      destinations: new DestinationPolicy({ denyPorts: [25], denyHosts: [], allowPorts: [], allowHosts: [] }),
    });
  }

  before(async () => {
    socksUp = await startMicrosocks('up', 'uppass');
    target = await startTarget();
    silent = await startSilent();
    dead = await deadPort();
    http = new HttpListener({ router: makeRouter([node('socks5', socksUp.port, 'up', 'uppass')]), port: 0 });
    httpPort = (await http.listen()).port;
    emptyListener = new HttpListener({ router: makeRouter([]), port: 0 });
    emptyPort = (await emptyListener.listen()).port;
    silentListener = new HttpListener({ router: makeRouter([node('http', silent.port)]), port: 0 });
    silentPort = (await silentListener.listen()).port;
  });
  after(async () => {
    await http.close();
    await emptyListener.close();
    await silentListener.close();
    await socksUp.stop();
    await target.close();
    await silent.close();
  });

  test('the header value: registered type, details an RFC 8941 string (quotes, backslashes, control bytes)', () => {
    assert.equal(proxyStatus('connection_refused', 'a "b" \\ c\r\nd'), 'rotor; error=connection_refused; details="a \\"b\\" \\\\ c??d"');
  });

  test('407 without credentials and with a wrong password (plain and CONNECT)', async () => {
    expectStatus(
      await rawHead(httpPort, `GET http://127.0.0.1:${target.port}/hello HTTP/1.1\r\nHost: x\r\n\r\n`),
      407,
      'http_request_denied',
    );
    const wrong = basic('alice', 'nope');
    expectStatus(
      await rawHead(httpPort, `GET http://127.0.0.1:${target.port}/hello HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${wrong}\r\n\r\n`),
      407,
      'http_request_denied',
    );
    expectStatus(
      await rawHead(httpPort, `CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${wrong}\r\n\r\n`),
      407,
      'http_request_denied',
    );
  });

  test('400: origin-form request, malformed CONNECT target, malformed request line', async () => {
    expectStatus(await rawHead(httpPort, 'GET /hello HTTP/1.1\r\nHost: x\r\n\r\n'), 400, 'http_request_error');
    expectStatus(
      await rawHead(httpPort, `CONNECT nonsense HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${basic('alice', 'alice-pass')}\r\n\r\n`),
      400,
      'http_request_error',
    );
    expectStatus(await rawHead(httpPort, 'GARBAGE\r\n\r\n'), 400, 'http_request_error');
  });

  test('403: a destination the rules deny, and a user whose limit is spent', async () => {
    const auth = basic('alice', 'alice-pass');
    expectStatus(
      await rawHead(httpPort, `CONNECT 127.0.0.1:25 HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${auth}\r\n\r\n`),
      403,
      'destination_ip_prohibited',
    );
    expectStatus(
      await rawHead(httpPort, `GET http://127.0.0.1:25/ HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${auth}\r\n\r\n`),
      403,
      'destination_ip_prohibited',
    );
    meters.meter('spent').add(1, 0);
    const spent = basic('spent', 'spent-pass');
    expectStatus(
      await rawHead(httpPort, `CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${spent}\r\n\r\n`),
      403,
      'http_request_denied',
    );
  });

  test('502: the target refuses through the upstream (plain and CONNECT)', async () => {
    const auth = basic('alice', 'alice-pass');
    expectStatus(
      await rawHead(httpPort, `CONNECT 127.0.0.1:${dead} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${auth}\r\n\r\n`),
      502,
      'connection_refused',
    );
    expectStatus(
      await rawHead(httpPort, `GET http://127.0.0.1:${dead}/ HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${auth}\r\n\r\n`),
      502,
      'connection_refused',
    );
  });

  test('503: no upstream in the pool', async () => {
    const auth = basic('alice', 'alice-pass');
    expectStatus(
      await rawHead(emptyPort, `CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${auth}\r\n\r\n`),
      503,
      'destination_unavailable',
    );
  });

  test('504: an upstream that never answers its handshake', async () => {
    const auth = basic('alice', 'alice-pass');
    expectStatus(
      await rawHead(silentPort, `CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${auth}\r\n\r\n`),
      504,
      'connection_timeout',
    );
  });

  test('an answer the upstream gave passes through without a Proxy-Status of Rotor', async () => {
    const head = await rawHead(
      httpPort,
      `GET http://127.0.0.1:${target.port}/hello HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${basic('alice', 'alice-pass')}\r\n\r\n`,
    );
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('proxy-status'), undefined);
  });
});

describe('strict and soft sticky sessions', () => {
  let ups: Child[];
  let target: Awaited<ReturnType<typeof startTarget>>;
  let http: HttpListener;
  let socks: Socks5Listener;
  let sessions: MapSessions;
  let pool: FixedPool;

  before(async () => {
    ups = [await startMicrosocks('u1', 'p1'), await startMicrosocks('u2', 'p2')];
    target = await startTarget();
    pool = new FixedPool(ups.map((u, i) => node('socks5', u.port, `u${i + 1}`, `p${i + 1}`)));
    sessions = new MapSessions();
    const router = new Router({
      users: new Users([user('alice', 'alice-pass')]),
      meters: new UnlimitedMeters(),
      pools: new FixedPools(pool),
      sessions,
      retries: 2,
      connectTimeoutMs: 1000,
      handshakeTimeoutMs: 1000,
      hedgeAfterMs: 5000,
      dialDeadlineMs: 4000,
    });
    http = new HttpListener({ router, port: 0 });
    await http.listen();
    socks = new Socks5Listener({ router, port: 0 });
    await socks.listen();
  });
  after(async () => {
    await http.close();
    await socks.close();
    for (const u of ups) await u.stop();
    await target.close();
  });

  test('the user-name grammar: -strict-1 needs a session; -strict-0 is soft; other values refused', () => {
    const strict = parseUsername('alice-session-s1-strict-1');
    assert.ok(strict.ok && strict.options.strict === true && strict.options.sessionId === 's1');
    const soft = parseUsername('alice-session-s1-strict-0');
    assert.ok(soft.ok && soft.options.strict === undefined);
    const alone = parseUsername('alice-strict-1');
    assert.ok(!alone.ok && /needs a sticky session/.test(alone.reason));
    const bad = parseUsername('alice-session-s1-strict-2');
    assert.ok(!bad.ok && bad.code === 'BAD_VALUE');
  });

  test("a strict session's exit dies: 502 with Proxy-Status (HTTP) and reply 0x03 (SOCKS5), no move; a soft one moves", async () => {
    const strictAuth = basic('alice-session-st-strict-1', 'alice-pass');
    const ok = await rawHead(
      http.port,
      `CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${strictAuth}\r\n\r\n`,
    );
    assert.equal(ok.status, 200, ok.raw);
    const bound = sessions.map.get('alice/st');
    assert.ok(bound, 'the strict session is bound');
    const softAuth = basic('alice-session-so', 'alice-pass');
    // The soft session is bound to the same exit, then that exit dies.
    sessions.bind('alice', 'so', bound);
    const dying = ups.find((u) => bound.port === u.port)!;
    await dying.stop();

    const failed = await rawHead(
      http.port,
      `CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${strictAuth}\r\n\r\n`,
    );
    expectStatus(failed, 502, 'destination_unavailable');
    assert.match(failed.raw, /strict session/);
    assert.equal(sessions.map.get('alice/st'), bound, 'the strict session keeps its exit');
    // Once its exit is known failed, the next connection is refused without a dial (SOCKS5 as well).
    assert.equal(await socksConnect(socks.port, 'alice-session-st-strict-1', 'alice-pass', '127.0.0.1', target.port), 0x03);
    assert.equal(sessions.map.get('alice/st'), bound);

    // A soft session on the same dead exit moves to the other one and succeeds.
    const moved = await rawHead(
      http.port,
      `CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${softAuth}\r\n\r\n`,
    );
    assert.equal(moved.status, 200, moved.raw);
    const now = sessions.map.get('alice/so');
    assert.ok(now && now.id !== bound.id, 'the soft session moved to another exit');
  });
});
