// The dashboard's server side and GET /v1/stats over fastify's inject(): the page and its assets are public
// (and only they), with a Content-Security-Policy that admits the one inline import map; vendor modules come
// from node_modules by a fixed list; the series needs the token like every /v1 route.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Fastify from 'fastify';
import { toErrorReply } from '../../src/admin/errors.ts';
import { WEB_ROOT, registerDashboard } from '../../src/admin/ui/dashboard.ts';
import { AUTH, startHarness, type Harness } from './harness.ts';

let h: Harness;
before(async () => {
  h = await startHarness();
  await h.app.ready();
});
after(() => h.close());

describe('GET /ui/', () => {
  test('the page is served without a token, with a CSP that allows exactly its import map', async () => {
    for (const url of ['/ui/', '/ui']) {
      const r = await h.app.inject({ method: 'GET', url });
      assert.equal(r.statusCode, 200, url);
      assert.match(String(r.headers['content-type']), /^text\/html/);
      assert.match(r.body, /<script type="importmap">/);
      const csp = String(r.headers['content-security-policy']);
      const map = /<script type="importmap">([\s\S]*?)<\/script>/.exec(r.body)![1]!;
      const hash = createHash('sha256').update(map).digest('base64');
      assert.match(csp, new RegExp(`script-src 'self' 'sha256-${hash.replace(/[+/]/g, '\\$&')}'`));
      assert.match(csp, /frame-ancestors 'none'/);
      assert.doesNotMatch(csp, /unsafe-inline'[^;]*;.*script|script-src[^;]*unsafe/);
      assert.equal(r.headers['x-content-type-options'], 'nosniff');
    }
  });

  test('its modules, styles and the vendor files of the import map are served locally', async () => {
    const index = readFileSync(join(WEB_ROOT, 'index.html'), 'utf8');
    const map = JSON.parse(/<script type="importmap">([\s\S]*?)<\/script>/.exec(index)![1]!) as { imports: Record<string, string> };
    const links = [...index.matchAll(/(?:href|src)="(\/ui\/[^"]+)"/g)].map((m) => m[1]!);
    for (const url of [...Object.values(map.imports), ...links, '/ui/app/pages/users.js']) {
      const r = await h.app.inject({ method: 'GET', url });
      assert.equal(r.statusCode, 200, url);
      assert.match(String(r.headers['content-type']), url.endsWith('.css') ? /^text\/css/ : /javascript/, url);
      assert.ok(r.body.length > 100, url);
    }
  });

  test('nothing outside web/ui and the vendor list: unknown names and traversal are 404', async () => {
    for (const url of [
      '/ui/vendor/x.mjs',
      '/ui/vendor/..%2F..%2Fpackage.json',
      '/ui/../package.json',
      '/ui/%2e%2e/%2e%2e/package.json',
      '/ui/app/nope.js',
    ]) {
      const r = await h.app.inject({ method: 'GET', url });
      assert.ok([403, 404].includes(r.statusCode), `${url}: ${r.statusCode}`);
      assert.doesNotMatch(r.body, /"dependencies"/, url);
    }
  });
});

describe('an install without web/ui', () => {
  test('the server still starts; /ui/ answers 503 naming what is missing', async () => {
    const app = Fastify();
    app.setErrorHandler((err, _req, reply) => {
      const r = toErrorReply(err);
      return reply.status(r.status).send(r.body);
    });
    registerDashboard(app, join(WEB_ROOT, 'not-there'));
    for (const url of ['/ui/', '/ui/app/main.js']) {
      const r = await app.inject({ method: 'GET', url });
      assert.equal(r.statusCode, 503, url);
      assert.equal(r.json().error.code, 'DASHBOARD_MISSING');
      assert.match(r.json().error.message, /not-there/);
    }
    await app.close();
  });
});

describe('GET /v1/stats', () => {
  test('needs the token: plain, percent-encoded and absolute-form targets', async () => {
    for (const url of ['/v1/stats', '/%76%31/stats', '/v1/%73tats', 'http://127.0.0.1/v1/stats']) {
      const r = await h.app.inject({ method: 'GET', url });
      assert.equal(r.statusCode, 401, url);
      assert.equal(r.json().error.code, 'UNAUTHORIZED');
    }
  });

  test('answers the series read from the metrics registry; unknown query fields are refused by name', async () => {
    h.metrics.bytesTotal.inc({ user: 'alice', direction: 'down' }, 4096);
    const r = await h.app.inject({ method: 'GET', url: '/v1/stats', headers: AUTH });
    assert.equal(r.statusCode, 200);
    const body = r.json() as { intervalMs: number; windowMs: number; points: unknown[]; totals: { bytesDown: number } };
    assert.equal(body.windowMs, 3_600_000);
    assert.ok(Array.isArray(body.points));
    assert.ok(body.totals.bytesDown >= 0);
    const bad = await h.app.inject({ method: 'GET', url: '/v1/stats?since=yesterday&x=1', headers: AUTH });
    assert.equal(bad.statusCode, 400);
    assert.match(bad.json().error.message, /query\.(since|x)/);
  });
});
