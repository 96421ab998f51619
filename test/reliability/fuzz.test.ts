// Bad input against a running daemon (issue 9, item 1): 10,000 seeded malformed or random inputs each to the
// SOCKS5 listener, the HTTP listener, the admin API and the callback route, over real loopback sockets.
// Expected: no crash, no unhandled rejection, a correct refusal or a close within the handshake timeout, and
// descriptors and active-connection gauges back to their baseline afterwards.
// Reproduce a failure: FUZZ_SEED=<seed printed> FUZZ_ONLY=<case> node scripts/run-tests.mjs reliability/fuzz
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer as createHttpServer, Agent, request as httpRequest, type Server } from 'node:http';
import { createServer } from 'node:net';
import { activeConnections, eventually, openFds, seeded, startEcho, startTestDaemon, USERS, type TestDaemon } from './daemon.ts';
import { batch, exchange, split } from './fuzz-io.ts';
import { poll } from '../support/wait.ts';
import { bytes, httpCase, int, pick, socks5Case, username, validConnect } from './generators.ts';

const SEED = Number(process.env.FUZZ_SEED ?? 0x5eed_2024);
const ONLY = process.env.FUZZ_ONLY === undefined ? undefined : Number(process.env.FUZZ_ONLY);
// 10,000 per listener on SQLite; the Redis pass (scripts/run-tests.mjs) sends a fifth of them (the same
// seeded generators, so every kind of input), as only the admin and callback routes reach the store at all.
const CASES = Number(process.env.FUZZ_CASES ?? (process.env.ROTOR_TEST_STORE === 'redis' ? 2_000 : 10_000));
const HANDSHAKE_MS = 500;
/**
 * A close must come within the handshake timeout plus this much scheduling slack on a loaded machine (the
 * daemon, 96 clients at a time and the checks share one event loop; with a second suite and stress-ng beside it
 * on a slow 2-core machine, an unfinished head was closed later than 3 s once). A connection never closed still
 * fails; only the bound on a stalled loop is wider.
 */
const SLACK_MS = 6_000;
const WIDTH = 96;
const ADMIN_TOKEN = 'fuzz-admin-token';
const creds = { user: USERS[0].name, pass: USERS[0].password };

const rejections: unknown[] = [];
const onRejection = (reason: unknown): void => {
  rejections.push(reason);
};

function caseRange(): { count: number; index: (i: number) => number } {
  return ONLY === undefined ? { count: CASES, index: (i) => i } : { count: 1, index: () => ONLY };
}

const failureText = (what: string, failures: Array<{ i: number; why: string; input?: string }>): string =>
  `${failures.length} ${what} case(s) failed (FUZZ_SEED=${SEED}); first: ` +
  failures
    .slice(0, 5)
    .map((f) => `#${f.i} ${f.why}${f.input ? ` input=${f.input}` : ''}`)
    .join(' | ');

