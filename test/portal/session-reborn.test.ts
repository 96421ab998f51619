// A portal session belongs to one customer, not to a name and a hash: a name deleted and made again is another
// customer, also when the new user's stored hash is the old one's (an imported hash, `rotor users import` /
// POST /v1/users/batch with passwordHash). Before, the session compared only the hash, so the deleted customer's
// browser read the new customer's usage, connections and endpoint lines. Real daemon, real HTTP.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { hashPasswordAsync } from '../../src/admission/password.ts';
import { startGateway, type Gateway } from '../e2e/harness.ts';

let gw: Gateway;

const call = (
  method: string,
  path: string,
  opts: { body?: unknown; cookie?: string } = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> =>
  new Promise((resolve, reject) => {
    const url = new URL(`${gw.adminUrl}${gw.config.portal.path}api/${path}`);
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method,
        agent: false,
        headers: { 'content-type': 'application/json', ...(opts.cookie ? { cookie: opts.cookie } : {}) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    req.end(opts.body === undefined ? undefined : JSON.stringify(opts.body));
  });

before(async () => {
  gw = await startGateway();
});
after(async () => {
  await gw?.close();
});

test('a name deleted and made again with the same stored hash: the old session is signed out', async () => {
  const password = 'reborn-pass-2468';
  const passwordHash = await hashPasswordAsync(password);
  const make = async (): Promise<void> => {
    const r = await gw.admin<{ created: number }>('/v1/users/batch', {
      body: { users: [{ name: 'reborn1', mainAccount: 'shop1', passwordHash }] },
    });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.created, 1, JSON.stringify(r.body));
  };
  await make();
  const login = await call('POST', 'login', { body: { user: 'reborn1', password } });
  assert.equal(login.status, 204, login.body);
  const cookie = /^(rotor_portal=[A-Za-z0-9_-]+)/.exec(String(login.headers['set-cookie']))![1]!;
  assert.equal((await call('GET', 'me', { cookie })).status, 200);
  assert.equal((await gw.admin('/v1/users/reborn1', { method: 'DELETE' })).status, 204);
  await make();
  const after = await call('GET', 'me', { cookie });
  assert.equal(after.status, 401, `the deleted customer's session reads the new one: ${after.status} ${after.body.slice(0, 120)}`);
  assert.equal((JSON.parse(after.body) as { error: { code: string } }).error.code, 'SIGNED_OUT');
  // The new customer signs in with its own session.
  assert.equal((await call('POST', 'login', { body: { user: 'reborn1', password } })).status, 204);
});
