// The sandbox's HTTP node reads one request head per connection and relays the rest raw to that first target. A
// client that kept the connection sent its second request — absolute form, with the node's Proxy-Authorization —
// straight to the target, which so learned the node's (a static instance's, a sub account's) credentials. The node
// now answers a plain request with `Connection: close` (the target's own Connection/Keep-Alive dropped), so a
// keep-alive client opens a new connection per request and the target never reads the node's credentials, even
// a target that keeps its connection whatever it is told. Real sockets: node:http's keep-alive Agent as the client.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, request } from 'node:http';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { startUpstreams } from '../../../src/sim/upstreams/index.ts';
import { poll } from '../../support/wait.ts';
import { StubAuthority } from './helpers.ts';

test("two requests through a keep-alive client: the target never reads the node's credentials; both answered", async (t) => {
  const authority = new StubAuthority();
  const upstreams = await startUpstreams({ authority, gatewayPorts: 1, handshakeTimeoutMs: 1000 });
  let seen = '';
  const held = new Set<Socket>();
  // Answers every head it reads, keeps its connection, says keep-alive.
  const target = createServer((s) => {
    held.add(s);
    s.on('error', () => undefined);
    s.on('data', (d: Buffer) => {
      seen += d.toString('latin1');
      s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\nKeep-Alive: timeout=30\r\n\r\nok');
    });
  });
  await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  t.after(async () => {
    agent.destroy();
    for (const s of held) s.destroy();
    await new Promise((r) => target.close(r));
    await upstreams.close();
  });
  const targetPort = (target.address() as AddressInfo).port;
  const user = upstreams.encodeUsername({ account: 'sub', productNo: 'P', sessionId: 's', sessTime: 5 });
  const auth = `Basic ${Buffer.from(`${user}:secret`).toString('base64')}`;
  const ask = (path: string): Promise<{ status: number; connection: string | undefined; body: string }> =>
    new Promise((resolve, reject) => {
      const req = request({
        host: '127.0.0.1',
        port: upstreams.gatewayPorts[0]!,
        path: `http://127.0.0.1:${targetPort}${path}`,
        headers: { host: `127.0.0.1:${targetPort}`, 'proxy-authorization': auth },
        agent,
        timeout: 10_000,
      });
      req.on('timeout', () => req.destroy(new Error('no answer')));
      req.on('error', reject);
      req.on('response', (res) => {
        let body = '';
        res.setEncoding('latin1');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body }));
      });
      req.end();
    });
  const one = await ask('/one');
  const two = await ask('/two');
  assert.deepEqual([one.status, one.body, two.status, two.body], [200, 'ok', 200, 'ok']);
  assert.equal(one.connection, 'close', "the node's answer closes the connection");
  assert.match(seen, /^GET \/one HTTP\/1\.1\r\n/);
  assert.match(seen, /GET \/two HTTP\/1\.1\r\n/, 'the second request reached the target in origin form, through a new connection');
  assert.doesNotMatch(seen, /proxy-authorization/i, "the target never reads the node's credentials");
});

test('an absolute-form Upgrade through the node: its 101 passes as sent (Connection: Upgrade) and the bytes after it flow', async (t) => {
  const authority = new StubAuthority();
  const upstreams = await startUpstreams({ authority, gatewayPorts: 1, handshakeTimeoutMs: 1000 });
  const held = new Set<Socket>();
  const target = createServer((s) => {
    held.add(s);
    s.on('error', () => undefined);
    let upgraded = false;
    s.on('data', (d: Buffer) => {
      if (!upgraded) {
        upgraded = true;
        s.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n');
        return;
      }
      s.write(`echo:${d.toString('latin1')}`);
    });
  });
  await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
  t.after(async () => {
    for (const s of held) s.destroy();
    await new Promise((r) => target.close(r));
    await upstreams.close();
  });
  const targetPort = (target.address() as AddressInfo).port;
  const user = upstreams.encodeUsername({ account: 'sub', productNo: 'P', sessionId: 's', sessTime: 5 });
  const auth = `Basic ${Buffer.from(`${user}:secret`).toString('base64')}`;
  const client = connect(upstreams.gatewayPorts[0]!, '127.0.0.1');
  t.after(() => client.destroy());
  let got = '';
  client.on('data', (d: Buffer) => {
    got += d.toString('latin1');
    if (got.includes('\r\n\r\n') && !got.includes('echo:')) client.write('ping');
  });
  client.write(
    `GET http://127.0.0.1:${targetPort}/ws HTTP/1.1\r\nHost: 127.0.0.1:${targetPort}\r\nProxy-Authorization: ${auth}\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n`,
  );
  await poll(() => (got.includes('echo:ping') ? true : undefined), { what: 'the echo after the 101', timeoutMs: 10_000, everyMs: 10 });
  assert.match(got, /^HTTP\/1\.1 101 Switching Protocols\r\n/);
  assert.match(got, /\r\nConnection: Upgrade\r\n/);
  assert.doesNotMatch(got, /Connection: close/);
});