// The file's timeout is a safety net: its admin part alone took 65 s once in a loaded suite (load 10-14).
describe('fuzz: malformed and random input to every listener', { timeout: 360_000 }, () => {
  let d: TestDaemon;
  let echo: Awaited<ReturnType<typeof startEcho>>;
  let target: Server;
  let targetPort = 0;
  let closedPort = 0;
  let fdBaseline = 0;

  before(async () => {
    process.on('unhandledRejection', onRejection);
    echo = await startEcho();
    target = createHttpServer((req, res) => {
      req.resume();
      res.end('ok');
    });
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
    targetPort = (target.address() as { port: number }).port;
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    closedPort = (probe.address() as { port: number }).port;
    await new Promise<void>((r) => probe.close(() => r()));
    // No warm upstream connections: they are held on purpose while tunnels keep coming (src/proxy/warm.ts, its own
    // tests show the set shrinking to zero), and the descriptor check below looks for leaks, not for them.
    d = await startTestDaemon(
      { proxy: { handshakeTimeoutMs: HANDSHAKE_MS }, pool: { warm: { perNode: 0 } }, admin: { token: ADMIN_TOKEN } },
      { sim: { orderDelayMs: 50 } },
    );
    // Warm the pool so the baseline includes the upstream nodes' own sockets and timers.
    const warm = await exchange({
      port: d.daemon.ports.socks5,
      chunks: [validConnect(creds, echo.port)],
      end: true,
      deadlineMs: 3000,
    });
    void warm;
    await settle();
    fdBaseline = openFds();
  });

  after(async () => {
    process.off('unhandledRejection', onRejection);
    await d?.close();
    await echo?.close();
    await new Promise<void>((r) => (target ? target.close(() => r()) : r()));
  });

  /**
   * Until the warm-up tunnel has ended on the daemon's side (its active gauges at 0) and its sockets are
   * released (the descriptor count reads the same twice in a row), so the baseline holds no closing socket.
   */
  const settle = async (): Promise<void> => {
    await poll(
      async () => {
        const a = await activeConnections(d.daemon);
        return (a.http ?? 0) === 0 && (a.socks5 ?? 0) === 0;
      },
      { what: 'the warm-up tunnel to end', timeoutMs: 10_000 },
    );
    let last = -1;
    await poll(
      () => {
        const now = openFds();
        const same = now === last;
        last = now;
        return same;
      },
      { what: 'a steady descriptor count', timeoutMs: 10_000, everyMs: 20 },
    );
  };

  test(`SOCKS5 listener: ${CASES} inputs at every handshake stage`, async () => {
    const { count, index } = caseRange();
    let successes = 0;
    const failures = await batch(count, WIDTH, async (n) => {
      const i = index(n);
      const rnd = seeded(SEED + i);
      const c = socks5Case(rnd, creds, echo.port, closedPort);
      // A client that half-closes is treated as gone while its dial runs, so a success needs it to stay.
      const end = rnd() < 0.7 && !c.expectSuccess;
      const r = await exchange({
        port: d.daemon.ports.socks5,
        chunks: split(c.input, rnd),
        end,
        deadlineMs: HANDSHAKE_MS + SLACK_MS + (c.expectSuccess ? 5000 : 0),
        // A successful CONNECT reply is where the handshake is over; the client then leaves.
        // greeting reply, auth reply, then a CONNECT reply of any code: the handshake is over.
        enough: (b) => b.length >= 14 && b[0] === 5 && b[2] === 1 && b[3] === 0 && b[4] === 5,
      });
      const hex = c.input.subarray(0, 64).toString('hex');
      if (!r.closed) return { i, why: `not closed within ${HANDSHAKE_MS + SLACK_MS} ms`, input: hex };
      if (c.expectSilence && r.reply.length > 0)
        return { i, why: `answered a non-SOCKS5 greeting: ${r.reply.toString('hex')}`, input: hex };
      if (r.reply.length > 0 && r.reply[0] !== 5)
        return { i, why: `reply not SOCKS5: ${r.reply.subarray(0, 16).toString('hex')}`, input: hex };
      if (c.expectSuccess) {
        // greeting (05 02), auth (01 00), then the CONNECT reply 05 00 …
        if (!(r.reply.length >= 14 && r.reply[2] === 1 && r.reply[3] === 0 && r.reply[4] === 5 && r.reply[5] === 0)) {
          return { i, why: `valid CONNECT not granted: ${r.reply.toString('hex')}`, input: hex };
        }
        successes++;
      }
      return undefined;
    });
    assert.deepEqual(failures, [], failureText('SOCKS5', failures));
    if (ONLY === undefined) assert.ok(successes > CASES / 1000, `some complete requests must succeed (got ${successes})`);
  });

  test(`HTTP listener: ${CASES} inputs (request lines, headers, CONNECT targets, huge headers, pipelining)`, async () => {
    const { count, index } = caseRange();
    let answered = 0;
    const failures = await batch(count, WIDTH, async (n) => {
      const i = index(n);
      const rnd = seeded(SEED + i);
      const c = httpCase(rnd, creds, targetPort);
      const end = rnd() < 0.6;
      const r = await exchange({
        port: d.daemon.ports.http,
        chunks: split(c.input, rnd),
        end,
        deadlineMs: HANDSHAKE_MS + SLACK_MS,
        // One complete answer is a refusal or a grant; the client may leave then.
        enough: (b) => b.includes('\r\n\r\n'),
      });
      const input = JSON.stringify(c.input.subarray(0, 120).toString('latin1'));
      // A complete head that declares a body the client is still "uploading" is past the handshake: its
      // bounds are the idle and response timeouts, not this one (the client leaves at the deadline).
      const uploading = c.complete && !end && /content-length|transfer-encoding/i.test(c.input.toString('latin1'));
      if (!r.closed && !uploading) return { i, why: `neither answered nor closed within ${HANDSHAKE_MS + SLACK_MS} ms`, input };
      if (r.reply.length > 0) {
        if (!/^HTTP\/1\.[01] \d{3} /.test(r.reply.subarray(0, 16).toString('latin1'))) {
          return { i, why: `not an HTTP answer: ${JSON.stringify(r.reply.subarray(0, 40).toString('latin1'))}`, input };
        }
        const status = Number(r.reply.subarray(9, 12).toString());
        if (status >= 500 && status !== 502 && status !== 503 && status !== 504) return { i, why: `status ${status}`, input };
        answered++;
      }
      return undefined;
    });
    assert.deepEqual(failures, [], failureText('HTTP', failures));
    if (ONLY === undefined) assert.ok(answered > CASES / 4, `most complete heads are answered (got ${answered})`);
  });

  test(`admin API: ${CASES} random paths, methods, bodies and tokens`, async () => {
    const { count, index } = caseRange();
    const agent = new Agent({ keepAlive: true, maxSockets: 32 });
    const statuses = new Map<number, number>();
    try {
      const failures = await batch(count, 32, async (n) => {
        const i = index(n);
        const rnd = seeded(SEED + i);
        // One in twenty over a raw socket with bytes no HTTP client would send.
        if (rnd() < 0.05) return rawAdmin(rnd, i);
        const c = adminCase(rnd);
        const res = await send(agent, d.daemon.ports.admin, c).catch((err: Error) => ({ status: 0, body: err.message }));
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        const where = `${c.method} ${c.path} auth=${c.auth ?? '-'} body=${(c.body ?? '').slice(0, 60)}`;
        if (res.status === 0) return { i, why: `no answer (${res.body})`, input: where };
        if (res.status >= 500 && res.status !== 502 && res.status !== 503)
          return { i, why: `status ${res.status}: ${res.body.slice(0, 200)}`, input: where };
        if (res.status >= 400 && c.method !== 'HEAD') {
          let code: unknown;
          try {
            code = (JSON.parse(res.body) as { error?: { code?: unknown } }).error?.code;
          } catch {
            code = undefined;
          }
          if (typeof code !== 'string') return { i, why: `error without the error shape: ${res.body.slice(0, 120)}`, input: where };
        }
        // Auth schemes are case-insensitive (RFC 9110), so `bearer <token>` is the token too.
        const authorized = c.auth?.toLowerCase() === `bearer ${ADMIN_TOKEN}`;
        if (c.path.startsWith('/v1') && !authorized && res.status < 400) {
          return { i, why: `/v1 without the token answered ${res.status}`, input: where };
        }
        return undefined;
      });
      assert.deepEqual(failures, [], failureText('admin', failures));
      if (ONLY === undefined)
        assert.ok((statuses.get(401) ?? 0) > 0 && (statuses.get(200) ?? 0) > 0, `statuses: ${JSON.stringify([...statuses])}`);
    } finally {
      agent.destroy();
    }

    async function rawAdmin(rnd: () => number, i: number): Promise<{ i: number; why: string; input: string } | undefined> {
      const input =
        rnd() < 0.5
          ? bytes(rnd, int(rnd, 200))
          : Buffer.from(
              `${pick(rnd, ['GET', 'POST', 'BREW'])} /v1/${'%'.repeat(int(rnd, 5))}x HTTP/1.1\r\nAuthorization: Bearer ${ADMIN_TOKEN}\r\nContent-Length: 3\r\n\r\n{"a`,
              'latin1',
            );
      const r = await exchange({
        port: d.daemon.ports.admin,
        chunks: [input],
        end: true,
        deadlineMs: 10_000,
        enough: (b) => b.includes('\r\n\r\n'),
      });
      if (!r.closed) return { i, why: 'raw admin input neither answered nor closed', input: input.toString('hex').slice(0, 80) };
      const status = Number(r.reply.subarray(9, 12).toString());
      if (r.reply.length > 0 && status >= 500 && status !== 502 && status !== 503)
        return { i, why: `raw admin status ${status}`, input: input.toString('hex').slice(0, 80) };
      return undefined;
    }
  });

  test(`callback route: ${CASES} random queries, paths and methods`, async () => {
    const { count, index } = caseRange();
    const agent = new Agent({ keepAlive: true, maxSockets: 32 });
    let successes = 0;
    try {
      const failures = await batch(count, 32, async (n) => {
        const i = index(n);
        const rnd = seeded(SEED + i);
        const c = callbackCase(rnd);
        const res = await send(agent, d.daemon.ports.callback, c).catch((err: Error) => ({ status: 0, body: err.message }));
        const where = `${c.method} ${c.path}`;
        if (res.status === 0) return { i, why: `no answer (${res.body})`, input: where };
        let code: unknown;
        try {
          code = (JSON.parse(res.body) as { code?: unknown }).code;
        } catch {
          code = undefined;
        }
        if (c.method === 'HEAD') return res.status < 500 ? undefined : { i, why: `HEAD status ${res.status}`, input: where };
        if (res.status === 200) {
          if (code !== 'success') return { i, why: `200 without code success: ${res.body}`, input: where };
          successes++;
          return undefined;
        }
        if (res.status >= 500) return { i, why: `status ${res.status}: ${res.body}`, input: where };
        if (typeof code !== 'string' || code === 'success')
          return { i, why: `refusal ${res.status} with code ${String(code)}`, input: where };
        return undefined;
      });
      assert.deepEqual(failures, [], failureText('callback', failures));
      if (ONLY === undefined) assert.ok(successes > 0, 'well-formed callbacks are acknowledged');
    } finally {
      agent.destroy();
    }
  });

  test('afterwards: no unhandled rejection, descriptors and active-connection gauges back to baseline', async () => {
    assert.deepEqual(rejections.map(String), [], `unhandled rejections (FUZZ_SEED=${SEED})`);
    const gaugesZero = await eventually(async () => {
      const a = await activeConnections(d.daemon);
      return (a.http ?? 0) === 0 && (a.socks5 ?? 0) === 0;
    }, 5_000);
    assert.ok(gaugesZero, `rotor_proxy_connections_active back to 0: ${JSON.stringify(await activeConnections(d.daemon))}`);
    // Upstream nodes drawn meanwhile may hold a few keep-alive sockets of their own: allow a small margin.
    const fdsBack = await eventually(() => openFds() <= fdBaseline + 8, 10_000);
    assert.ok(fdsBack, `open descriptors back to baseline: ${openFds()} now, ${fdBaseline} before`);
    // And the daemon still serves.
    const ok = await exchange({
      port: d.daemon.ports.socks5,
      chunks: [validConnect(creds, echo.port)],
      end: false,
      deadlineMs: 5_000,
      enough: (b) => b.length >= 14,
    });
    assert.equal(ok.reply[5], 0, `a valid CONNECT still succeeds after the fuzz: ${ok.reply.toString('hex')}`);
  });
});

