// Issue 16: the admin and callback servers log with the daemon's pino logger. A route that throws produces
// an error line naming the route and the reason (redacted); requests are logged at debug; a callback
// handler that throws is logged too, and the platform is told to call again.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { buildAdminServer, buildCallbackServer } from '../../src/admin/index.ts';
import { captureLogger } from '../support/logger.ts';
import { AUTH, TOKEN, startHarness, type Harness } from './harness.ts';

let h: Harness;
before(async () => {
  h = await startHarness();
});
after(async () => {
  await h?.close();
});

const lines = (text: string): Record<string, unknown>[] =>
  text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);

test('a route that throws answers 500 and leaves an error line with the route and the reason', async () => {
  const log = captureLogger('debug');
  const secret = 'appSecret=0123456789abcdef user:hunter2@127.0.0.1:9000';
  const app = buildAdminServer(
    {
      ...h.deps,
      // The real service, its list() failing.
      connections: Object.assign(Object.create(h.deps.connections) as typeof h.deps.connections, {
        list: () => {
          throw new Error(`store exploded near socks5://${secret}`);
        },
      }),
    },
    { host: '127.0.0.1', token: TOKEN, logger: log.logger },
  );
  await app.listen({ host: '127.0.0.1', port: 0 });
  try {
    const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const res = await fetch(`${base}/v1/connections?limit=5`, { headers: AUTH });
    assert.equal(res.status, 500);
    const body = (await res.json()) as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'INTERNAL');
    assert.doesNotMatch(body.error.message, /hunter2/);
    const ok = await fetch(`${base}/v1/connections/active`, { headers: AUTH });
    assert.equal(ok.status, 200);
    const all = lines(log.text());
    const failed = all.find((l) => l.msg === 'admin route failed');
    assert.ok(failed, `an error line:\n${log.text()}`);
    assert.equal(failed.level, 50);
    assert.equal(failed.route, '/v1/connections');
    assert.equal(failed.status, 500);
    assert.match(JSON.stringify(failed.err), /store exploded/);
    assert.doesNotMatch(log.text(), /hunter2/, 'redacted');
    const request = all.find((l) => l.msg === 'admin request' && l.route === '/v1/connections/active');
    assert.equal(request?.level, 20, 'requests at debug');
  } finally {
    await app.close();
  }
});

test('a callback handler that throws is logged, and the platform is asked to call again', async () => {
  const log = captureLogger('debug');
  const app = buildCallbackServer(
    async () => {
      throw new Error('disk full');
    },
    { path: '/cb', logger: log.logger },
  );
  await app.listen({ host: '127.0.0.1', port: 0 });
  try {
    const res = await fetch(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}/cb?type=order&no=1&op=1`);
    assert.equal(res.status, 500);
    assert.notEqual(((await res.json()) as { code: string }).code, 'success');
    const line = lines(log.text()).find((l) => l.msg === 'callback handling failed; the platform will call again');
    assert.ok(line, log.text());
    assert.equal(line.level, 50);
    assert.equal(line.route, '/cb');
  } finally {
    await app.close();
  }
});
