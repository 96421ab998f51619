// The admin server around the routes: probes, metrics, OpenAPI, the error catalogue's mapping of transport
// and internal failures, the token rule; and the platform-callback server.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { AdminConfigError, buildAdminServer, buildCallbackServer, createReadiness } from '../../src/admin/index.ts';
import { PlatformClient } from '../../src/platform/client.ts';
import { captureLogger } from '../support/logger.ts';
import { openTestStore } from '../support/store.ts';
import { AUTH, US, startHarness, waitFor, type Harness } from './harness.ts';
import { freePort as deadPort } from '../support/ports.ts';

let h: Harness;
before(async () => {
  h = await startHarness();
});
after(async () => {
  await h.close();
});

describe('probes', () => {
  test('GET /healthz answers without a token', async () => {
    const r = await h.app.inject({ method: 'GET', url: '/healthz' });
    assert.equal(r.statusCode, 200);
    assert.deepEqual(r.json(), { status: 'ok' });
  });

  test('GET /readyz: 200 when platform, store and listeners are up; 503 naming the one that is not', async () => {
    const up = await h.app.inject({ method: 'GET', url: '/readyz' });
    assert.equal(up.statusCode, 200);
    assert.deepEqual(up.json(), { ready: true, checks: { platform: true, store: true, listeners: true } });
    h.listeners.up = false;
    try {
      const down = await h.app.inject({ method: 'GET', url: '/readyz' });
      assert.equal(down.statusCode, 503);
      assert.deepEqual(down.json(), { ready: false, checks: { platform: true, store: true, listeners: false } });
    } finally {
      h.listeners.up = true;
    }
  });

  test('readiness really probes: an unreachable platform and a closed store are reported', async () => {
    const dead = new PlatformClient({
      baseUrl: `http://127.0.0.1:${await deadPort()}`,
      appKey: h.sim.appKey,
      appSecret: h.sim.appSecret,
      retries: 0,
      timeoutMs: 1000,
    });
    const closed = await openTestStore();
    await closed.close();
    const ready = createReadiness({
      probePlatform: () => dead.call('GetAppInfo', {}),
      probeStore: () => closed.kvGet('x'),
      listenersUp: () => true,
    });
    const app = buildAdminServer({ ...h.deps, ready }, { host: '127.0.0.1' });
    try {
      const r = await app.inject({ method: 'GET', url: '/readyz' });
      assert.equal(r.statusCode, 503);
      assert.deepEqual(r.json().checks, { platform: false, store: false, listeners: true });
    } finally {
      await app.close();
      dead.close();
    }
  });

  test('the platform answer is cached for platformCacheMs and concurrent probes share one call', async () => {
    let calls = 0;
    let now = 1_000;
    const ready = createReadiness({
      probePlatform: async () => {
        calls += 1;
        return h.client.call('GetAppInfo', {});
      },
      probeStore: () => h.store.kvGet('x'),
      listenersUp: () => true,
      platformCacheMs: 5_000,
      now: () => now,
    });
    await Promise.all([ready(), ready(), ready()]);
    assert.equal(calls, 1);
    now += 4_999;
    assert.equal((await ready()).platform, true);
    assert.equal(calls, 1);
    now += 2;
    await ready();
    assert.equal(calls, 2);
  });

  test('GET /metrics: Prometheus text from the registry, without a token', async () => {
    await h.app.inject({ method: 'GET', url: '/v1/app', headers: AUTH });
    const r = await h.app.inject({ method: 'GET', url: '/metrics' });
    assert.equal(r.statusCode, 200);
    assert.match(String(r.headers['content-type']), /^text\/plain/);
    assert.match(r.body, /^# HELP rotor_platform_requests_total /m);
    assert.match(r.body, /rotor_platform_requests_total\{operation="GetAppInfo",code="200"\} \d+/);
    assert.match(r.body, /rotor_user_limit_bytes\{user="bob"\}/);
  });

  test('GET /docs/json: an OpenAPI document listing every /v1 route with the bearer scheme', async () => {
    const r = await h.app.inject({ method: 'GET', url: '/docs/json' });
    assert.equal(r.statusCode, 200);
    const doc = r.json() as {
      openapi: string;
      paths: Record<string, Record<string, { security?: unknown[]; requestBody?: unknown }>>;
      components: { securitySchemes: Record<string, unknown> };
    };
    assert.match(doc.openapi, /^3\./);
    assert.ok(doc.components.securitySchemes.bearer);
    const expected: [string, string][] = [
      ['/v1/app', 'get'],
      ['/v1/areas', 'get'],
      ['/v1/cities', 'get'],
      ['/v1/projects', 'get'],
      ['/v1/products', 'get'],
      ['/v1/products/{productNo}', 'get'],
      ['/v1/products/{productNo}/areas', 'get'],
      ['/v1/orders/open', 'post'],
      ['/v1/orders/renew', 'post'],
      ['/v1/orders/release', 'post'],
      ['/v1/orders/aftersale', 'post'],
      ['/v1/orders/assign-ip', 'post'],
      ['/v1/orders', 'get'],
      ['/v1/orders/{no}', 'get'],
      ['/v1/instances', 'get'],
      ['/v1/instances/{instanceNo}', 'get'],
      ['/v1/instances/{instanceNo}/change', 'post'],
      ['/v1/instances/reset-password', 'post'],
      ['/v1/assign-ip/{ip}', 'get'],
      ['/v1/accounts', 'post'],
      ['/v1/accounts/{name}/auth', 'post'],
      ['/v1/accounts/{name}/balance', 'get'],
      ['/v1/accounts/{name}/flow-log', 'get'],
      ['/v1/accounts/{name}/return', 'post'],
      ['/v1/sub-accounts', 'post'],
      ['/v1/sub-accounts/{name}', 'get'],
      ['/v1/sub-accounts/{name}/limit', 'put'],
      ['/v1/whitelist', 'get'],
      ['/v1/whitelist', 'post'],
      ['/v1/whitelist', 'delete'],
      ['/v1/users', 'get'],
      ['/v1/users/{name}/limit', 'put'],
      ['/v1/pools', 'get'],
      ['/v1/sessions', 'get'],
      ['/v1/sessions/{user}/{id}', 'delete'],
      ['/v1/platform/GetAppInfo', 'post'],
      ['/v1/platform/DrawByPwd', 'post'],
      ['/healthz', 'get'],
      ['/readyz', 'get'],
      ['/metrics', 'get'],
    ];
    for (const [path, method] of expected) assert.ok(doc.paths[path]?.[method], `${method.toUpperCase()} ${path} documented`);
    assert.deepEqual(doc.paths['/v1/app']!.get!.security, [{ bearer: [] }]);
    assert.ok(doc.paths['/v1/orders/renew']!.post!.requestBody, 'request bodies documented');
    assert.equal(doc.paths['/v1/platform/{operation}'], undefined, 'the catch-all is hidden');
    // Users as data: every route documented with an operationId.
    const userRoutes: [string, string, string][] = [
      ['/v1/users', 'get', 'listUsers'],
      ['/v1/users', 'post', 'createUser'],
      ['/v1/users/{name}', 'get', 'getUser'],
      ['/v1/users/{name}', 'patch', 'patchUser'],
      ['/v1/users/{name}', 'delete', 'deleteUser'],
      ['/v1/users/{name}/password', 'post', 'setUserPassword'],
      ['/v1/users/{name}/limit', 'put', 'setUserLimit'],
    ];
    for (const [path, method, id] of userRoutes) {
      const op = doc.paths[path]?.[method] as { operationId?: string; security?: unknown[] } | undefined;
      assert.equal(op?.operationId, id, `${method.toUpperCase()} ${path} operationId`);
      assert.deepEqual(op?.security, [{ bearer: [] }]);
    }
    assert.ok(doc.paths['/v1/users']!.post!.requestBody, 'the create body is documented');
  });
});

describe('error mapping and the token rule', () => {
  test('platform unreachable → 503 PLATFORM_UNREACHABLE; an unexpected failure → 500 INTERNAL that leaks nothing', async () => {
    const dead = new PlatformClient({
      baseUrl: `http://127.0.0.1:${await deadPort()}`,
      appKey: h.sim.appKey,
      appSecret: h.sim.appSecret,
      retries: 0,
      timeoutMs: 1000,
    });
    const broken = {
      ...h.deps,
      platform: dead,
      users: {
        ...h.deps.users,
        list: () => {
          throw new Error('database file /secret/path is corrupt');
        },
      },
    };
    const app = buildAdminServer(broken, { host: '127.0.0.1', token: 'tok' });
    try {
      const r = await app.inject({ method: 'GET', url: '/v1/app', headers: { authorization: 'Bearer tok' } });
      assert.equal(r.statusCode, 503);
      assert.equal(r.json().error.code, 'PLATFORM_UNREACHABLE');
      assert.equal(r.json().error.platformCode, undefined);
      const i = await app.inject({ method: 'GET', url: '/v1/users', headers: { authorization: 'Bearer tok' } });
      assert.equal(i.statusCode, 500);
      assert.deepEqual(i.json(), { error: { code: 'INTERNAL', message: 'internal error' } });
    } finally {
      await app.close();
      dead.close();
    }
  });

  test('platform refusal → 502 with platformCode', async () => {
    h.sim.faults.failNext(2, 'GetAppInfo');
    const r = await h.app.inject({ method: 'GET', url: '/v1/app', headers: AUTH });
    h.sim.faults.reset();
    assert.equal(r.statusCode, 502);
    assert.equal(r.json().error.code, 'PLATFORM_ERROR');
    assert.equal(r.json().error.platformCode, 500);
  });

  test('no token: refused off loopback, open on loopback', async () => {
    assert.throws(
      () => buildAdminServer(h.deps, { host: '0.0.0.0' }),
      (e: unknown) => e instanceof AdminConfigError && e.key === 'admin.token',
    );
    assert.throws(() => buildAdminServer(h.deps, { host: '192.0.2.1', token: '' }), AdminConfigError);
    const open = buildAdminServer(h.deps, { host: '::1' });
    try {
      const r = await open.inject({ method: 'GET', url: '/v1/users' });
      assert.equal(r.statusCode, 200);
    } finally {
      await open.close();
    }
    const guarded = buildAdminServer(h.deps, { host: '0.0.0.0', token: 'long-enough-token' });
    try {
      assert.equal((await guarded.inject({ method: 'GET', url: '/v1/users' })).statusCode, 401);
      assert.equal(
        (await guarded.inject({ method: 'GET', url: '/v1/users', headers: { authorization: 'bearer long-enough-token' } })).statusCode,
        200,
      );
    } finally {
      await guarded.close();
    }
  });

  test('the server listens for real on loopback', async () => {
    const app = buildAdminServer(h.deps, { host: '127.0.0.1', token: 'tok' });
    await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const port = (app.server.address() as AddressInfo).port;
      const res = await fetch(`http://127.0.0.1:${port}/v1/users`, { headers: { authorization: 'Bearer tok' } });
      assert.equal(res.status, 200);
      assert.equal(((await res.json()) as unknown[]).length, 2);
    } finally {
      await app.close();
    }
  });
});

