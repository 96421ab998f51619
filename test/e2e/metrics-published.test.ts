// README, "Customer portal", first way: the admin port is given a public name for the portal (admin.allowedHosts)
// and `/v1` stays behind admin.token. `/metrics` names customers (rotor_user_used_bytes{user}) and main accounts'
// balances, and `/docs/json` describes the API: once a name is published they need the token too, under any Host
// (a terminator may pass whatever Host a client sent). /healthz and /readyz stay open; an unpublished port keeps
// /metrics open to the operators' scraper, also when allowedHosts names the portal's own listener and the admin
// port is on loopback. Real daemon, admin token set, the portal on the admin listener.
import { request } from 'node:http';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startGateway, type Gateway } from './harness.ts';
import { poll } from '../support/wait.ts';

const TOKEN = 'admin-token-1234567';

/** A GET with the headers as given (node's http sends the Host named; fetch would not). */
function get(gw: Gateway, path: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  const url = new URL(gw.adminUrl);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path, headers: { host: url.host, ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('admin port published under a name (admin.allowedHosts) with a token', () => {
  let gw: Gateway;
  before(async () => {
    gw = await startGateway({ config: { admin: { token: TOKEN, allowedHosts: ['panel.example.com'] } } });
    // metrics: true: its per-user series are always exported (once the meters' next flush sets them).
    const made = await gw.admin('/v1/users', {
      body: { name: 'secretcust', mainAccount: 'shop1', password: 'secretcust-pass', metrics: true },
    });
    assert.equal(made.status, 201);
  });
  after(async () => {
    await gw?.close();
  });

  test('the portal is served under its public name, /metrics and /docs are not without the token, under any Host', async () => {
    assert.equal((await get(gw, gw.config.portal.path, { host: 'panel.example.com' })).status, 200, 'the portal under its name');
    for (const host of ['panel.example.com', new URL(gw.adminUrl).host, 'localhost']) {
      for (const path of ['/metrics', '/docs/json', '/docs/yaml', '/docs', '/docs/static/index.html']) {
        const r = await get(gw, path, { host });
        assert.equal(r.status, 401, `${host} ${path}: ${r.status} ${r.text.slice(0, 200)}`);
        assert.doesNotMatch(r.text, /secretcust|shop1/);
      }
    }
    for (const path of ['/healthz', '/readyz']) assert.notEqual((await get(gw, path, { host: 'panel.example.com' })).status, 401, path);
  });

  test('/metrics and /docs spelled otherwise (percent-encoded, absolute form, doubled slash) still need the token', async () => {
    for (const path of [
      '/%6detrics',
      '/%6D%65trics',
      '//metrics',
      '/metrics?x=1',
      '/docs/%6Ason',
      'http://panel.example.com/metrics',
      'http://x/docs/json',
    ]) {
      const r = await get(gw, path);
      assert.ok([400, 401, 403, 404].includes(r.status), `${path}: ${r.status}`);
      assert.doesNotMatch(r.text, /secretcust|shop1|rotor_process/, path);
    }
  });

  test('with the token, /metrics lists the customer and /docs/json describes the API', async () => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    const metrics = await poll(() => get(gw, '/metrics', { host: 'panel.example.com', ...auth }), {
      what: "the customer's series in /metrics",
      timeoutMs: 15_000,
      everyMs: 100,
      done: (r) => r !== undefined && r !== null && r !== false && r.status === 200 && /user="secretcust"/.test(r.text),
    });
    assert.equal(metrics.status, 200);
    const docs = await get(gw, '/docs/json', auth);
    assert.equal(docs.status, 200);
    assert.match(docs.text, /"openapi"/);
  });
});

describe('admin port not published (no allowedHosts)', () => {
  let gw: Gateway;
  before(async () => {
    gw = await startGateway({ config: { admin: { token: TOKEN } } });
  });
  after(async () => {
    await gw?.close();
  });

  test('/metrics and /docs/json answer the operators without the token', async () => {
    assert.equal((await get(gw, '/metrics')).status, 200);
    assert.equal((await get(gw, '/docs/json')).status, 200);
  });
});

describe("the portal on its own listener, the admin port on loopback (README's second way)", () => {
  let gw: Gateway;
  before(async () => {
    gw = await startGateway({
      config: {
        admin: { token: TOKEN, allowedHosts: ['admin.example.com', 'panel.example.com'] },
        portal: { host: '127.0.0.1', port: 0 },
      },
    });
  });
  after(async () => {
    await gw?.close();
  });

  test("allowedHosts are the portal listener's names: the admin port's /metrics stays open to its scraper", async () => {
    assert.equal((await get(gw, '/metrics')).status, 200);
    assert.equal((await get(gw, '/docs/json')).status, 200);
  });

  test('a request that reached the admin port under one of those names needs the token there', async () => {
    // One list for both ways: the reseller's dashboard behind a terminator under admin.example.com too.
    for (const host of ['panel.example.com', 'ADMIN.example.com:443']) {
      for (const path of ['/metrics', '/docs/json']) assert.equal((await get(gw, path, { host })).status, 401, `${host} ${path}`);
    }
    const auth = { authorization: `Bearer ${TOKEN}` };
    assert.equal((await get(gw, '/metrics', { host: 'panel.example.com', ...auth })).status, 200);
    // An address, a loopback name: the operators' own.
    for (const host of ['127.0.0.1', 'localhost:9090', '[::1]']) assert.equal((await get(gw, '/metrics', { host })).status, 200, host);
  });
});
