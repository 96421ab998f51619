// GET /v1/bans and DELETE /v1/bans/:id over real sockets, behind the admin token like every /v1 route
// (plain, percent-encoded and absolute-form targets without the token get 401 and lift nothing), and a
// user's requestRules through POST / PATCH / GET /v1/users (stored, returned, refused when malformed).
import assert from 'node:assert/strict';
import { connect, type AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { buildAdminServer } from '../../src/admin/index.ts';
import { BanTable } from '../../src/proxy/request-bans.ts';
import { AUTH, TOKEN, startHarness, type Harness } from './harness.ts';

function raw(
  port: number,
  method: string,
  target: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const lines = [`${method} ${target} HTTP/1.1`, `Host: 127.0.0.1:${port}`, 'Connection: close'];
    for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
    if (body !== undefined) lines.push('Content-Type: application/json', `Content-Length: ${Buffer.byteLength(body)}`);
    const s = connect(port, '127.0.0.1', () => s.write(`${lines.join('\r\n')}\r\n\r\n${body ?? ''}`));
    let got = '';
    s.on('data', (d: Buffer) => (got += d.toString('utf8')));
    s.on('error', reject);
    s.on('close', () => {
      const at = got.indexOf('\r\n\r\n');
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(got)?.[1] ?? 0), body: at >= 0 ? got.slice(at + 4) : '' });
    });
  });
}

describe("admin API: bans and users' request rules", () => {
  let h: Harness;
  let app: FastifyInstance;
  let port: number;
  const clock = { t: 1_900_000_000_000 };
  const bans = new BanTable({ now: () => clock.t });
  const exit = { id: 'socks5://u@127.0.0.9:1080', protocol: 'socks5' as const, host: '127.0.0.9', port: 1080, source: 'pwd' as const };

  before(async () => {
    h = await startHarness();
    app = buildAdminServer({ ...h.deps, bans }, { host: '127.0.0.1', token: TOKEN });
    await app.listen({ host: '127.0.0.1', port: 0 });
    port = (app.server.address() as AddressInfo).port;
  });
  after(async () => {
    await app.close();
    await h.close();
  });

  test('GET /v1/bans lists the bans in force (soonest first, ?user=), DELETE lifts one; without the token: 401 and nothing lifted', async () => {
    const a = bans.add('alice', exit, null, 600_000, 'user#0')!;
    const b = bans.add('bob', exit, 'shop.example', 60_000, 'proxy#1')!;
    const list = await raw(port, 'GET', '/v1/bans', AUTH);
    assert.equal(list.status, 200);
    const items = JSON.parse(list.body) as Array<Record<string, unknown>>;
    assert.deepEqual(
      items.map((x) => x.id),
      [b.id, a.id],
    );
    assert.equal(items[0]!.host, 'shop.example');
    assert.equal(items[1]!.until, new Date(clock.t + 600_000).toISOString());
    assert.equal(items[1]!.exit, '127.0.0.9');
    assert.equal(JSON.stringify(items).includes('password'), false);
    const mine = JSON.parse((await raw(port, 'GET', '/v1/bans?user=alice', AUTH)).body) as unknown[];
    assert.equal(mine.length, 1);

    for (const target of [`/v1/bans/${a.id}`, `/%76%31/bans/${a.id}`, `http://127.0.0.1:${port}/v1/bans/${a.id}`]) {
      assert.equal((await raw(port, 'DELETE', target)).status, 401, target);
      assert.equal((await raw(port, 'GET', target.replace(`/${a.id}`, ''))).status, 401, target);
    }
    assert.equal(bans.list().length, 2, 'nothing lifted without the token');
    assert.equal((await raw(port, 'DELETE', `/v1/bans/${a.id}`, AUTH)).status, 204);
    assert.equal((await raw(port, 'DELETE', `/v1/bans/${a.id}`, AUTH)).status, 404);
    // review17 #5: an id that is not of the b<n> form was a 400; README: 404 when none.
    assert.equal((await raw(port, 'DELETE', '/v1/bans/nope', AUTH)).status, 404);
    assert.deepEqual(
      bans.list().map((x) => x.id),
      [b.id],
    );
    // A ban ends by itself on the clock.
    clock.t += 60_001;
    assert.deepEqual(JSON.parse((await raw(port, 'GET', '/v1/bans', AUTH)).body), []);
  });

  test("a user's requestRules: created, returned, patched, and a malformed rule refused with 400", async () => {
    const rule = { status: [403], action: 'retry_ban', banSeconds: 600 };
    const created = await raw(
      port,
      'POST',
      '/v1/users',
      AUTH,
      JSON.stringify({ name: 'ruled', mainAccount: 'shop1', password: 'ruled-pass-1', requestRules: [rule] }),
    );
    assert.equal(created.status, 201, created.body);
    const view = JSON.parse(created.body) as { requestRules: Array<Record<string, unknown>> };
    assert.equal(view.requestRules.length, 1);
    assert.equal(view.requestRules[0]!.action, 'retry_ban');
    assert.equal(view.requestRules[0]!.retries, 1, 'defaults filled');
    assert.equal(h.users.get('ruled')?.requestRules?.length, 1, 'the gateway sees the rules');
    const patched = await raw(
      port,
      'PATCH',
      '/v1/users/ruled',
      AUTH,
      JSON.stringify({ requestRules: [{ name: 'slow', timeoutMs: 3000, action: 'tag' }] }),
    );
    assert.equal(patched.status, 200, patched.body);
    const got = JSON.parse((await raw(port, 'GET', '/v1/users/ruled', AUTH)).body) as { requestRules: Array<Record<string, unknown>> };
    assert.equal(got.requestRules[0]!.name, 'slow');
    const bad = await raw(port, 'PATCH', '/v1/users/ruled', AUTH, JSON.stringify({ requestRules: [{ action: 'retry' }] }));
    assert.equal(bad.status, 400, bad.body);
    // A body pattern: kept and returned; an invalid or costly one refused with a 400 that names the key.
    const withBody = await raw(
      port,
      'PATCH',
      '/v1/users/ruled',
      AUTH,
      JSON.stringify({ requestRules: [{ name: 'captcha', body: 'captcha|robot', bodyBytes: 4096, action: 'retry_ban' }] }),
    );
    assert.equal(withBody.status, 200, withBody.body);
    const seen = JSON.parse((await raw(port, 'GET', '/v1/users/ruled', AUTH)).body) as { requestRules: Array<Record<string, unknown>> };
    assert.equal(seen.requestRules[0]!.body, 'captcha|robot');
    assert.equal(seen.requestRules[0]!.bodyBytes, 4096);
    for (const body of ['(a+)+$', 'captcha(']) {
      const refused = await raw(port, 'PATCH', '/v1/users/ruled', AUTH, JSON.stringify({ requestRules: [{ body, action: 'tag' }] }));
      assert.equal(refused.status, 400, refused.body);
      assert.match(refused.body, /requestRules[.[/]0[.\]/]+body/, refused.body);
      assert.match(refused.body, /body pattern refused/);
    }
    assert.equal(h.users.get('ruled')?.requestRules?.[0]?.body, 'captcha|robot', 'a refused change leaves the rules as they were');
    const cleared = await raw(port, 'PATCH', '/v1/users/ruled', AUTH, JSON.stringify({ requestRules: [] }));
    assert.equal(cleared.status, 200);
    assert.equal(h.users.get('ruled')?.requestRules ?? null, null, 'no rules: nothing on the path');
  });
});
