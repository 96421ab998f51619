// Issue 13: the admin token decided on the route that matched, not on a prefix of the raw URL. Before the fix
// (a raw `request.url` prefix check) `/%761/users` and `GET http://x/v1/app` answered 200 without the token:
// the first tests below were red against that code. The fuzz sends every spelling of the /v1 routes we could
// think of over real sockets, once with the token and once without, and checks that without it nothing but
// 401 comes back from anything the router matched (and that no route handler ever ran).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import { buildAdminServer, type AdminDeps } from '../../src/admin/index.ts';
import { seededRandom } from '../../src/sim/platform/random.ts';
import { batch, exchange } from '../reliability/fuzz-io.ts';
import { int, pick, type Rnd } from '../reliability/generators.ts';
import { TOKEN, startHarness, type Harness } from './harness.ts';

/** Counts every call made on the dependencies a /v1 route uses: a route that ran leaves a trace here. */
function spied(deps: AdminDeps, calls: string[]): AdminDeps {
  const wrap = <T extends object>(name: string, target: T): T =>
    new Proxy(target, {
      get(t, key, receiver) {
        const v = Reflect.get(t, key, receiver) as unknown;
        if (typeof v !== 'function') return v;
        return (...args: unknown[]) => {
          calls.push(`${name}.${String(key)}`);
          return (v as (...a: unknown[]) => unknown).apply(t, args);
        };
      },
    });
  const out = { ...deps } as Record<string, unknown>;
  // The probes' dependencies (metrics registry, readiness) answer without a token by design.
  for (const [k, v] of Object.entries(deps))
    if (k !== 'metrics' && k !== 'ready' && typeof v === 'object' && v !== null) out[k] = wrap(k, v);
  return out as unknown as AdminDeps;
}

interface Base {
  method: string;
  path: string;
  body?: string;
}

const BASES: Base[] = [
  { method: 'GET', path: '/v1/app' },
  { method: 'GET', path: '/v1/users' },
  { method: 'PUT', path: '/v1/users/alice/limit', body: '{"limitBytes":1234}' },
  { method: 'GET', path: '/v1/orders' },
  { method: 'POST', path: '/v1/orders/open', body: '{"productNo":"x","count":1}' },
  { method: 'POST', path: '/v1/platform/GetAppInfo', body: '{}' },
  { method: 'POST', path: '/v1/platform/DelIpWhiteList', body: '{}' },
  { method: 'GET', path: '/v1/pools' },
  { method: 'GET', path: '/v1/sessions' },
  { method: 'DELETE', path: '/v1/sessions/alice/s1' },
  { method: 'GET', path: '/v1/products' },
  { method: 'GET', path: '/v1/accounts' },
  { method: 'POST', path: '/v1/whitelist', body: '{"account":"a","productNo":"p","ip":"1.2.3.4"}' },
  { method: 'GET', path: '/v1/instances' },
  { method: 'GET', path: '/v1/sub-accounts' },
  { method: 'GET', path: '/v1/nosuchroute' },
  { method: 'GET', path: '/v1' },
];

const hex = (c: string, upper: boolean) => {
  const h = c.charCodeAt(0).toString(16).padStart(2, '0');
  return `%${upper ? h.toUpperCase() : h}`;
};

/** Percent-encodes a random subset of the characters (slashes included), in upper or lower case hex. */
function encodeSome(rnd: Rnd, path: string, p: number): string {
  return [...path].map((c, i) => (i > 0 && rnd() < p ? hex(c, rnd() < 0.5) : c)).join('');
}

