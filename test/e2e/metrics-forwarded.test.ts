// /metrics (customers' names, main accounts' balances) and /docs behind a TLS terminator on the daemon's own host
// that forwards to the loopback admin port under its address (nginx's proxy_pass sends Host: 127.0.0.1:port),
// with a token set and no admin.allowedHosts: the port is not "published" and the Host is loopback, so before,
// anyone the terminator served read /metrics without the token. Now a request carrying a forwarding header
// (Forwarded, X-Forwarded-For, X-Real-IP, Via, ...) needs the token, and admin.metricsToken: always needs it on
// every request (for a terminator that adds no such header). A scraper on loopback, sending none, keeps /metrics
// without a config change. Every spelling of the routes is tried: percent-encoded, absolute form, doubled slash,
// query, trailing slash. Real daemon, real HTTP through node:http (which sends the headers as given), and a
// real TLS terminator in front (node:https proxying to the admin port as nginx does, X-Forwarded-For added).
import { request } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { request as httpsRequest } from 'node:https';
import { readFileSync } from 'node:fs';
import { parseConfig } from '../../src/config/load.ts';
import { makeCa, type TestCa } from '../support/tls.ts';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startGateway, type Gateway } from './harness.ts';
import { poll } from '../support/wait.ts';

const TOKEN = 'admin-token-7654321';
const AUTH = { authorization: `Bearer ${TOKEN}` };
const SECRETS = /forwardcust|shop1|rotor_process|"openapi"/;

/** A GET with the headers as given; `path` may be an absolute-form target. */
function get(gw: Gateway, path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<{ status: number; text: string }> {
  const url = new URL(gw.adminUrl);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path, method, headers: { host: url.host, ...headers } }, (res) => {
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

/** Every spelling of the operators' routes that must answer nothing without the token. */
const spellings = (gw: Gateway): string[] => {
  const authority = new URL(gw.adminUrl).host;
  return [
    '/metrics',
    '/metrics/',
    '/metrics?x=1',
    '//metrics',
    '/%6detrics',
    '/%6D%65trics',
    `http://${authority}/metrics`,
    `http://${authority}/%6detrics`,
    '/docs',
    '/docs/json',
    '/docs/%6Ason',
    '/docs/yaml',
    '/docs/static/index.html',
    `http://${authority}/docs/json`,
  ];
};

/** Refused: 401 for the routes, another refusal for what the router or the origin policy turns away; nothing told. */
function assertRefused(r: { status: number; text: string }, what: string): void {
  assert.ok([400, 401, 403, 404].includes(r.status), `${what}: ${r.status} ${r.text.slice(0, 160)}`);
  assert.doesNotMatch(r.text, SECRETS, what);
}

describe('a token and no allowedHosts (admin.metricsToken auto): a request through a proxy in front needs the token', () => {
  let gw: Gateway;
  let terminator: HttpsServer;
  let terminatorPort: number;
  let ca: TestCa;
  before(async () => {
    gw = await startGateway({ config: { admin: { token: TOKEN } } });
    const made = await gw.admin('/v1/users', {
      body: { name: 'forwardcust', mainAccount: 'shop1', password: 'forwardcust-pass', metrics: true },
    });
    assert.equal(made.status, 201);
    // The terminator: TLS outside, the admin port inside under its address as Host, X-Forwarded-For added (as
    // nginx with `proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for`, Caddy and Traefik by default).
    const admin = new URL(gw.adminUrl);
    ca = await makeCa();
    const leaf = await ca.leaf('terminator');
    terminator = createHttpsServer({ cert: readFileSync(leaf.certFile), key: readFileSync(leaf.keyFile) }, (req, res) => {
      const headers = { ...req.headers, host: admin.host, 'x-forwarded-for': req.socket.remoteAddress ?? '' };
      const up = request({ host: admin.hostname, port: admin.port, path: req.url, method: req.method, headers }, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      });
      up.on('error', () => res.destroy());
      req.pipe(up);
    });
    await new Promise<void>((r) => terminator.listen(0, '127.0.0.1', r));
    terminatorPort = (terminator.address() as { port: number }).port;
  });
  after(async () => {
    terminator?.close();
    ca?.cleanup();
    await gw?.close();
  });

  const throughTerminator = (path: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> =>
    new Promise((resolve, reject) => {
      const req = httpsRequest({ host: '127.0.0.1', port: terminatorPort, path, headers, ca: ca.certPem() }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    });

  test('through the TLS terminator: /metrics and /docs refused without the token in every spelling, served with it', async () => {
    for (const path of spellings(gw)) assertRefused(await throughTerminator(path), `terminator ${path}`);
    const metrics = await poll(() => throughTerminator('/metrics', AUTH), {
      what: "the customer's series through the terminator with the token",
      timeoutMs: 15_000,
      everyMs: 100,
      done: (r) => r !== undefined && r !== null && r !== false && r.status === 200 && /user="forwardcust"/.test(r.text),
    });
    assert.equal(metrics.status, 200);
    assert.equal((await throughTerminator('/docs/json', AUTH)).status, 200);
    // The probes stay open for the terminator's health checks.
    for (const path of ['/healthz', '/readyz']) assert.notEqual((await throughTerminator(path)).status, 401, path);
  });

  test('each forwarding header alone, any spelling of the routes: the token is needed', async () => {
    const headers: Array<Record<string, string>> = [
      { 'x-forwarded-for': '203.0.113.9' },
      { forwarded: 'for=203.0.113.9;proto=https' },
      { 'x-real-ip': '203.0.113.9' },
      { 'X-Forwarded-Proto': 'https' },
      { 'x-forwarded-host': 'rotor.example.com' },
      { via: '1.1 terminator' },
    ];
    for (const h of headers) {
      for (const path of spellings(gw)) assertRefused(await get(gw, path, h), `${JSON.stringify(h)} ${path}`);
      assert.equal((await get(gw, '/metrics', h, 'HEAD')).status, 401, `${JSON.stringify(h)} HEAD /metrics`);
      assert.equal((await get(gw, '/metrics', { ...h, ...AUTH })).status, 200, `${JSON.stringify(h)} with the token`);
    }
  });

  test('a scraper on loopback, no forwarding header: /metrics and /docs/json still answer without the token', async () => {
    for (const host of [new URL(gw.adminUrl).host, 'localhost']) {
      assert.equal((await get(gw, '/metrics', { host })).status, 200, host);
      assert.equal((await get(gw, '/docs/json', { host })).status, 200, host);
    }
  });
});

describe('admin.metricsToken: always', () => {
  let gw: Gateway;
  before(async () => {
    gw = await startGateway({ config: { admin: { token: TOKEN, metricsToken: 'always' } } });
  });
  after(async () => {
    await gw?.close();
  });

  test('every request needs the token for /metrics and /docs, a loopback one with no forwarding header too', async () => {
    for (const path of spellings(gw)) assertRefused(await get(gw, path), path);
    assert.equal((await get(gw, '/metrics', AUTH)).status, 200);
    assert.equal((await get(gw, '/docs/json', AUTH)).status, 200);
    for (const path of ['/healthz', '/readyz']) assert.notEqual((await get(gw, path)).status, 401, path);
  });
});

test('admin.metricsToken: always without admin.token is a configuration error naming the key', () => {
  assert.throws(() => parseConfig({ admin: { metricsToken: 'always' } }), /admin\.metricsToken: 'always' needs admin\.token/);
  assert.equal(parseConfig({}).admin.metricsToken, 'auto');
});