describe('a failed accept on a listening admin or callback server', () => {
  test('is logged, not thrown; both servers still answer', async () => {
    const { logger, text } = captureLogger('warn');
    const admin = buildAdminServer(h.deps, { host: '127.0.0.1', token: 'tok', logger });
    const callbacks = buildCallbackServer(async () => ({ status: 200, body: { code: 'success', msg: 'ok' } }), { path: '/cb', logger });
    try {
      for (const app of [admin, callbacks]) {
        await app.listen({ host: '127.0.0.1', port: 0 });
        const emfile = Object.assign(new Error('accept EMFILE'), { code: 'EMFILE', syscall: 'accept' });
        assert.doesNotThrow(() => app.server.emit('error', emfile));
      }
      assert.match(text(), /admin server could not accept a connection/);
      assert.match(text(), /callback server could not accept a connection/);
      const adminPort = (admin.server.address() as AddressInfo).port;
      assert.equal((await fetch(`http://127.0.0.1:${adminPort}/healthz`)).status, 200);
      const cbPort = (callbacks.server.address() as AddressInfo).port;
      assert.deepEqual(await (await fetch(`http://127.0.0.1:${cbPort}/cb?type=order&no=1`)).json(), { code: 'success', msg: 'ok' });
    } finally {
      await admin.close();
      await callbacks.close();
    }
  });
});

