// Issue 23 items 5, 7, 8 and 9 against the real daemon, with real clients over real sockets: one customer
// could fill the shared sticky-session table (3,000 ids in 6.4 s) and a deleted user's sessions stayed listed;
// `listen.port` clashes were a 201 and an EADDRINUSE log line; users named `.` or `..` could be made and never
// removed; `0.0.0.0` and `[::]` (the local host) passed a 127.0.0.0/8 / ::1 rule.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, createServer, type Server } from 'node:net';
import { curl, startGateway, startTarget, testConfig, viaConnect, viaHttp, type Gateway, type Target } from './harness.ts';

const ALICE = 'alice';
const ALICE_PASS = 'alice-pass';
const basic = (user: string, pass: string) => `Proxy-Authorization: Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}\r\n`;

/** One CONNECT on a fresh connection: the status code and the body of a refusal. */
function connectVia(port: number, user: string, pass: string, target: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port });
    let text = '';
    s.setEncoding('latin1');
    const done = () => {
      s.destroy();
      const at = text.indexOf('\r\n\r\n');
      resolve({ status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1] ?? 0), body: at >= 0 ? text.slice(at + 4) : '' });
    };
    s.on('data', (d: string) => {
      text += d;
      const at = text.indexOf('\r\n\r\n');
      if (at >= 0 && /^HTTP\/1\.[01] 2/.test(text)) done();
    });
    s.on('error', reject);
    s.on('close', done);
    s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${basic(user, pass)}\r\n`);
  });
}

/** A SOCKS5 CONNECT written by hand: the reply code, or 'auth' when RFC 1929 failed. `host` as ATYP 3, or ATYP 4 for an IPv6 literal in brackets. */
function socksConnect(port: number, user: string, pass: string, host: string, targetPort: number): Promise<number | string> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port });
    const parts: Buffer[] = [];
    const done = (v: number | string) => {
      s.destroy();
      resolve(v);
    };
    s.on('error', () => done('error'));
    s.on('close', () => done('closed'));
    s.on('data', (d: Buffer) => {
      parts.push(d);
      const b = Buffer.concat(parts);
      if (b.length >= 4 && b[3] !== 0) done('auth');
      else if (b.length >= 6) done(b[5]!);
    });
    const u = Buffer.from(user);
    const p = Buffer.from(pass);
    let address: Buffer;
    if (host.startsWith('[')) {
      address = Buffer.concat([Buffer.from([4]), Buffer.alloc(16)]); // [::] only
      if (host !== '[::]') throw new Error('only [::] is spelled here');
    } else address = Buffer.concat([Buffer.from([3, host.length]), Buffer.from(host)]);
    s.write(
      Buffer.concat([
        Buffer.from([5, 1, 2]),
        Buffer.from([1, u.length]),
        u,
        Buffer.from([p.length]),
        p,
        Buffer.from([5, 1, 0]),
        address,
        Buffer.from([targetPort >> 8, targetPort & 0xff]),
      ]),
    );
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

describe('abuse bounds: sessions per user, ports, names, loopback spellings', () => {
  let gw: Gateway;
  let target: Target;
  before(async () => {
    [gw, target] = await Promise.all([startGateway({ config: { proxy: { maxSessionsPerUser: 3 } } }), startTarget()]);
  });
  after(async () => {
    await gw?.close();
    await target?.close();
  });

  const sessionsOf = async (user: string) =>
    (await gw.admin<{ user: string; sessionId: string }[]>('/v1/sessions')).body.filter((s) => s.user === user);

  test('a user holds at most proxy.maxSessionsPerUser sessions: a new id past it is 403 / SOCKS5 0x02 until older ones end', async () => {
    for (const id of ['s1', 's2', 's3'])
      assert.equal((await connectVia(gw.ports.http, `${ALICE}-session-${id}`, ALICE_PASS, `127.0.0.1:${target.port}`)).status, 200, id);
    const refused = await connectVia(gw.ports.http, `${ALICE}-session-s4`, ALICE_PASS, `127.0.0.1:${target.port}`);
    assert.equal(refused.status, 403);
    assert.match(refused.body, /too many sticky sessions \(proxy\.maxSessionsPerUser\)/);
    assert.equal(await socksConnect(gw.ports.socks5, `${ALICE}-session-s5`, ALICE_PASS, '127.0.0.1', target.port), 0x02);
    // Its own sessions go on; another user is not affected.
    assert.equal((await connectVia(gw.ports.http, `${ALICE}-session-s2`, ALICE_PASS, `127.0.0.1:${target.port}`)).status, 200);
    assert.equal((await connectVia(gw.ports.http, 'bob-session-b1', 'bob-pass', `127.0.0.1:${target.port}`)).status, 200);
    assert.equal((await sessionsOf(ALICE)).length, 3);
    // Once the older sessions end (sessTime 5 minutes on the gateway's clock), new ids are let in again.
    gw.clock.advance(5 * 60_000 + 1000);
    assert.equal((await connectVia(gw.ports.http, `${ALICE}-session-s4`, ALICE_PASS, `127.0.0.1:${target.port}`)).status, 200);
  });

  test("a deleted or disabled user's sessions are dropped at once", async () => {
    for (const name of ['dave', 'erin']) {
      const made = await gw.admin('/v1/users', { body: { name, password: `${name}-password`, mainAccount: 'shop1' } });
      assert.equal(made.status, 201, JSON.stringify(made.body));
      for (const id of ['x1', 'x2'])
        assert.equal(
          (await connectVia(gw.ports.http, `${name}-session-${id}`, `${name}-password`, `127.0.0.1:${target.port}`)).status,
          200,
        );
      assert.equal((await sessionsOf(name)).length, 2);
    }
    assert.equal((await gw.admin('/v1/users/dave', { method: 'DELETE' })).status, 204);
    assert.deepEqual(await sessionsOf('dave'), []);
    assert.equal((await gw.admin('/v1/users/erin', { method: 'PATCH', body: { enabled: false } })).status, 200);
    assert.deepEqual(await sessionsOf('erin'), []);
  });

  test("listen.port already taken is 409 PORT_IN_USE: a shared proxy port, another user's, another process's; a config clash names its key", async () => {
    const mk = (name: string, port: number) =>
      gw.admin<{ error: { code?: string; message?: string } }>('/v1/users', {
        body: { name, password: 'pw-123456', mainAccount: 'shop1', listen: { port, allowIps: ['127.0.0.1'] } },
      });
    for (const port of [gw.ports.http, gw.ports.socks5, gw.ports.admin]) {
      const r = await mk('clash1', port);
      assert.equal(r.status, 409, JSON.stringify(r.body));
      assert.equal(r.body.error.code, 'PORT_IN_USE');
    }
    const free = await freePort();
    assert.equal((await mk('porter', free)).status, 201);
    const again = await mk('clash2', free);
    assert.equal(again.status, 409);
    assert.match(again.body.error.message ?? '', /porter/);
    const other: Server = createServer();
    const taken = await new Promise<number>((resolve) =>
      other.listen(0, '127.0.0.1', () => resolve((other.address() as { port: number }).port)),
    );
    try {
      assert.equal((await mk('clash3', taken)).body.error.code, 'PORT_IN_USE');
      const patched = await gw.admin<{ error: { code?: string } }>('/v1/users/porter', {
        method: 'PATCH',
        body: { listen: { port: taken, allowIps: ['127.0.0.1'] } },
      });
      assert.equal(patched.status, 409);
      assert.equal(patched.body.error.code, 'PORT_IN_USE');
    } finally {
      other.close();
    }
    // Nothing of the refused users was kept.
    for (const name of ['clash1', 'clash2', 'clash3']) assert.equal((await gw.admin(`/v1/users/${name}`)).status, 404);
    const base = testConfig();
    assert.throws(
      () => testConfig({ proxy: { http: { port: 18080 } }, users: [{ ...base.users[0]!, listen: { port: 18080, allowIps: [] } }] }),
      /users\.0\.listen\.port.*proxy\.http\.port/s,
    );
  });

  test("user names '.' and '..' are 400; a dot inside a name is fine", async () => {
    for (const name of ['.', '..']) {
      const r = await gw.admin<{ error: { message?: string } }>('/v1/users', {
        body: { name, password: 'pw-123456', mainAccount: 'shop1' },
      });
      assert.equal(r.status, 400, name);
      assert.match(r.body.error.message ?? '', /URL path segment/);
    }
    assert.equal((await gw.admin('/v1/users', { body: { name: 'a.b', password: 'pw-123456', mainAccount: 'shop1' } })).status, 201);
    assert.equal((await gw.admin('/v1/users/a.b', { method: 'DELETE' })).status, 204);
    const base = testConfig();
    assert.throws(() => testConfig({ users: [{ ...base.users[0]!, name: '..' }] }), /users\.0\.name/);
  });

  test('a loopback rule (127.0.0.0/8, ::1) refuses every spelling of the local host, over HTTP and SOCKS5', async () => {
    const made = await gw.admin('/v1/users', {
      body: { name: 'guarded', password: 'guarded-pw', mainAccount: 'shop1', rules: { denyHosts: ['127.0.0.0/8', '::1'] } },
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const p = target.port;
    for (const host of ['0.0.0.0', '[::]', '[::ffff:127.0.0.1]', '0x7f.1', '0x7f000001', '127.0.0.2', 'localhost', '[::1]']) {
      const r = await connectVia(gw.ports.http, 'guarded', 'guarded-pw', `${host}:${p}`);
      assert.equal(r.status, 403, `CONNECT ${host}: ${r.status} ${r.body}`);
    }
    for (const url of [`http://0.0.0.0:${p}/`, `http://[::]:${p}/`, `http://127.1:${p}/`]) {
      const r = await curl([...viaHttp(gw.ports.http, 'guarded', 'guarded-pw'), url]);
      assert.equal(r.status, 403, `${url}: ${r.status}`);
    }
    for (const host of ['0.0.0.0', '[::]', 'localhost', '0x7f.1', '0x7f000001']) {
      assert.equal(await socksConnect(gw.ports.socks5, 'guarded', 'guarded-pw', host, p), 0x02, `SOCKS5 ${host}`);
    }
    // The rule is the user's: alice (no such rule) reaches the same target.
    const ok = await curl([...viaConnect(gw.ports.http, ALICE, ALICE_PASS), target.url('/ok')]);
    assert.equal(ok.status, 200, ok.stderr);
  });
});
