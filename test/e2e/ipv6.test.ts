// IPv6: every listener on [::1] (HTTP, SOCKS5, HTTPS, a user's own port), IPv6 targets through each way in
// (absolute URI `http://[::1]:p/`, CONNECT `[::1]:p`, SOCKS5 ATYP 4), destination rules and allow lists in both
// families. Real curl over real sockets; the target listens on ::1 only, so a body means the path was IPv6 end
// to end. ("::", every address, is not bound here: the tests stay on loopback.)
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { makeCa, type TestCa } from '../support/tls.ts';
import { curl, startGateway, type Gateway } from './harness.ts';

/** An HTTP server on ::1 only that answers with the peer address it saw. */
async function startV6Target(): Promise<{ server: Server; port: number; url: (path?: string) => string; seen: string[] }> {
  const seen: string[] = [];
  const server = createServer((req, res) => {
    seen.push(req.socket.remoteAddress ?? '');
    res.end(`v6 target saw ${req.socket.remoteAddress ?? ''}`);
  });
  await new Promise<void>((resolve) => server.listen({ port: 0, host: '::1', ipv6Only: true }, resolve));
  const port = (server.address() as AddressInfo).port;
  return { server, port, url: (path = '/') => `http://[::1]:${port}${path}`, seen };
}

describe('IPv6 listeners and targets', () => {
  let gw: Gateway;
  let ca: TestCa;
  let target: Awaited<ReturnType<typeof startV6Target>>;

  before(async () => {
    ca = await makeCa();
    const leaf = await ca.leaf('proxy');
    target = await startV6Target();
    gw = await startGateway({
      config: {
        proxy: {
          http: { host: '::1', port: 0 },
          socks5: { host: '::1', port: 0 },
          https: { host: '::1', port: 0, cert: leaf.certFile, key: leaf.keyFile },
        },
        users: [
          { name: 'alice', password: 'alice-pass', mainAccount: 'shop1', listen: { port: 0, allowIps: ['::1/128'] } },
          // carol may not reach IPv6 loopback; dave may reach nothing but it.
          { name: 'carol', password: 'carol-pass', mainAccount: 'shop1', rules: { denyHosts: ['::1/128'] } },
          { name: 'dave', password: 'dave-pass', mainAccount: 'shop1', rules: { allowHosts: ['::1/128'] } },
        ],
      },
    });
  });
  after(async () => {
    await gw?.close();
    await new Promise<void>((r) => {
      target?.server.closeAllConnections();
      target?.server.close(() => r());
    });
    ca?.cleanup();
  });

  const ways = () => [
    { name: 'curl -x http://[::1] (absolute URI)', args: (u: string) => ['-x', `http://${u}@[::1]:${gw.ports.http}`] },
    { name: 'curl -p -x http://[::1] (CONNECT [::1]:port)', args: (u: string) => ['-p', '-x', `http://${u}@[::1]:${gw.ports.http}`] },
    { name: 'curl -x socks5://[::1] (ATYP 4)', args: (u: string) => ['-x', `socks5://${u}@[::1]:${gw.ports.socks5}`] },
    { name: 'curl -x socks5h://[::1]', args: (u: string) => ['-x', `socks5h://${u}@[::1]:${gw.ports.socks5}`] },
    {
      name: 'curl --proxy https://[::1] (TLS listener)',
      args: (u: string) => ['--proxy', `https://${u}@[::1]:${gw.ports.https}`, '--proxy-cacert', ca.certFile],
    },
  ];

  test('every listener is bound on ::1', () => {
    for (const port of [gw.ports.http, gw.ports.socks5, gw.ports.https]) assert.ok(port && port > 0);
  });

  for (const i of [0, 1, 2, 3, 4]) {
    test(`an IPv6 target through ${['absolute URI', 'CONNECT', 'SOCKS5 ATYP 4', 'SOCKS5 (proxy resolves)', 'the TLS listener'][i]} on [::1]`, async () => {
      const way = ways()[i]!;
      const before = target.seen.length;
      const okBefore = await gw.metric('rotor_proxy_connections_total', { result: 'ok' });
      const r = await curl([...way.args('alice:alice-pass'), target.url('/')]);
      assert.equal(r.exitCode, 0, `${way.name}: ${r.stderr}`);
      assert.equal(r.status, 200);
      assert.match(r.body, /^v6 target saw ::1$/);
      assert.equal(target.seen.length, before + 1);
      // ... and through Rotor (the target on ::1 cannot tell an upstream from the client).
      assert.ok((await gw.metric('rotor_proxy_connections_total', { result: 'ok' })) > okBefore);
    });
  }

  test('destination rules in IPv6: a deny on ::1/128 refuses, an allow list of ::1/128 admits only it', async () => {
    for (const way of ways()) {
      const denied = await curl([...way.args('carol:carol-pass'), target.url('/')]);
      assert.notEqual(denied.exitCode === 0 && denied.status === 200, true, `${way.name}: carol must be refused`);
      const allowed = await curl([...way.args('dave:dave-pass'), target.url('/')]);
      assert.equal(allowed.status, 200, `${way.name}: ${allowed.stderr}`);
      // curl 7.88 checks an https://[::1] proxy's certificate against its IP SAN only when the target is an
      // IPv6 literal too (a curl bug): the IPv4 target is tried through the other listeners.
      if (way.name.includes('TLS')) continue;
      // Loopback rules name the host, not one spelling of it: 127.0.0.1 is the same loopback as ::1, so dave's
      // allow list admits it (nothing listens on port 9: the dial fails, the rules did not refuse).
      const sameHost = await curl([...way.args('dave:dave-pass'), 'http://127.0.0.1:9/']);
      assert.notEqual(sameHost.status, 403, `${way.name}: 127.0.0.1 is ::1's host`);
    }
    assert.equal(await gw.metric('rotor_proxy_connections_total', { result: 'not_allowed' }), 5);
  });

  test("a user's own port on ::1 admits ::1 from allowIps without credentials", async () => {
    const port = gw.daemon.userPorts.portOf('alice');
    assert.ok(port);
    for (const scheme of ['http', 'socks5']) {
      const r = await curl(['-x', `${scheme}://[::1]:${port}`, target.url('/')]);
      assert.equal(r.status, 200, `${scheme}: ${r.stderr}`);
      assert.match(r.body, /::1$/);
    }
  });
});