interface HttpCall {
  method: string;
  path: string;
  auth?: string;
  body?: string;
  contentType?: string;
}

function send(agent: Agent, port: number, c: HttpCall): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {};
    if (c.auth !== undefined) headers.authorization = c.auth;
    if (c.body !== undefined) {
      headers['content-type'] = c.contentType ?? 'application/json';
      // Node sends DELETE/OPTIONS bodies unframed unless told the length.
      headers['content-length'] = String(Buffer.byteLength(c.body));
    }
    const req = httpRequest({ host: '127.0.0.1', port, method: c.method, path: c.path, agent, headers }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (b: Buffer) => parts.push(b));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString('utf8') }));
      res.on('error', reject);
    });
    req.setTimeout(15_000, () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(c.body);
  });
}

const ADMIN_ROUTES = [
  'GET /healthz',
  'GET /readyz',
  'GET /metrics',
  'GET /docs/json',
  'GET /v1/app',
  'GET /v1/areas',
  'GET /v1/cities',
  'GET /v1/projects',
  'GET /v1/products',
  'GET /v1/products/:x',
  'GET /v1/products/:x/areas',
  'POST /v1/orders/open',
  'POST /v1/orders/renew',
  'POST /v1/orders/release',
  'POST /v1/orders/aftersale',
  'POST /v1/orders/assign-ip',
  'GET /v1/orders',
  'GET /v1/orders/:x',
  'GET /v1/instances',
  'GET /v1/instances/:x',
  'POST /v1/instances/:x/change',
  'POST /v1/instances/reset-password',
  'GET /v1/assign-ip/:x',
  'POST /v1/accounts',
  'POST /v1/accounts/:x/auth',
  'GET /v1/accounts/:x/balance',
  'GET /v1/accounts/:x/flow-log',
  'POST /v1/accounts/:x/return',
  'POST /v1/sub-accounts',
  'GET /v1/sub-accounts/:x',
  'PUT /v1/sub-accounts/:x/limit',
  'GET /v1/whitelist',
  'POST /v1/whitelist',
  'DELETE /v1/whitelist',
  'GET /v1/users',
  'GET /v1/pools',
  'GET /v1/sessions',
  'DELETE /v1/sessions/:x/:x',
  'POST /v1/platform/:x',
] as const;