describe('platform callbacks', () => {
  test('a real callback from the platform is recorded; a repeat answers success; garbage gets 400', async () => {
    const placed = await h.app.inject({ method: 'POST', url: '/v1/orders/open', headers: AUTH, payload: { productNo: US, count: 1 } });
    assert.equal(placed.statusCode, 202);
    const orderNo = placed.json().orderNo as string;
    // The safety timeout is generous (a loaded machine once took more than 8 s); a miss says what the sandbox sent
    // and what Rotor stored, so a lost callback is told apart from a slow one.
    const recorded = await waitFor(
      async () => (await h.store.listCallbacks()).find((c) => c.type === 'order' && c.no === orderNo && c.processed),
      30_000,
      'order callback',
    ).catch(async (err: unknown) => {
      const sent = h.sim.inspect.callbacks({ type: 'order', no: orderNo });
      const stored = (await h.store.listCallbacks()).filter((c) => c.no === orderNo);
      throw new Error(`${(err as Error).message}; the sandbox sent ${JSON.stringify(sent)}; stored ${JSON.stringify(stored)}`);
    });
    assert.equal(recorded.op, '1');

    const port = (h.callbacks.server.address() as AddressInfo).port;
    const repeat = await fetch(`http://127.0.0.1:${port}/callback?type=order&no=${orderNo}&op=1`);
    assert.equal(repeat.status, 200);
    assert.deepEqual(await repeat.json(), { code: 'success', msg: 'ok' });
    const again = (await h.store.listCallbacks()).find((c) => c.type === 'order' && c.no === orderNo);
    assert.ok(again && again.count >= 2);

    for (const q of [
      '',
      '?type=bogus&no=1',
      '?type=order',
      '?type=order&no=a&no=b',
      '?type=order&no=%00%01',
      '?type=instance&no=' + 'x'.repeat(500),
    ]) {
      const r = await h.callbacks.inject({ method: 'GET', url: `/callback${q}` });
      assert.equal(r.statusCode, 400, q);
      assert.notEqual(r.json().code, 'success', q);
    }
    const wrongPath = await h.callbacks.inject({ method: 'GET', url: '/elsewhere?type=order&no=1&op=1' });
    assert.equal(wrongPath.statusCode, 404);
    assert.notEqual(wrongPath.json().code, 'success');
    const post = await h.callbacks.inject({ method: 'POST', url: '/callback', payload: { type: 'order' } });
    assert.equal(post.statusCode, 404);
    const bad = (await h.metrics.callbacks.get()).values.filter((v) => v.labels.result !== 'ok' && v.labels.result !== 'duplicate');
    assert.ok(bad.length > 0, 'malformed callbacks are counted');
  });

  test('a handler that fails answers 500 with a code other than success (the platform calls again); the server survives', async () => {
    let n = 0;
    const app = buildCallbackServer(
      async () => {
        n += 1;
        if (n === 1) throw new Error('store is locked');
        return { status: 200, body: { code: 'success', msg: 'ok' } };
      },
      { path: '/cb' },
    );
    try {
      const first = await app.inject({ method: 'GET', url: '/cb?type=order&no=1&op=1' });
      assert.equal(first.statusCode, 500);
      assert.deepEqual(first.json(), { code: 'error', msg: 'not recorded, call again' });
      const second = await app.inject({ method: 'GET', url: '/cb?type=order&no=1&op=1' });
      assert.equal(second.statusCode, 200);
      assert.equal(second.json().code, 'success');
    } finally {
      await app.close();
    }
  });
});
