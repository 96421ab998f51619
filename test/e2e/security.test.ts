// Issue 13 against the real daemon on the sandbox: hostile input on the proxy ports. Each test here was red
// before its fix: a malformed target cooled the user's nodes (one CONNECT to a 300-character host, one
// request to port 0), 502 bodies named the upstream's host:port, and the 407 reason told a known user from
// an unknown one.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { curl, nodeHttpGet, startGateway, startTarget, viaConnect, viaHttp, type Gateway, type Target } from './harness.ts';

const ALICE = 'alice';
const ALICE_PASS = 'alice-pass';

interface PoolView {
  id: string;
  ready: number;
  cooling: number;
  nodes: { port: number; state: string }[];
}

/**
 * One raw request on a fresh connection; resolves with the status line's code and the body: at the close for
 * a refusal (the listener ends the connection after it), at the end of the head for a 2xx (an open tunnel
 * stays open until the target gives up on it, a minute later).
 */
function raw(port: number, text: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port });
    const parts: Buffer[] = [];
    const answer = () => {
      const t = Buffer.concat(parts).toString('latin1');
      const at = t.indexOf('\r\n\r\n');
      return { status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(t)?.[1] ?? 0), body: at >= 0 ? t.slice(at + 4) : '', head: at >= 0 };
    };
    s.on('data', (d: Buffer) => {
      parts.push(d);
      const a = answer();
      if (a.head && a.status >= 200 && a.status < 300) {
        s.destroy();
        resolve({ status: a.status, body: a.body });
      }
    });
    s.on('error', reject);
    s.on('close', () => {
      const a = answer();
      resolve({ status: a.status, body: a.body });
    });
    s.write(text);
  });
}

const basic = (user: string, pass: string) => `Proxy-Authorization: Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}\r\n`;

/**
 * A SOCKS5 CONNECT through the listener, written by hand (Rotor's own client refuses to encode port 0);
 * resolves with the reply code of the CONNECT, or 'auth' when RFC 1929 failed.
 */
function socksConnect(port: number, user: string, pass: string, host: string, targetPort: number): Promise<number | string> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port });
    const parts: Buffer[] = [];
    const done = (v: number | string) => {
      s.destroy();
      resolve(v);
    };
    s.on('error', () => done('error'));
    s.on('close', () => done('closed'));
    s.on('data', (d: Buffer) => {
      parts.push(d);
      const b = Buffer.concat(parts);
      if (b.length >= 4 && b[3] !== 0) done('auth');
      else if (b.length >= 6) done(b[5]!);
    });
    const u = Buffer.from(user);
    const p = Buffer.from(pass);
    const h = Buffer.from(host);
    s.write(
      Buffer.concat([
        Buffer.from([5, 1, 2]),
        Buffer.from([1, u.length]),
        u,
        Buffer.from([p.length]),
        p,
        Buffer.from([5, 1, 0, 3, h.length]),
        h,
        Buffer.from([targetPort >> 8, targetPort & 0xff]),
      ]),
    );
  });
}