const FIELDS = [
  'productNo',
  'count',
  'cycleTimes',
  'params',
  'instances',
  'instanceNo',
  'appUsername',
  'proxyType',
  'ip',
  'limitFlow',
  'name',
  'page',
  'pageSize',
  'appOrderNo',
  'flow',
];

function randomJson(rnd: () => number, depth = 0): unknown {
  switch (int(rnd, depth > 2 ? 5 : 8)) {
    case 0:
      return int(rnd, 3) === 0 ? -1 : int(rnd, 1e6);
    case 1:
      return pick(rnd, ['', 'x', 'DYN-104-FLOW', 'shop1', 'alice', '127.0.0.1', 'a'.repeat(300), '\u0000', '😀']);
    case 2:
      return pick(rnd, [true, false, null]);
    case 3:
      return rnd() * 1e12 - 5e11;
    case 4:
      return pick(rnd, [1e308, -0, 0.5, Number.MAX_SAFE_INTEGER + 2]);
    case 5:
      return Array.from({ length: int(rnd, 4) }, () => randomJson(rnd, depth + 1));
    default: {
      const o: Record<string, unknown> = {};
      const n = int(rnd, 5);
      for (let k = 0; k < n; k++) o[pick(rnd, FIELDS)] = randomJson(rnd, depth + 1);
      return o;
    }
  }
}

