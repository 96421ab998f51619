// The SOCKS5 server handshake over real loopback sockets, with every malformed input we could think of.
import assert from 'node:assert/strict';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import {
  REPLY,
  Socks5HandshakeError,
  acceptSocks5,
  replyBuffer,
  writeReply,
  type ConnectRequest,
  type HandshakeOptions,
} from '../../src/wire/socks5.ts';

type Outcome = { ok: true; request: ConnectRequest<string>; socket: Socket } | { ok: false; code: string; ms: number };

let options: HandshakeOptions<string>;
/** The next connection's outcome: settled with what the handshake gave, or failed with what it threw. */
const outcomes: Array<{ settle: (o: Outcome) => void; fail: (err: unknown) => void }> = [];
let seenUsers: string[] = [];

const defaults = (): HandshakeOptions<string> => ({
  timeoutMs: 1000,
  auth: 'password',
  authenticate: (u, p) => {
    seenUsers.push(u);
    return u === 'user' && p === 'pass' ? { ok: true, context: `ctx:${u}` } : { ok: false };
  },
});

let server: Server;
let port: number;

before(async () => {
  server = createServer({ allowHalfOpen: true }, (socket) => {
    const started = Date.now();
    const next = outcomes.shift();
    acceptSocks5(socket, options).then(
      (request) => next?.settle({ ok: true, request, socket }),
      (err: unknown) => {
        // Not an assertion here: one thrown in this callback would escape the test and leave it waiting.
        if (err instanceof Socks5HandshakeError) next?.settle({ ok: false, code: err.code, ms: Date.now() - started });
        else next?.fail(new Error(`the handshake failed with something other than a Socks5HandshakeError: ${String(err)}`, { cause: err }));
      },
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
after(() => new Promise<void>((r) => server.close(() => r())));

interface Run {
  outcome: Outcome;
  /** everything the server sent before closing (or until 20 ms after a successful outcome) */
  received: Buffer;
  closed: boolean;
}

/**
 * Connects, writes each part (a pause between parts), optionally ends or closes, and collects the server's
 * bytes and the handshake's outcome.
 */
async function run(parts: Buffer[], how: 'keep' | 'end' | 'destroy' = 'keep', gapMs = 5): Promise<Run> {
  const outcome = new Promise<Outcome>((settle, fail) => outcomes.push({ settle, fail }));
  const client = connect({ host: '127.0.0.1', port });
  const received: Buffer[] = [];
  let closed = false;
  client.on('data', (c: Buffer) => received.push(c));
  client.on('error', () => {});
  // The server's FIN is what "closed" means here (it ends the socket after its last answer).
  const closedP = new Promise<void>((r) => {
    client.once('end', () => ((closed = true), r()));
    client.once('close', () => ((closed = true), r()));
  });
  await new Promise<void>((r) => client.once('connect', () => r()));
  for (const p of parts) {
    client.write(p);
    await new Promise((r) => setTimeout(r, gapMs));
  }
  if (how === 'end') client.end();
  if (how === 'destroy') client.destroy();
  const o = await outcome;
  if (!o.ok) {
    // A failed handshake always ends or destroys the socket (src/wire/socks5.ts): wait for that close; the
    // bound only turns a server that never closes into a clear failure instead of the test's timeout.
    let bound: NodeJS.Timeout | undefined;
    await Promise.race([
      closedP,
      new Promise((_, fail) => (bound = setTimeout(() => fail(new Error('the server did not close a failed handshake within 5 s')), 5000))),
    ]).finally(() => clearTimeout(bound));
  } else {
    await new Promise((r) => setTimeout(r, 20));
  }
  client.destroy();
  if (o.ok) o.socket.destroy();
  return { outcome: o, received: Buffer.concat(received), closed };
}

const GREETING = Buffer.from([5, 1, 2]);
const auth = (u: string, p: string): Buffer =>
  Buffer.concat([Buffer.from([1, Buffer.byteLength(u)]), Buffer.from(u), Buffer.from([Buffer.byteLength(p)]), Buffer.from(p)]);
const AUTH = auth('user', 'pass');
const reqIPv4 = (a: number[], p: number, cmd = 1): Buffer => Buffer.from([5, cmd, 0, 1, ...a, p >> 8, p & 0xff]);
const reqDomain = (d: string, p: number): Buffer =>
  Buffer.concat([Buffer.from([5, 1, 0, 3, Buffer.byteLength(d, 'latin1')]), Buffer.from(d, 'latin1'), Buffer.from([p >> 8, p & 0xff])]);

function failed(r: Run, code: string): void {
  assert.equal(r.outcome.ok, false, 'handshake should fail');
  assert.equal(r.outcome.ok ? '' : r.outcome.code, code);
}

describe('SOCKS5 server handshake', () => {
  test('IPv4 CONNECT with user/password', async () => {
    options = defaults();
    const r = await run([GREETING, AUTH, reqIPv4([10, 1, 2, 3], 8080)]);
    assert.ok(r.outcome.ok);
    assert.equal(r.outcome.request.host, '10.1.2.3');
    assert.equal(r.outcome.request.port, 8080);
    assert.equal(r.outcome.request.addressType, 1);
    assert.equal(r.outcome.request.username, 'user');
    assert.equal(r.outcome.request.context, 'ctx:user');
    assert.equal(r.outcome.request.head, null);
    assert.deepEqual([...r.received], [5, 2, 1, 0]);
  });

  test('IPv6 CONNECT', async () => {
    options = defaults();
    const addr = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    const r = await run([GREETING, AUTH, Buffer.from([5, 1, 0, 4, ...addr, 0x01, 0xbb])]);
    assert.ok(r.outcome.ok);
    assert.equal(r.outcome.request.host, '2001:db8:0:0:0:0:0:1');
    assert.equal(r.outcome.request.port, 443);
    assert.equal(r.outcome.request.addressType, 4);
  });

  test('domain CONNECT, everything in one write (pipelined), payload behind the request kept as head', async () => {
    options = defaults();
    const r = await run([Buffer.concat([GREETING, AUTH, reqDomain('example.com', 80), Buffer.from('GET / HTTP/1.1\r\n')])]);
    assert.ok(r.outcome.ok);
    assert.equal(r.outcome.request.host, 'example.com');
    assert.equal(r.outcome.request.addressType, 3);
    assert.equal(r.outcome.request.head?.toString(), 'GET / HTTP/1.1\r\n');
    assert.deepEqual([...r.received], [5, 2, 1, 0]);
  });

  test('pipelined request while an asynchronous authentication is pending', async () => {
    options = {
      ...defaults(),
      authenticate: (u, p) =>
        new Promise((resolve) =>
          setTimeout(() => resolve(u === 'user' && p === 'pass' ? { ok: true, context: 'late' } : { ok: false }), 30),
        ),
    };
    const r = await run([Buffer.concat([GREETING, AUTH, reqIPv4([127, 0, 0, 1], 22), Buffer.from('x')])]);
    assert.ok(r.outcome.ok);
    assert.equal(r.outcome.request.context, 'late');
    assert.equal(r.outcome.request.head?.toString(), 'x');
    // The auth reply comes before anything about the request.
    assert.deepEqual([...r.received], [5, 2, 1, 0]);
  });

  test('pipelined request after a refused authentication is never resolved', async () => {
    options = defaults();
    const r = await run([Buffer.concat([GREETING, auth('user', 'wrong'), reqIPv4([127, 0, 0, 1], 22)])]);
    failed(r, 'AUTH_FAILED');
    assert.deepEqual([...r.received], [5, 2, 1, 1]);
    assert.ok(r.closed);
  });

  test('wrong SOCKS version (SOCKS4 greeting) closes without an answer', async () => {
    options = defaults();
    const r = await run([Buffer.from([4, 1, 0, 80, 127, 0, 0, 1, 0])]);
    failed(r, 'BAD_VERSION');
    assert.equal(r.received.length, 0);
    assert.ok(r.closed);
  });

  test('garbage (an HTTP request) is refused', async () => {
    options = defaults();
    const r = await run([Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n')]);
    failed(r, 'BAD_VERSION');
    assert.ok(r.closed);
  });

  test('no methods offered -> 0xFF', async () => {
    options = defaults();
    const r = await run([Buffer.from([5, 0])]);
    failed(r, 'NO_ACCEPTABLE_METHOD');
    assert.deepEqual([...r.received], [5, 0xff]);
    assert.ok(r.closed);
  });

  test('only "no authentication" offered to a password port -> 0xFF', async () => {
    options = defaults();
    const r = await run([Buffer.from([5, 2, 0, 1])]);
    failed(r, 'NO_ACCEPTABLE_METHOD');
    assert.deepEqual([...r.received], [5, 0xff]);
  });

  test('several methods offered, password among them -> 0x02', async () => {
    options = defaults();
    const r = await run([Buffer.from([5, 3, 0, 1, 2]), AUTH, reqIPv4([1, 1, 1, 1], 53)]);
    assert.ok(r.outcome.ok);
    assert.deepEqual([...r.received], [5, 2, 1, 0]);
  });

  test("auth 'none' port: no-auth accepted, no RFC 1929 step", async () => {
    options = { timeoutMs: 1000, auth: 'none' };
    const r = await run([Buffer.from([5, 1, 0]), reqIPv4([1, 2, 3, 4], 80)]);
    assert.ok(r.outcome.ok);
    assert.equal(r.outcome.request.context, undefined);
    assert.deepEqual([...r.received], [5, 0]);
  });

  test('bad auth sub-negotiation version -> status 0x01', async () => {
    options = defaults();
    const r = await run([GREETING, Buffer.from([5, 4, 117, 115, 101, 114, 4, 112, 97, 115, 115])]);
    failed(r, 'BAD_AUTH_VERSION');
    assert.deepEqual([...r.received], [5, 2, 1, 1]);
  });

  test('empty user name and empty password are refused', async () => {
    options = defaults();
    seenUsers = [];
    const r = await run([GREETING, Buffer.from([1, 0, 0])]);
    failed(r, 'AUTH_FAILED');
    assert.deepEqual([...r.received], [5, 2, 1, 1]);
    assert.deepEqual(seenUsers, ['']);
  });

  test('255-byte user name and password reach the authenticator intact', async () => {
    const long = 'u'.repeat(255);
    const pass = 'p'.repeat(255);
    options = { ...defaults(), authenticate: (u, p) => (u === long && p === pass ? { ok: true, context: 'long' } : { ok: false }) };
    const r = await run([GREETING, auth(long, pass), reqIPv4([1, 2, 3, 4], 80)]);
    assert.ok(r.outcome.ok);
    assert.equal(r.outcome.request.username, long);
  });

  test('an authenticator that throws or rejects refuses instead of crashing', async () => {
    options = {
      ...defaults(),
      authenticate: () => {
        throw new Error('boom');
      },
    };
    failed(await run([GREETING, AUTH]), 'AUTH_FAILED');
    options = { ...defaults(), authenticate: () => Promise.reject(new Error('boom')) };
    const r = await run([GREETING, AUTH]);
    failed(r, 'AUTH_FAILED');
    assert.deepEqual([...r.received], [5, 2, 1, 1]);
  });

  test('unsupported commands (BIND, UDP ASSOCIATE) -> 0x07', async () => {
    for (const cmd of [2, 3, 9]) {
      options = defaults();
      const r = await run([GREETING, AUTH, reqIPv4([1, 2, 3, 4], 80, cmd)]);
      failed(r, 'BAD_COMMAND');
      assert.deepEqual([...r.received.subarray(4)], [...replyBuffer(REPLY.commandNotSupported)]);
    }
  });

  test('unsupported address type -> 0x08', async () => {
    options = defaults();
    const r = await run([GREETING, AUTH, Buffer.from([5, 1, 0, 5, 1, 2, 3, 4, 0, 80])]);
    failed(r, 'BAD_ADDRESS');
    assert.equal(r.received[5], REPLY.addressTypeNotSupported);
  });

  test('empty and malformed domain names', async () => {
    options = defaults();
    const r = await run([GREETING, AUTH, Buffer.from([5, 1, 0, 3, 0, 0, 80])]);
    failed(r, 'BAD_ADDRESS');
    assert.equal(r.received[5], REPLY.addressTypeNotSupported);
    for (const bad of ['exa mple.com', 'a\u0000b', 'host/x', '\u00ff.com']) {
      options = defaults();
      const b = await run([GREETING, AUTH, reqDomain(bad, 80)]);
      failed(b, 'BAD_ADDRESS');
      assert.equal(b.received[5], REPLY.generalFailure, bad);
    }
  });

  test('port 0 is refused', async () => {
    options = defaults();
    const r = await run([GREETING, AUTH, reqIPv4([1, 2, 3, 4], 0)]);
    failed(r, 'BAD_ADDRESS');
    assert.equal(r.received[5], REPLY.generalFailure);
  });

  test('wrong version in the request', async () => {
    options = defaults();
    const r = await run([GREETING, AUTH, Buffer.from([4, 1, 0, 1, 1, 2, 3, 4, 0, 80])]);
    failed(r, 'BAD_VERSION');
  });

  test('truncated at every byte, then closed: CLOSED every time, never a hang', async () => {
    const full = Buffer.concat([GREETING, AUTH, reqDomain('example.com', 443)]);
    for (let i = 0; i < full.length; i++) {
      options = defaults();
      const r = await run(i === 0 ? [] : [full.subarray(0, i)], 'destroy', 0);
      // CLOSED, not TIMEOUT: the close ended it, not the 1 s deadline (no wall-clock bound, which a loaded
      // machine can stretch).
      failed(r, 'CLOSED');
    }
  });

  test('truncated, then half-closed (FIN only): CLOSED at once, not at the timeout', async () => {
    options = defaults();
    const r = await run([Buffer.concat([GREETING, AUTH]).subarray(0, 5)], 'end');
    failed(r, 'CLOSED');
  });

  test('a stalled client times out', async () => {
    options = { ...defaults(), timeoutMs: 150 };
    const r = await run([GREETING]);
    failed(r, 'TIMEOUT');
    // Not before its 150 ms; the upper bound only says it ended by a deadline rather than hung (a loaded machine's
    // timers can run late).
    assert.ok(!r.outcome.ok && r.outcome.ms >= 140 && r.outcome.ms < 5000, `timed out after ${r.outcome.ok ? '-' : r.outcome.ms} ms`);
    assert.ok(r.closed);
  });

  test('a silent client (connects, sends nothing) times out', async () => {
    options = { ...defaults(), timeoutMs: 100 };
    const r = await run([]);
    failed(r, 'TIMEOUT');
  });

  test('a flood while authentication is pending is cut off', async () => {
    options = { ...defaults(), authenticate: () => new Promise(() => {}) };
    const r = await run([Buffer.concat([GREETING, AUTH]), Buffer.alloc(20_000, 1)]);
    failed(r, 'TOO_LARGE');
  });

  test('the outcome settles once even if the client resets after success', async () => {
    options = defaults();
    const r = await run([GREETING, AUTH, reqIPv4([1, 2, 3, 4], 80)], 'destroy');
    assert.ok(r.outcome.ok);
  });
});

describe('SOCKS5 replies', () => {
  test('replyBuffer encodes IPv4, IPv6 and the zero address', () => {
    assert.deepEqual([...replyBuffer(REPLY.succeeded)], [5, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    assert.deepEqual([...replyBuffer(REPLY.connectionRefused, { host: '10.0.0.2', port: 1080 })], [5, 5, 0, 1, 10, 0, 0, 2, 4, 56]);
    const v6 = replyBuffer(REPLY.succeeded, { host: '::1', port: 443 });
    assert.equal(v6.length, 22);
    assert.equal(v6[3], 4);
    assert.equal(v6[19], 1);
    assert.equal(v6.readUInt16BE(20), 443);
    const full = replyBuffer(REPLY.succeeded, { host: '2001:db8::ff00:42', port: 1 });
    assert.equal(full.readUInt16BE(4), 0x2001);
    assert.equal(full.readUInt16BE(18), 0x42);
    // An IPv6 exit with an IPv4 tail is reported with the tail's four bytes (the reply had its own copy of the
    // IPv6 encoding, without the tail: 1.2.3.4 became one group of value 1).
    const mapped = replyBuffer(REPLY.succeeded, { host: '::ffff:1.2.3.4', port: 80 });
    assert.deepEqual([...mapped.subarray(4, 20)], [...Array<number>(10).fill(0), 0xff, 0xff, 1, 2, 3, 4]);
  });

  test('writeReply with a failure code answers and closes', async () => {
    const srv = createServer((s) => writeReply(s, REPLY.notAllowed));
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const c = connect({ host: '127.0.0.1', port: (srv.address() as AddressInfo).port });
    const got: Buffer[] = [];
    c.on('data', (d: Buffer) => got.push(d));
    await new Promise((r) => c.once('close', r));
    assert.deepEqual([...Buffer.concat(got)], [5, 2, 0, 1, 0, 0, 0, 0, 0, 0]);
    await new Promise<void>((r) => srv.close(() => r()));
  });
});
