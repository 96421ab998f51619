// The customer portal as a trust boundary, over real HTTP against the real daemon on the embedded sandbox:
// every route without a session, with a forged cookie, through an encoded path and an absolute-form target;
// customer A unable to read or change anything of customer B's (B's name and ids by path, query and body);
// no admin route reachable with a portal session; CSRF on writes; endpoints that work through the proxy (curl);
// a password change; sign-out; wrong-password back-off.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { curl, startGateway, viaHttp, waitFor, type Gateway } from '../e2e/harness.ts';
import { startTarget, type BytesTarget } from '../e2e/limits-harness.ts';

const TOKEN = 'portal-admin-token-Q8v';
const A = { user: 'custa', password: 'custa-pass-1234' };
const B = { user: 'custb', password: 'custb-pass-5678' };

let gw: Gateway;
let target: BytesTarget;
let base: string;

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: () => any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

async function call(
  path: string,
  init: { method?: string; body?: unknown; cookie?: string; csrf?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...init.headers };
  if (init.cookie) headers.cookie = init.cookie;
  if (init.csrf) headers['x-rotor-csrf'] = init.csrf;
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${gw.adminUrl}${path}`, {
    method: init.method ?? (init.body !== undefined ? 'POST' : 'GET'),
    headers,
    redirect: 'manual',
    ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
    signal: AbortSignal.timeout(20_000),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: () => JSON.parse(text) };
}

interface Session {
  cookie: string;
  csrf: string;
  setCookie: string;
}

async function signIn(who: { user: string; password: string }): Promise<Session> {
  const r = await call(`${base}api/login`, { body: who });
  assert.equal(r.status, 204, r.text);
  const setCookie = r.headers.get('set-cookie') ?? '';
  const m = /^(rotor_portal=[A-Za-z0-9_-]+)/.exec(setCookie);
  assert.ok(m, `a session cookie, got ${setCookie}`);
  const csrf = r.headers.get('x-rotor-csrf') ?? '';
  assert.ok(csrf.length >= 20, 'the sign-in answer names the CSRF token');
  return { cookie: m[1]!, csrf, setCookie };
}

/** A raw HTTP/1.1 request (absolute-form targets and odd spellings fetch() will not send). */
function raw(request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const port = Number(new URL(gw.adminUrl).port);
    const s = connect({ host: '127.0.0.1', port }, () => s.write(request));
    let data = '';
    s.on('data', (c: Buffer) => (data += c.toString('latin1')));
    s.on('end', () => resolve(data));
    s.on('error', reject);
  });
}
const statusOf = (response: string) => Number(/^HTTP\/1\.1 (\d{3})/.exec(response)?.[1]);

/** Every portal API route: method, path, body. */
const ROUTES: { method: string; path: string; body?: unknown }[] = [
  { method: 'GET', path: 'api/me' },
  { method: 'GET', path: 'api/usage' },
  { method: 'GET', path: 'api/connections' },
  { method: 'GET', path: 'api/endpoints?sessions=2' },
  { method: 'GET', path: 'api/regions' },
  { method: 'POST', path: 'api/password', body: { current: 'x', password: 'yyyyyyyy' } },
  { method: 'POST', path: 'api/logout', body: {} },
];

before(async () => {
  gw = await startGateway({ config: { admin: { token: TOKEN } } });
  target = await startTarget();
  base = gw.config.portal.path;
  for (const u of [A, B]) {
    const r = await gw.admin('/v1/users', {
      body: { name: u.user, mainAccount: 'shop1', password: u.password, quota: { bytes: 512 * 1024 * 1024, period: 'month' } },
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
  }
});

after(async () => {
  await target?.close();
  await gw?.close();
});

describe('customer portal API', () => {
  test('the page loads without a session; /portal redirects to /portal/', async () => {
    const page = await call(base);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /text\/html/);
    assert.match(page.headers.get('content-security-policy') ?? '', /frame-ancestors 'none'/);
    assert.doesNotMatch(page.text, /custa|custb/);
    const bare = await call(base.slice(0, -1));
    assert.equal(bare.status, 302);
    assert.equal(bare.headers.get('location'), base);
    for (const file of ['app/portal.js', 'app/access.js', 'vendor/preact.mjs', 'css/style.css'])
      assert.equal((await call(`${base}${file}`)).status, 200, file);
    for (const file of ['app/api.js', 'app/..%2fapi.js', 'app/%2e%2e%2fapi.js', 'vendor/..%2f..%2fpackage.json']) {
      const r = await call(`${base}${file}`);
      assert.ok(r.status === 404 || r.status === 400, `${file}: ${r.status}`);
    }
  });

  test('every route refuses a request without a session, with a forged cookie, an encoded path or an absolute-form target', async () => {
    const forged = [
      'rotor_portal=' + 'A'.repeat(43),
      'rotor_portal=',
      'rotor_portal=../../x',
      `rotor_portal=${'x'.repeat(5000)}`,
      'other=1',
    ];
    for (const r of ROUTES) {
      const none = await call(`${base}${r.path}`, { method: r.method, body: r.body });
      assert.equal(none.status, 401, `${r.method} ${r.path} without a session: ${none.text}`);
      assert.equal(none.json().error.code, 'SIGNED_OUT');
      for (const cookie of forged) {
        const f = await call(`${base}${r.path}`, { method: r.method, body: r.body, cookie, csrf: 'x'.repeat(32) });
        assert.equal(f.status, 401, `${r.method} ${r.path} with ${cookie.slice(0, 30)}: ${f.text}`);
      }
    }
    // Encoded spellings of the same routes reach the same check.
    for (const path of ['api/%6De', 'api/m%65', 'api/%63onnections', 'api//me', 'api/./me']) {
      const r = await call(`${base}${path}`);
      assert.ok(r.status === 401 || r.status === 404, `${path}: ${r.status} ${r.text}`);
      assert.doesNotMatch(r.text, /custa|custb|usedBytes/);
    }
    const port = new URL(gw.adminUrl).port;
    const absolute = await raw(
      `GET http://127.0.0.1:${port}${base}api/me HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`,
    );
    assert.equal(statusOf(absolute), 401, absolute.split('\r\n')[0]);
  });

  test('sign-in: the cookie is HttpOnly, SameSite=Strict, scoped to the portal, not Secure over plain HTTP; a wrong password is refused', async () => {
    const wrong = await call(`${base}api/login`, { body: { user: A.user, password: 'nope' } });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.json().error.code, 'BAD_CREDENTIALS');
    assert.equal(wrong.headers.get('set-cookie'), null);
    const unknown = await call(`${base}api/login`, { body: { user: 'nobody', password: 'nope' } });
    assert.equal(unknown.status, 401);
    assert.equal(unknown.text, wrong.text, 'an unknown user and a wrong password look the same');
    const s = await signIn(A);
    assert.match(s.setCookie, /; HttpOnly/);
    assert.match(s.setCookie, /; SameSite=Strict/);
    assert.match(s.setCookie, new RegExp(`; Path=${base}(;|$)`));
    assert.doesNotMatch(s.setCookie, /Secure/);
    const me = await call(`${base}api/me`, { cookie: s.cookie });
    assert.equal(me.status, 200);
    const body = me.json();
    assert.equal(body.name, A.user);
    assert.equal(body.limitBytes, 512 * 1024 * 1024);
    assert.equal(body.state, 'enabled');
    assert.ok(!('mainAccount' in body) && !('password' in body), 'no reseller-side or secret fields');
  });

  test("customer A cannot read or change anything of customer B's, by path, query or body", async () => {
    const a = await signIn(A);
    const b = await signIn(B);
    // B's traffic and a connection of B's to look for.
    assert.equal((await curl([...viaHttp(gw.ports.http, B.user, B.password), target.url(4096), '-o', '/dev/null'])).status, 200);
    assert.equal((await curl([...viaHttp(gw.ports.http, A.user, A.password), target.url(1024), '-o', '/dev/null'])).status, 200);
    // Records are written in batches: waited for.
    const bId = await waitFor(
      "a record of B's connection",
      async () => (await gw.admin<{ items: { id: string }[] }>(`/v1/connections?user=${B.user}`)).body.items[0]?.id,
      15_000,
    );
    await waitFor(
      "a record of A's connection",
      async () => ((await gw.admin<{ items: unknown[] }>(`/v1/connections?user=${A.user}`)).body.items.length > 0 ? true : undefined),
      15_000,
    );

    const refused: [string, string, unknown?][] = [
      ['GET', `api/me?user=${B.user}`],
      ['GET', `api/me?name=${B.user}`],
      ['GET', `api/me/${B.user}`],
      ['GET', `api/users/${B.user}`],
      ['GET', `api/usage?user=${B.user}`],
      ['GET', `api/usage/${B.user}`],
      ['GET', `api/connections?user=${B.user}`],
      ['GET', `api/connections/${bId}`],
      ['DELETE', `api/connections/${bId}`],
      ['GET', `api/endpoints?user=${B.user}`],
      ['GET', `api/endpoints/${B.user}`],
      ['POST', 'api/password', { current: A.password, password: 'hijacked-pass', user: B.user }],
      ['POST', 'api/password', { current: B.password, password: 'hijacked-pass' }],
      ['POST', `api/password/${B.user}`, { current: A.password, password: 'hijacked-pass' }],
      ['POST', 'api/logout', { user: B.user }],
    ];
    for (const [method, path, body] of refused) {
      const r = await call(`${base}${path}`, { method, cookie: a.cookie, csrf: a.csrf, ...(body !== undefined ? { body } : {}) });
      assert.ok([400, 401, 404].includes(r.status), `${method} ${path}: ${r.status} ${r.text}`);
      assert.deepEqual(Object.keys(r.json()), ['error'], `${method} ${path}: an error and nothing else`);
      assert.deepEqual(Object.keys(r.json().error).sort(), ['code', 'message']);
    }
    // What A may read holds only A's.
    const conns = await call(`${base}api/connections?limit=200`, { cookie: a.cookie });
    assert.equal(conns.status, 200);
    assert.ok(!conns.text.includes(bId), "B's connection is not in A's list");
    assert.ok(conns.json().recent.length >= 1, "A's own connection is");
    const usage = await call(`${base}api/usage?granularity=hour`, { cookie: a.cookie });
    assert.equal(usage.status, 200);
    const aBytes = usage.json().reduce((n: number, r: { bytesUp: number; bytesDown: number }) => n + r.bytesUp + r.bytesDown, 0);
    assert.ok(aBytes < 4096, `A's usage is A's (${aBytes} bytes), not B's 4 KiB`);
    const ends = await call(`${base}api/endpoints?sessions=1`, { cookie: a.cookie });
    assert.ok(!ends.text.includes(B.user) && !ends.text.includes(B.password));
    // A's CSRF token is not B's: B's session refuses it.
    const cross = await call(`${base}api/password`, {
      body: { current: B.password, password: 'hijacked-pass' },
      cookie: b.cookie,
      csrf: a.csrf,
    });
    assert.equal(cross.status, 403);
    // B is untouched: B's password still works at the proxy and in the portal.
    assert.equal((await curl([...viaHttp(gw.ports.http, B.user, B.password), target.url(16), '-o', '/dev/null'])).status, 200);
    assert.equal((await call(`${base}api/me`, { cookie: b.cookie })).json().name, B.user);
  });

  test('no admin route is reachable with a portal session', async () => {
    const s = await signIn(A);
    const admin: [string, string, unknown?][] = [
      ['GET', '/v1/users'],
      ['GET', `/v1/users/${A.user}`],
      ['GET', `/v1/users/${A.user}/endpoints`],
      ['PATCH', `/v1/users/${A.user}`, { quota: { bytes: -1, period: 'total' } }],
      ['POST', '/v1/users', { name: 'evil', mainAccount: 'shop1' }],
      ['POST', `/v1/users/${A.user}/password`, { password: 'x' }],
      ['GET', '/v1/connections'],
      ['GET', '/v1/usage'],
      ['GET', '/v1/stats'],
      ['GET', '/v1/app'],
      ['GET', '/%761/users'],
      ['GET', `${base}api/../../v1/users`],
      ['GET', `${base}..%2f..%2fv1/users`],
    ];
    for (const [method, path, body] of admin) {
      const r = await call(path, { method, cookie: s.cookie, csrf: s.csrf, ...(body !== undefined ? { body } : {}) });
      assert.ok(r.status === 401 || r.status === 404, `${method} ${path}: ${r.status} ${r.text.slice(0, 200)}`);
      assert.doesNotMatch(r.text, /usedBytes|custb|"items"/);
    }
    const port = new URL(gw.adminUrl).port;
    const absolute = await raw(
      `GET http://127.0.0.1:${port}/v1/users HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nCookie: ${s.cookie}\r\nConnection: close\r\n\r\n`,
    );
    assert.equal(statusOf(absolute), 401);
    assert.equal(
      (await gw.admin<{ quota: { bytes: number } }>(`/v1/users/${A.user}`)).body.quota.bytes,
      512 * 1024 * 1024,
      'nothing changed',
    );
  });

  test('writes need the CSRF header the sign-in named', async () => {
    const s = await signIn(A);
    const no = await call(`${base}api/logout`, { body: {}, cookie: s.cookie });
    assert.equal(no.status, 403);
    assert.equal(no.json().error.code, 'CSRF');
    const wrong = await call(`${base}api/password`, {
      body: { current: A.password, password: 'whatever-123' },
      cookie: s.cookie,
      csrf: s.csrf.replace(/^./, (c) => (c === 'a' ? 'b' : 'a')),
    });
    assert.equal(wrong.status, 403);
    assert.equal((await call(`${base}api/me`, { cookie: s.cookie })).status, 200, 'still signed in');
    // A form post (no JSON, no preflight) is refused before any route.
    const form = await call(`${base}api/logout`, { method: 'POST', cookie: s.cookie, headers: { 'content-type': 'text/plain' } });
    assert.ok(form.status === 415 || form.status === 403, `${form.status}`);
  });

  test('endpoints: N sticky lines with generated ids, as JSON, TXT and CSV; a curl through one of them works', async () => {
    const s = await signIn(A);
    const r = await call(`${base}api/endpoints?sessions=3&sessTime=15&protocol=http`, { cookie: s.cookie });
    assert.equal(r.status, 200, r.text);
    const list = r.json().endpoints as { url: string; username: string; session: string; hostport: string; curl: string; python: string }[];
    assert.equal(list.length, 3);
    assert.equal(new Set(list.map((e) => e.session)).size, 3, 'distinct session ids');
    for (const e of list) {
      assert.match(e.username, new RegExp(`^${A.user}-session-[0-9a-f]{12}-sesstime-15$`));
      assert.equal(e.url, `http://${e.username}:${A.password}@127.0.0.1:${gw.ports.http}`);
      assert.equal(e.hostport, `127.0.0.1:${gw.ports.http}:${e.username}:${A.password}`);
      assert.match(e.curl, /^curl -x '/);
      assert.match(e.python, /^requests\.get\(/);
    }
    const through = await curl(['-x', list[0]!.url, target.url(2048), '-o', '/dev/null']);
    assert.equal(through.exitCode, 0, through.stderr);
    assert.equal(through.status, 200);
    const sessions = await gw.admin<{ user: string; sessionId: string }[]>('/v1/sessions');
    assert.ok(
      sessions.body.some((x) => x.user === A.user && x.sessionId === list[0]!.session),
      'the line made a sticky session',
    );
    const socks = (await call(`${base}api/endpoints?protocol=socks5`, { cookie: s.cookie })).json().endpoints[0];
    assert.equal(socks.url, `socks5://${A.user}:${A.password}@127.0.0.1:${gw.ports.socks5}`);
    const viaSocks = await curl(['-x', socks.url.replace(/^socks5:/, 'socks5h:'), target.url(16), '-o', '/dev/null']);
    assert.equal(viaSocks.status, 200, viaSocks.stderr);

    const txt = await call(`${base}api/endpoints?sessions=4&format=txt&style=hostport`, { cookie: s.cookie });
    assert.equal(txt.status, 200);
    assert.match(txt.headers.get('content-disposition') ?? '', /^attachment; filename="custa-endpoints\.txt"$/);
    assert.equal(txt.text.trim().split('\n').length, 4);
    const csv = await call(`${base}api/endpoints?sessions=2&format=csv`, { cookie: s.cookie });
    assert.match(csv.headers.get('content-type') ?? '', /text\/csv/);
    const rows = csv.text.trim().split('\r\n');
    assert.equal(rows[0], 'protocol,host,port,username,password,session,url');
    assert.equal(rows.length, 3);
    for (const bad of ['sessions=1001', 'sessions=-1', 'sessTime=500', 'region=a-b', 'format=xml', 'protocol=ftp']) {
      assert.equal((await call(`${base}api/endpoints?${bad}`, { cookie: s.cookie })).status, 400, bad);
    }
  });

  test('a password change: the old one stops working at the proxy, the new one works, other sessions end; sign-out ends this one', async () => {
    const one = await signIn(A);
    const other = await signIn(A);
    const short = await call(`${base}api/password`, {
      body: { current: A.password, password: 'short' },
      cookie: one.cookie,
      csrf: one.csrf,
    });
    assert.equal(short.status, 400);
    const next = 'custa-new-pass-99';
    const r = await call(`${base}api/password`, { body: { current: A.password, password: next }, cookie: one.cookie, csrf: one.csrf });
    assert.equal(r.status, 204, r.text);
    assert.equal((await curl([...viaHttp(gw.ports.http, A.user, A.password), target.url(16), '-o', '/dev/null'])).status, 407);
    assert.equal((await curl([...viaHttp(gw.ports.http, A.user, next), target.url(16), '-o', '/dev/null'])).status, 200);
    assert.equal((await call(`${base}api/me`, { cookie: other.cookie })).status, 401, 'the other session ended');
    const lines = (await call(`${base}api/endpoints`, { cookie: one.cookie })).json().endpoints;
    assert.equal(lines[0].password, next, 'this session goes on with the new password');
    const out = await call(`${base}api/logout`, { body: {}, cookie: one.cookie, csrf: one.csrf });
    assert.equal(out.status, 204);
    assert.match(out.headers.get('set-cookie') ?? '', /Max-Age=0/);
    assert.equal((await call(`${base}api/me`, { cookie: one.cookie })).status, 401);
    A.password = next;
  });

  test("a new password set by the reseller ends the customer's portal sessions; a deleted customer's session ends", async () => {
    const c = { user: 'custc', password: 'custc-pass-2468' };
    assert.equal((await gw.admin('/v1/users', { body: { name: c.user, mainAccount: 'shop1', password: c.password } })).status, 201);
    const s = await signIn(c);
    assert.equal((await call(`${base}api/me`, { cookie: s.cookie })).status, 200);
    assert.equal((await gw.admin(`/v1/users/${c.user}/password`, { body: { password: 'custc-reset-1357' } })).status, 200);
    assert.equal((await call(`${base}api/me`, { cookie: s.cookie })).status, 401, "the old password's session is over");
    const again = await signIn({ user: c.user, password: 'custc-reset-1357' });
    assert.equal((await gw.admin(`/v1/users/${c.user}`, { method: 'DELETE' })).status, 204);
    assert.equal((await call(`${base}api/me`, { cookie: again.cookie })).status, 401);
    assert.equal((await call(`${base}api/endpoints`, { cookie: again.cookie })).status, 401);
  });

  test("the reseller's access generator: GET /v1/users/:name/endpoints with the admin token, PASSWORD in place of the password", async () => {
    const r = await fetch(`${gw.adminUrl}/v1/users/${B.user}/endpoints?sessions=2&sessTime=5&format=txt`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-disposition') ?? '', /filename="custb-endpoints\.txt"/);
    const lines = (await r.text()).trim().split('\n');
    assert.equal(lines.length, 2);
    for (const l of lines)
      assert.match(l, new RegExp(`^http://${B.user}-session-[0-9a-f]{12}-sesstime-5:PASSWORD@127\\.0\\.0\\.1:${gw.ports.http}$`));
    assert.equal((await fetch(`${gw.adminUrl}/v1/users/nobody/endpoints`, { headers: { authorization: `Bearer ${TOKEN}` } })).status, 404);
    assert.equal((await fetch(`${gw.adminUrl}/v1/users/${B.user}/endpoints`)).status, 401);
    // Without the token, in the spellings a router might decode differently: percent-encoded and absolute-form.
    for (const target of [
      `/%76%31/users/${B.user}/endpoints`,
      `/v1/users/${encodeURIComponent(B.user)}%2Fendpoints`,
      `http://${new URL(gw.adminUrl).host}/v1/users/${B.user}/endpoints`,
    ]) {
      const status = await new Promise<number>((resolve, reject) => {
        const url = new URL(gw.adminUrl);
        const socket = connect(Number(url.port), url.hostname, () =>
          socket.write(`GET ${target} HTTP/1.1\r\nHost: ${url.host}\r\nConnection: close\r\n\r\n`),
        );
        let text = '';
        socket.setEncoding('latin1');
        socket.on('data', (d: string) => (text += d));
        socket.on('end', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0)));
        socket.on('error', reject);
      });
      assert.ok(status === 401 || status === 404, `GET ${target} without the token answered ${status}`);
      assert.notEqual(status, 200);
    }
  });

  test('a customer whose password Rotor generated signs in with it', async () => {
    const made = await gw.admin<{ password: string }>('/v1/users', { body: { name: 'custg', mainAccount: 'shop1' } });
    assert.equal(made.status, 201);
    assert.ok(made.body.password);
    const s = await signIn({ user: 'custg', password: made.body.password });
    assert.equal((await call(`${base}api/me`, { cookie: s.cookie })).json().name, 'custg');
  });

  test('wrong passwords back off: after three, the next try waits (429 with Retry-After) even with the right password', async () => {
    for (let i = 0; i < 3; i++)
      assert.equal((await call(`${base}api/login`, { body: { user: B.user, password: `wrong-${i}` } })).status, 401);
    const delayed = await call(`${base}api/login`, { body: { user: B.user, password: B.password } });
    assert.equal(delayed.status, 429, delayed.text);
    assert.equal(delayed.json().error.code, 'LOGIN_DELAYED');
    const wait = Number(delayed.headers.get('retry-after'));
    assert.ok(wait >= 1 && wait <= 2, `Retry-After ${wait}`);
    // Another customer is not held by B's wait.
    assert.equal((await call(`${base}api/login`, { body: A })).status, 204);
    // Once the wait is over, the right password signs in (polled: the wait is the server's clock).
    const deadline = Date.now() + 15_000;
    let status = 429;
    while (status === 429 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      status = (await call(`${base}api/login`, { body: B })).status;
    }
    assert.equal(status, 204);
  });
});