function segment(rnd: () => number): string {
  return pick(rnd, [
    'x',
    'alice',
    'shop1',
    'DYN-104-FLOW',
    'GetAppInfo',
    'DrawByPwd',
    'InstanceOpen',
    'nope',
    '127.0.0.1',
    '%20',
    '%ZZ',
    '..',
    'a'.repeat(300),
    '0',
    '-1',
    encodeURIComponent(bytes(rnd, 6).toString('latin1')),
  ]);
}

function adminCase(rnd: () => number): HttpCall {
  let method: string;
  let path: string;
  if (rnd() < 0.8) {
    const [m, p] = pick(rnd, ADMIN_ROUTES).split(' ') as [string, string];
    method = rnd() < 0.9 ? m : pick(rnd, ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD']);
    path = p.replace(/:x/g, () => segment(rnd));
  } else {
    method = pick(rnd, ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD']);
    path = '/' + Array.from({ length: int(rnd, 5) }, () => segment(rnd)).join('/');
  }
  if (rnd() < 0.3)
    path +=
      '?' +
      Array.from(
        { length: 1 + int(rnd, 3) },
        () => `${pick(rnd, [...FIELDS, 'startTime', 'account'])}=${encodeURIComponent(String(randomJson(rnd, 3)))}`,
      ).join('&');
  const auth = pick(rnd, [
    `Bearer ${ADMIN_TOKEN}`,
    `Bearer ${ADMIN_TOKEN}`,
    `Bearer ${ADMIN_TOKEN}`,
    undefined,
    'Bearer wrong',
    'Basic x',
    'Bearer ',
    `bearer ${ADMIN_TOKEN}`,
  ]);
  const call: HttpCall = { method, path, ...(auth !== undefined ? { auth } : {}) };
  if (method !== 'GET' && method !== 'HEAD' && method !== 'OPTIONS' && rnd() < 0.85) {
    const kind = int(rnd, 6);
    call.body = kind === 0 ? '{"broken' : kind === 1 ? bytes(rnd, 30).toString('latin1') : JSON.stringify(randomJson(rnd));
    if (kind === 1 || rnd() < 0.05)
      call.contentType = pick(rnd, ['text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=latin1', 'x/y']);
    if (kind === 5) call.body = JSON.stringify({ params: [{ productNo: 'STA-101-US', count: 1 + int(rnd, 3), cycleTimes: int(rnd, 3) }] });
  }
  return call;
}

function callbackCase(rnd: () => number): HttpCall {
  const method = rnd() < 0.9 ? 'GET' : pick(rnd, ['POST', 'PUT', 'HEAD', 'DELETE']);
  const path = rnd() < 0.9 ? '/callback' : pick(rnd, ['/', '/callbackx', '/callback/x', '/%ZZ', '/callback/../callback']);
  const params: string[] = [];
  if (rnd() < 0.9) params.push(`type=${encodeURIComponent(pick(rnd, ['order', 'instance', 'product', 'ORDER', '', 'x', 'order order']))}`);
  if (rnd() < 0.9)
    params.push(`no=${encodeURIComponent(pick(rnd, ['', 'ORD1', username(rnd, 'x'), 'a'.repeat(200), String(int(rnd, 1e9))]))}`);
  if (rnd() < 0.6) params.push(`op=${encodeURIComponent(pick(rnd, ['', 'open', 'renew', 'release', 'x', '1']))}`);
  if (rnd() < 0.1) params.push('type=order'); // duplicated key: an array value
  if (rnd() < 0.1) params.push(`${bytes(rnd, 4).toString('hex')}=%FF%FE`);
  const call: HttpCall = { method, path: params.length > 0 ? `${path}?${params.join('&')}` : path };
  if (method === 'POST' || method === 'PUT') call.body = JSON.stringify(randomJson(rnd));
  return call;
}