/** One spelling of `path` as a request target: encodings, slashes, dot segments, params, forms, suffixes. */
function mutate(rnd: Rnd, path: string, port: number): string {
  let p = path;
  const steps = rnd() < 0.7 ? 1 : 2;
  for (let s = 0; s < steps; s++) {
    switch (int(rnd, 14)) {
      case 0:
        p = encodeSome(rnd, p, 0.3);
        break;
      case 1:
        p = p.replace('/v1', pick(rnd, ['/%761', '/%76%31', '/v%31', '/%56%31', '/%2576%31']));
        break;
      case 2:
        p = p.replace(/\//g, () => (rnd() < 0.3 ? pick(rnd, ['//', '%2F', '%2f', '/./', '/%2e/', '\\']) : '/'));
        break;
      case 3:
        p = pick(rnd, ['/x/..', '/./', '/%2e%2e', '/.%2e', '/a/b/../..', '//']) + p;
        break;
      case 4:
        p = p.replace('/v1', pick(rnd, ['/v1;a=b', '/v1;', '/v1%3B', '/v1;/']));
        break;
      case 5:
        p =
          p + pick(rnd, [';x', ';jsessionid=1', '/', '//', '/.', '/..', '?', '?a=1', '#f', '%23', '%3F', '?/../../healthz', '%00', '/%2e']);
        break;
      case 6:
        p = p.replace('/v1', pick(rnd, ['/V1', '/v1', '/%56%31', '/v1/'])).replace(/[a-z]/, (c) => (rnd() < 0.5 ? c.toUpperCase() : c));
        break;
      case 7:
        p = `${pick(rnd, ['http', 'HTTP', 'https', 'Http'])}://${pick(rnd, ['x', '127.0.0.1', `127.0.0.1:${port}`, 'localhost', 'u:p@127.0.0.1', '[::1]'])}${p.startsWith('/') ? p : `/${p}`}`;
        break;
      case 8:
        p = p.replace('/v1', pick(rnd, ['/healthz/../v1', '/docs/../v1', '/metrics/..%2Fv1', '/v1/../v1']));
        break;
      case 9:
        p = p.replace(/\/[a-z-]+$/, (seg) => `/${encodeSome(rnd, seg.slice(1), 0.6)}`);
        break;
      case 10:
        p = p.replace('/v1', pick(rnd, ['/v1%2F', '/v1%2f%2f', '/v1%252F', '/v1/%2e%2e/v1']));
        break;
      case 11:
        p = `${p}?${pick(rnd, ['token=' + TOKEN, 'authorization=Bearer%20' + TOKEN, '__proto__=1', 'a[]=1&a=2', ''])}`;
        break;
      case 12:
        p = p.replace('/v1', pick(rnd, ['/v1 ', '/v1\t', '/v1%20', '/v1%09', '/ v1']));
        break;
      default:
        p = encodeSome(rnd, p, 1);
    }
  }
  return p;
}

function fuzzCases(n: number, port: number): { method: string; target: string; body: string | undefined }[] {
  return Array.from({ length: n }, (_, i) => {
    const rnd = seededRandom(13_000 + i);
    const base = pick(rnd, BASES);
    return { method: rnd() < 0.1 ? 'HEAD' : base.method, target: mutate(rnd, base.path, port), body: base.body };
  });
}

interface Answer {
  status: number;
  body: string;
}

async function send(port: number, method: string, target: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  const lines = [`${method} ${target} HTTP/1.1`, 'Connection: close'];
  if (!('host' in headers)) lines.push(`Host: 127.0.0.1:${port}`);
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  if (body !== undefined) lines.push('Content-Type: application/json', `Content-Length: ${Buffer.byteLength(body)}`);
  const raw = `${lines.join('\r\n')}\r\n\r\n${body ?? ''}`;
  const x = await exchange({ port, chunks: [Buffer.from(raw, 'latin1')], end: false, deadlineMs: 10_000 });
  const text = x.reply.toString('latin1');
  const m = /^HTTP\/1\.1 (\d{3})/.exec(text);
  const at = text.indexOf('\r\n\r\n');
  return { status: m ? Number(m[1]) : 0, body: at >= 0 ? text.slice(at + 4) : '' };
}

const listen = async (app: FastifyInstance): Promise<number> => {
  await app.listen({ host: '127.0.0.1', port: 0 });
  return (app.server.address() as AddressInfo).port;
};

let h: Harness;
before(async () => {
  h = await startHarness();
});
after(async () => {
  await h.close();
});

describe('admin token: decided on the matched route', () => {
  let app: FastifyInstance;
  let port: number;
  const calls: string[] = [];
  before(async () => {
    // Any Host: this suite is about the token alone (absolute-form targets name hosts like `x`).
    app = buildAdminServer(spied(h.deps, calls), { host: '127.0.0.1', token: TOKEN, allowedHosts: ['*'] });
    port = await listen(app);
  });
  after(async () => {
    await app.close();
  });

  test("the issue's three probes answer 401 without the token (200 before the fix)", async () => {
    const list = await send(port, 'GET', '/%761/users', {});
    assert.equal(list.status, 401, list.body);
    const put = await send(port, 'PUT', '/%761/users/alice/limit', {}, '{"limitBytes":1234}');
    assert.equal(put.status, 401, put.body);
    const abs = await send(port, 'GET', 'http://x/v1/app', {});
    assert.equal(abs.status, 401, abs.body);
    assert.deepEqual(calls, [], 'no route ran');
    // With the token the same spellings do reach the routes: the router really decodes them.
    const auth = { authorization: `Bearer ${TOKEN}` };
    assert.equal((await send(port, 'GET', '/%761/users', auth)).status, 200);
    assert.equal((await send(port, 'GET', 'http://x/v1/app', auth)).status, 200);
  });

  test('every /v1 route the server documents (users, connections, usage, events, stats included): 401 without the token, plain, percent-encoded and absolute-form, and no route runs', async () => {
    // The route list comes from the server itself (its OpenAPI document), so a route added later is covered
    // without editing this test.
    const doc = (app as unknown as { swagger(): { paths: Record<string, Record<string, unknown>> } }).swagger();
    const routes: { method: string; path: string }[] = [];
    for (const [path, ops] of Object.entries(doc.paths)) {
      if (!path.startsWith('/v1')) continue;
      for (const method of Object.keys(ops)) {
        if (['get', 'post', 'put', 'patch', 'delete'].includes(method))
          routes.push({ method: method.toUpperCase(), path: path.replace(/\{[^}]+\}/g, 'x1') });
      }
    }
    for (const must of ['/v1/users/x1', '/v1/connections/x1', '/v1/usage', '/v1/events', '/v1/stats', '/v1/connections/active']) {
      assert.ok(
        routes.some((r) => r.path === must),
        `the document lists ${must}`,
      );
    }
    assert.ok(routes.length >= 40, `${routes.length} routes`);
    const before = calls.length;
    for (const { method, path } of routes) {
      const encoded = path.replace('/v1', '/%76%31');
      for (const target of [path, encoded, `http://x${path}`]) {
        const body = method === 'GET' || method === 'DELETE' ? undefined : '{}';
        const a = await send(port, method, target, {}, body);
        assert.equal(a.status, 401, `${method} ${target} answered ${a.status}`);
      }
    }
    assert.equal(calls.length, before, `no route ran without the token: ${calls.slice(before).join(', ')}`);
  });

  test('every route the router holds, documented or hidden: /v1 ones answer 401 without the token, and the rest are the public probes, docs and page', async () => {
    // From the router itself (printRoutes), so a hidden route or one added outside /v1 later is seen here.
    const routes: { method: string; path: string }[] = [];
    const stack: string[] = [];
    for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
      const m = /^((?:[│ ] {3})*)[├└]── (\S+)(?: \(([^)]*)\))?/.exec(line);
      if (!m) continue;
      const depth = m[1]!.length / 4;
      stack.length = depth;
      const path = (stack[depth - 1] ?? '') + m[2]!;
      stack.push(path);
      for (const method of (m[3] ?? '').split(',').map((x) => x.trim())) if (method) routes.push({ method, path });
    }
    assert.ok(routes.length >= 80, `${routes.length} routes read from the router`);
    const PUBLIC = [/^\/healthz$/, /^\/readyz$/, /^\/metrics$/, /^\/docs(?:\/|\*|$)/, /^\/ui(?:\/|\*|$)/];
    const open = routes.filter((r) => !r.path.startsWith('/v1') && !PUBLIC.some((p) => p.test(r.path)));
    assert.deepEqual(open, [], 'routes outside /v1 that are not the public probes, docs or page');
    const before = calls.length;
    for (const { method, path } of routes.filter((r) => r.path.startsWith('/v1') && r.method !== 'HEAD')) {
      const target = path.replace(/:[^/]+/g, 'x1').replace(/\*$/, 'x1');
      const a = await send(port, method, target, {}, method === 'GET' || method === 'DELETE' ? undefined : '{}');
      assert.equal(a.status, 401, `${method} ${target} answered ${a.status}`);
    }
    assert.equal(calls.length, before, `no route ran without the token: ${calls.slice(before).join(', ')}`);
  });

  test('a /v1 route registered outside the /v1 scope is guarded too', async () => {
    const extra = buildAdminServer(h.deps, { host: '127.0.0.1', token: TOKEN });
    let ran = 0;
    extra.get('/v1/extra', async () => {
      ran++;
      return { secret: true };
    });
    try {
      const extraPort = await listen(extra);
      for (const target of ['/v1/extra', '/%76%31/extra', 'http://127.0.0.1/v1/extra', '/v1/extra/']) {
        assert.equal((await send(extraPort, 'GET', target, {})).status, 401, target);
      }
      assert.equal(ran, 0);
      assert.equal((await send(extraPort, 'GET', '/v1/extra', { authorization: `Bearer ${TOKEN}` })).status, 200);
    } finally {
      await extra.close();
    }
  });

  test('named spellings: encodings, slashes, dot segments, absolute form, params, case, trailing slash, ? tricks', async () => {
    calls.length = 0;
    const targets = [
      '/%76%31/users',
      '/%761/users',
      '/v%31/users',
      '/v1%2Fusers',
      '/v1%2fusers',
      '/v1/%75sers',
      '/v1/user%73',
      '/v1/users/',
      '/v1/users//',
      '//v1/users',
      '/v1//users',
      '/./v1/users',
      '/x/../v1/users',
      '/v1/./users',
      '/%2e/v1/users',
      '/v1;a=b/users',
      '/v1/users;x',
      '/V1/users',
      '/v1/USERS',
      '/v1/users?',
      '/v1/users?a=1',
      '/v1/users#x',
      '/v1?/users',
      '/v1%3F/users',
      'http://x/v1/users',
      'HTTP://X/v1/users',
      `http://127.0.0.1:${port}/%761/users`,
      'http://u:p@x/v1/users',
      'https://x/v1/users',
      '/v1\\users',
      '/healthz/../v1/users',
      '/v1/nosuch',
      '/v1',
      '/v1/',
      '/%761',
      '/v1/users/%2e%2e/app',
    ];
    for (const t of targets) {
      const r = await send(port, 'GET', t, {});
      assert.ok(r.status === 401 || r.status === 404 || r.status === 400, `${t}: ${r.status} ${r.body}`);
      if (r.status !== 401) assert.doesNotMatch(r.body, /"name"|usedBytes|appName/, t);
    }
    assert.deepEqual(calls, [], 'no route ran');
  });

  test('fuzz: 5,600 spellings over real sockets, with and without the token: without it, 401 wherever a route matched', async (t) => {
    const PER_MODE = 2800;
    const auth = { authorization: `Bearer ${TOKEN}` };
    const cases = fuzzCases(PER_MODE, port);
    const bodyOf = (c: (typeof cases)[number]) => (c.method === 'HEAD' ? undefined : c.body);
    // Without the token first, all of them: no route may run (the spy stays empty) and nothing succeeds.
    calls.length = 0;
    const without: Answer[] = [];
    await batch(PER_MODE, 16, async (i) => {
      without[i] = await send(port, cases[i]!.method, cases[i]!.target, {}, bodyOf(cases[i]!));
      return undefined;
    });
    assert.deepEqual(calls.slice(0, 5), [], 'a route ran without the token');
    const withToken: Answer[] = [];
    await batch(PER_MODE, 16, async (i) => {
      withToken[i] = await send(port, cases[i]!.method, cases[i]!.target, auth, bodyOf(cases[i]!));
      return undefined;
    });
    const validated = /"INVALID_INPUT","message":"(body|query|path)/;
    let matched = 0;
    const failures: string[] = [];
    for (let i = 0; i < PER_MODE; i++) {
      const c = cases[i]!;
      const w = without[i]!;
      const t = withToken[i]!;
      // "Reached a route": with the token the router matched a /v1 route (anything but the root 404 and the
      // parser's or router's own 400s).
      const reached = (t.status !== 404 && t.status !== 400 && t.status !== 0) || validated.test(t.body);
      if (reached) matched++;
      if (w.status >= 200 && w.status < 400) failures.push(`${c.method} ${c.target}: ${w.status} without the token`);
      else if (reached && w.status !== 401) failures.push(`${c.method} ${c.target}: ${w.status} without the token, ${t.status} with it`);
      else if (validated.test(w.body)) failures.push(`${c.method} ${c.target}: route validation ran without the token`);
    }
    assert.deepEqual(failures.slice(0, 10), [], `${failures.length} failures`);
    // The fuzz is only worth something if many spellings did reach a route (about a fifth do: most of the
    // rest are spellings the router rightly does not match, %2F for a separator among them).
    t.diagnostic(`${matched} of ${PER_MODE} spellings reached a route with the token; all ${PER_MODE} answered without it`);
    assert.ok(matched > PER_MODE / 8, `only ${matched} of ${PER_MODE} spellings reached a route`);
  });
});