describe('proxy ports against hostile input', () => {
  let gw: Gateway;
  let target: Target;
  before(async () => {
    [gw, target] = await Promise.all([startGateway({ config: { proxy: { connectTimeoutMs: 1500, retries: 3 } } }), startTarget()]);
  });
  after(async () => {
    await gw?.close();
    await target?.close();
  });

  const alicePool = async () =>
    (await gw.admin<PoolView[]>('/v1/pools')).body.find((p) => p.id.startsWith(`${ALICE}/`) && p.id.endsWith('/'));

  test('malformed targets are 400 / SOCKS5 0x01 before any dial: no node cools, the next request works', async () => {
    const warm = await curl([...viaHttp(gw.ports.http, ALICE, ALICE_PASS), target.url('/warm')]);
    assert.equal(warm.status, 200, warm.stderr);
    const failuresBefore = await gw.metric('rotor_upstream_failures_total');
    const long = `${'a'.repeat(60)}.`.repeat(5) + 'com'; // 308 characters
    const cases = [
      `CONNECT ${long}:443 HTTP/1.1\r\nHost: ${long}:443\r\n${basic(ALICE, ALICE_PASS)}\r\n`,
      `CONNECT ${'b'.repeat(64)}.example:443 HTTP/1.1\r\nHost: x\r\n${basic(ALICE, ALICE_PASS)}\r\n`,
      `CONNECT bad_-.-host:443 HTTP/1.1\r\nHost: x\r\n${basic(ALICE, ALICE_PASS)}\r\n`,
      `GET http://127.0.0.1:0/ HTTP/1.1\r\nHost: 127.0.0.1:0\r\n${basic(ALICE, ALICE_PASS)}Connection: close\r\n\r\n`,
      `GET http://${long}/ HTTP/1.1\r\nHost: ${long}\r\n${basic(ALICE, ALICE_PASS)}Connection: close\r\n\r\n`,
    ];
    for (const c of cases) {
      const r = await raw(gw.ports.http, c);
      assert.equal(r.status, 400, `${c.slice(0, 60)}: ${r.status} ${r.body}`);
    }
    for (const [host, port] of [
      [`${'c'.repeat(64)}.example`, 443],
      ['ok.example', 0],
      ['a..b', 80],
      ['-x.example', 80],
      ['999.1.1.1', 80],
    ] as const) {
      assert.equal(await socksConnect(gw.ports.socks5, ALICE, ALICE_PASS, host, port), 0x01, `${host}:${port}`);
    }
    assert.equal(await gw.metric('rotor_upstream_failures_total'), failuresBefore, 'no upstream was charged');
    const pool = await alicePool();
    assert.ok(pool && pool.cooling === 0, JSON.stringify(pool));
    const next = await nodeHttpGet(gw.ports.http, ALICE, ALICE_PASS, target.url('/after'));
    assert.equal(next.status, 200);
    // Well-formed targets still pass: an IPv6 literal in CONNECT and a name with '_'.
    assert.equal(await socksConnect(gw.ports.socks5, ALICE, ALICE_PASS, '127.0.0.1', target.port), 0);
  });

  test('one 407 reason for every authentication failure (no user enumeration)', async () => {
    const bodies = new Set<string>();
    for (const [user, pass] of [
      ['nobody', 'x'],
      [ALICE, 'wrong'],
      [`${ALICE}-colour-red`, 'wrong'],
      [`${ALICE}-sesstime-0`, 'wrong'],
      [`${ALICE}-session-a-session-b`, 'wrong'],
      ['nobody-colour-red', 'x'],
      [`${ALICE}-session-`, 'wrong'],
    ]) {
      const r = await raw(gw.ports.http, `CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nHost: x\r\n${basic(user!, pass!)}\r\n`);
      assert.equal(r.status, 407, user);
      bodies.add(r.body);
      const plain = await curl([...viaHttp(gw.ports.http, user!, pass!), target.url('/x')]);
      assert.equal(plain.status, 407, user);
      bodies.add(plain.body);
    }
    assert.equal(bodies.size, 1, [...bodies].join(' | '));
    // With the right password the precise reason is shown: the client has proved who it is.
    const typo = await raw(
      gw.ports.http,
      `CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nHost: x\r\n${basic(`${ALICE}-colour-red`, ALICE_PASS)}\r\n`,
    );
    assert.equal(typo.status, 407);
    assert.match(typo.body, /colour/);
  });

  test('session ids are bounded: 64 characters pass, 65 and a 3,000-character id are refused', async () => {
    const ok = await curl([...viaConnect(gw.ports.http, `${ALICE}-session-${'s'.repeat(64)}`, ALICE_PASS), target.url('/s')]);
    assert.equal(ok.status, 200, ok.stderr);
    for (const id of ['s'.repeat(65), 'x'.repeat(3000)]) {
      const r = await raw(
        gw.ports.http,
        `CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nHost: x\r\n${basic(`${ALICE}-session-${id}`, ALICE_PASS)}\r\n`,
      );
      assert.equal(r.status, 407, `${id.length}`);
      // 65: the option's own reason (the password is right); 3,000: a name longer than any user's, refused unread.
      assert.match(r.body, id.length === 65 ? /session/ : /wrong user name or password/);
    }
    const sessions = (await gw.admin<{ sessionId: string }[]>('/v1/sessions')).body;
    assert.ok(sessions.length > 0 && sessions.every((s) => s.sessionId.length <= 64), 'no overlong id kept');
  });

  test('-region- codes outside the platform dictionaries are 403 before any pool or draw: 300 names, no new pool', async () => {
    const poolsBefore = (await gw.admin<PoolView[]>('/v1/pools')).body.length;
    const drawsBefore = await gw.metric('rotor_draws_total');
    for (let i = 0; i < 300; i++) {
      const r = await raw(
        gw.ports.http,
        `CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nHost: x\r\n${basic(`${ALICE}-region-ZZ${i}`, ALICE_PASS)}\r\n`,
      );
      assert.equal(r.status, 403, `${r.status} ${r.body}`);
      assert.match(r.body, /unknown region/);
    }
    assert.equal(await socksConnect(gw.ports.socks5, `${ALICE}-region-ZZ1`, ALICE_PASS, '127.0.0.1', target.port), 0x02);
    assert.equal((await gw.admin<PoolView[]>('/v1/pools')).body.length, poolsBefore, 'no pool per forged region');
    assert.equal(await gw.metric('rotor_draws_total'), drawsBefore, 'no draw for a forged region');
    // A code of the dictionaries passes.
    const areas = (await gw.admin<{ code: string }[]>('/v1/areas')).body;
    assert.ok(areas.length > 0);
    const known = await raw(
      gw.ports.http,
      `CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nHost: x\r\n${basic(`${ALICE}-region-${areas[0]!.code}`, ALICE_PASS)}\r\n`,
    );
    assert.notEqual(known.status, 403, known.body);
  });

  test('502 answers say what failed, never the upstream address or its credentials', async () => {
    const upstreams = gw.daemon.sim!.upstreams!;
    for (const p of gw.gatewayPorts) upstreams.setFault(p, { mode: 'refuse' });
    try {
      const r = await raw(gw.ports.http, `CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nHost: x\r\n${basic(ALICE, ALICE_PASS)}\r\n`);
      assert.ok(r.status === 502 || r.status === 503 || r.status === 504, `${r.status} ${r.body}`);
      for (const p of gw.gatewayPorts) assert.ok(!r.body.includes(`:${p}`), r.body);
      assert.doesNotMatch(r.body, /127\.0\.0\.1:\d+|@/);
      const plain = await nodeHttpGet(gw.ports.http, ALICE, ALICE_PASS, target.url('/p'));
      assert.ok(plain.status >= 502, String(plain.status));
      assert.doesNotMatch(plain.body, /127\.0\.0\.1:\d+|@/);
    } finally {
      for (const p of gw.gatewayPorts) upstreams.setFault(p, null);
    }
  });
});
