// The portal on a listener of its own over TLS (portal.host/port/tls): the session cookie is Secure there; only
// the portal answers on it (no /v1, no dashboard, no probes), and the admin port keeps the reseller's routes.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:https';
import { startGateway, type Gateway } from '../e2e/harness.ts';
import { makeCa, type TestCa } from '../support/tls.ts';

const TOKEN = 'portal-tls-token-k2';
const C = { user: 'tlscust', password: 'tlscust-pass-77' };

let gw: Gateway;
let ca: TestCa;

function get(
  path: string,
  init: { method?: string; body?: unknown; cookie?: string } = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }> {
  return new Promise((resolve, reject) => {
    const body = init.body === undefined ? undefined : JSON.stringify(init.body);
    const req = request(
      {
        host: '127.0.0.1',
        port: gw.ports.portal,
        path,
        method: init.method ?? (body ? 'POST' : 'GET'),
        ca: ca.certPem(),
        headers: { ...(body ? { 'content-type': 'application/json' } : {}), ...(init.cookie ? { cookie: init.cookie } : {}) },
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

before(async () => {
  ca = await makeCa();
  const leaf = await ca.leaf('portal');
  gw = await startGateway({
    config: { admin: { token: TOKEN }, portal: { host: '127.0.0.1', port: 0, tls: { cert: leaf.certFile, key: leaf.keyFile } } },
  });
  assert.equal((await gw.admin('/v1/users', { body: { name: C.user, mainAccount: 'shop1', password: C.password } })).status, 201);
});

after(async () => {
  await gw?.close();
  ca?.cleanup();
});

describe('portal on its own TLS listener', () => {
  test('sign-in over TLS sets a Secure, HttpOnly, SameSite=Strict cookie; the session reads the customer', async () => {
    assert.ok(gw.ports.portal && gw.ports.portal > 0, 'the portal has its own port');
    const login = await get('/portal/api/login', { body: C });
    assert.equal(login.status, 204, login.text);
    const setCookie = String(login.headers['set-cookie'] ?? '');
    assert.match(setCookie, /; HttpOnly/);
    assert.match(setCookie, /; SameSite=Strict/);
    assert.match(setCookie, /; Secure/);
    const cookie = /^(rotor_portal=[A-Za-z0-9_-]+)/.exec(setCookie)?.[1];
    assert.ok(cookie);
    const me = await get('/portal/api/me', { cookie });
    assert.equal(me.status, 200);
    assert.equal(JSON.parse(me.text).name, C.user);
    assert.equal((await get('/portal/')).status, 200);
  });

  test('only the portal answers there: no admin API, dashboard or probes, with or without a session', async () => {
    const cookie = /^(rotor_portal=[A-Za-z0-9_-]+)/.exec(
      String((await get('/portal/api/login', { body: C })).headers['set-cookie'] ?? ''),
    )?.[1];
    for (const path of ['/v1/users', `/v1/users/${C.user}`, '/ui/', '/docs/json', '/metrics', '/healthz', '/%761/users']) {
      const r = await get(path, { ...(cookie ? { cookie } : {}) });
      assert.equal(r.status, 404, `${path}: ${r.status}`);
    }
    // The admin port still has the reseller's routes (and not the portal's).
    assert.equal((await gw.admin<unknown[]>('/v1/users')).status, 200);
    assert.equal((await fetch(`${gw.adminUrl}/portal/api/me`)).status, 404);
  });
});