describe('Host and Origin on the admin port (no token configured: loopback is the only barrier)', () => {
  let app: FastifyInstance;
  let port: number;
  const calls: string[] = [];
  before(async () => {
    app = buildAdminServer(spied(h.deps, calls), {
      host: '127.0.0.1',
      allowedHosts: ['rotor.lan'],
      allowedOrigins: ['https://ops.example.com'],
    });
    port = await listen(app);
  });
  after(async () => {
    await app.close();
  });

  test('Host: loopback names, IP literals, admin.host and admin.allowedHosts pass; any other name (DNS rebinding) is 403', async () => {
    for (const host of [
      `127.0.0.1:${port}`,
      `localhost:${port}`,
      `[::1]:${port}`,
      `app.localhost:${port}`,
      `10.1.2.3:${port}`,
      `rotor.lan:${port}`,
      'ROTOR.LAN',
    ]) {
      const r = await send(port, 'GET', '/v1/users', { host });
      assert.equal(r.status, 200, `${host}: ${r.body}`);
    }
    calls.length = 0;
    for (const host of [
      `evil.example:${port}`,
      'rebind.attacker.test',
      `localhost.evil.example:${port}`,
      '127.0.0.1.nip.io',
      '',
      'a b',
      `[::1`,
    ]) {
      const r = await send(port, 'GET', '/v1/users', { host });
      assert.ok(r.status === 403 || r.status === 400, `${host}: ${r.status} ${r.body}`);
      if (r.status === 403) assert.match(r.body, /HOST_NOT_ALLOWED/);
    }
    // The authority of an absolute-form target is checked like the Host header.
    const abs = await send(port, 'GET', 'http://evil.example/v1/users', {});
    assert.equal(abs.status, 403, abs.body);
    assert.deepEqual(calls, [], 'no route ran');
  });

  test('Origin: same-origin (the dashboard) and admin.allowedOrigins pass; cross-site pages and `null` are 403', async () => {
    const same = await send(port, 'POST', '/v1/platform/GetAppInfo', { origin: `http://127.0.0.1:${port}` }, '{}');
    assert.equal(same.status, 200, same.body);
    const listed = await send(port, 'GET', '/v1/users', { origin: 'https://ops.example.com/' });
    assert.equal(listed.status, 200, listed.body);
    calls.length = 0;
    for (const origin of [
      'http://evil.example',
      'null',
      `http://127.0.0.1:${port + 1}`,
      `http://localhost:${port}`,
      'https://ops.example.com.evil.example',
      'file://',
    ]) {
      for (const [method, path, body] of [
        ['POST', '/v1/platform/GetAppInfo', '{}'],
        ['PUT', '/v1/users/alice/limit', '{"limitBytes":1}'],
        ['GET', '/v1/users', undefined],
      ] as const) {
        const r = await send(port, method, path, { origin }, body);
        assert.equal(r.status, 403, `${origin} ${method} ${path}: ${r.body}`);
        assert.match(r.body, /ORIGIN_NOT_ALLOWED/);
      }
    }
    assert.deepEqual(calls, [], 'no route ran');
  });

  test('a form post (text/plain, no preflight) is 415; a body-less write where a body is required is 400 naming the body', async () => {
    const raw = await exchange({
      port,
      chunks: [
        Buffer.from(
          `PUT /v1/users/alice/limit HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: 17\r\n\r\n{"limitBytes":1}\n`,
        ),
      ],
      end: false,
      deadlineMs: 5000,
    });
    assert.match(raw.reply.toString(), /^HTTP\/1\.1 415/);
    const empty = await send(port, 'PUT', '/v1/users/alice/limit', {});
    assert.equal(empty.status, 400);
    assert.match(empty.body, /body/);
    const emptyPost = await send(port, 'POST', '/v1/whitelist', { 'content-length': '0' });
    assert.equal(emptyPost.status, 400);
  });

  test('fuzz: 2,800 spellings from a rebinding page (foreign Host) or a cross-site page (foreign Origin): never a route', async () => {
    const cases = fuzzCases(2800, port);
    calls.length = 0;
    const failures = await batch(cases.length, 16, async (i) => {
      const c = cases[i]!;
      const headers: Record<string, string> =
        i % 2 === 0 ? { host: `rebind-${i}.attacker.test:${port}` } : { origin: `http://attacker-${i}.test` };
      const r = await send(port, c.method, c.target, headers, c.method === 'HEAD' ? undefined : c.body);
      if (r.status !== 403 && r.status !== 400) return `${c.method} ${c.target} ${JSON.stringify(headers)}: ${r.status}`;
      return undefined;
    });
    assert.deepEqual(failures.slice(0, 10), [], `${failures.length} failures`);
    assert.deepEqual(calls.slice(0, 5), [], 'a route ran');
  });
});
