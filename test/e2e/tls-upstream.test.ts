// Upstreams whose drawn line says https:// are dialed over TLS (src/proxy/dial-tls.ts): a Node TLS proxy in
// front of the target (CONNECT and absolute-URI forwarding inside TLS), reached through every listener with
// its certificate verified (pool.tls.caFile names the test CA); a proxy whose certificate is from another CA
// is refused (502, counted as a handshake failure, no byte to it in clear); a product in
// pool.tls.insecureProducts reaches that same proxy without the check, and says so in the log.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { createServer as createHttpsServer, type Server } from 'node:https';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { captureLogger } from '../support/logger.ts';
import { makeCa, type TestCa } from '../support/tls.ts';
import { curl, startGateway, startTarget, type Gateway, type Target } from './harness.ts';

const UP_AUTH = `Basic ${Buffer.from('up:up-pass').toString('base64')}`;

interface TlsProxy {
  server: Server;
  port: number;
  /** TLS connections established, and requests by kind. */
  stats: { tls: number; connect: number; forward: number; refusedAuth: number };
  close(): Promise<void>;
}

/** An HTTP proxy that speaks only TLS: CONNECT tunnels and absolute-URI requests, Basic up:up-pass. */
async function startTlsProxy(files: { certFile: string; keyFile: string }): Promise<TlsProxy> {
  const stats = { tls: 0, connect: 0, forward: 0, refusedAuth: 0 };
  const server = createHttpsServer({ cert: readFileSync(files.certFile), key: readFileSync(files.keyFile) });
  server.on('secureConnection', () => stats.tls++);
  server.on('connect', (req, socket: Socket, head: Buffer) => {
    if (req.headers['proxy-authorization'] !== UP_AUTH) {
      stats.refusedAuth++;
      socket.end('HTTP/1.1 407 Proxy Authentication Required\r\ncontent-length: 0\r\n\r\n');
      return;
    }
    stats.connect++;
    const [host, port] = [
      req.url!.slice(0, req.url!.lastIndexOf(':')).replace(/^\[|\]$/g, ''),
      Number(req.url!.slice(req.url!.lastIndexOf(':') + 1)),
    ];
    const out = connect({ host, port }, () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) out.write(head);
      out.pipe(socket);
      socket.pipe(out);
    });
    out.on('error', () => socket.destroy());
    socket.on('error', () => out.destroy());
  });
  server.on('request', (req, res) => {
    if (req.headers['proxy-authorization'] !== UP_AUTH) {
      stats.refusedAuth++;
      res.writeHead(407).end();
      return;
    }
    stats.forward++;
    const url = new URL(req.url!);
    const headers = { ...req.headers };
    delete headers['proxy-authorization'];
    const up = httpRequest({ host: url.hostname, port: url.port, path: url.pathname + url.search, method: req.method, headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    server,
    port: (server.address() as AddressInfo).port,
    stats,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('TLS to upstreams (https:// lines)', () => {
  let ca: TestCa;
  let other: TestCa;
  let good: TlsProxy;
  let bad: TlsProxy;
  let gw: Gateway;
  let target: Target;
  const logs = captureLogger();

  before(async () => {
    ca = await makeCa('Upstream CA');
    other = await makeCa('Some other CA');
    good = await startTlsProxy(await ca.leaf('good-upstream'));
    bad = await startTlsProxy(await other.leaf('bad-upstream'));
    target = await startTarget();
    const user = (name: string, product: string) => ({ name, password: `${name}-pass`, mainAccount: 'shop1', product, draw: 'pwd' });
    gw = await startGateway({
      daemon: { logger: logs.logger },
      config: {
        platform: {
          sandbox: {
            drawnLines: {
              'DYN-104-FLOW': [`https://up:up-pass@127.0.0.1:${good.port}`],
              'DYN-105-FLOW': [`https://up:up-pass@127.0.0.1:${bad.port}`],
              'DYN-104-IP': [`https://up:up-pass@127.0.0.1:${bad.port}`],
            },
          },
        },
        pool: { lowWater: 1, drawBatch: 1, tls: { caFile: ca.certFile, insecureProducts: ['DYN-104-IP'] } },
        users: [user('alice', 'DYN-104-FLOW'), user('bob', 'DYN-105-FLOW'), user('carol', 'DYN-104-IP')],
      },
    });
  });
  after(async () => {
    await gw?.close();
    await target?.close();
    await good?.close();
    await bad?.close();
    ca?.cleanup();
    other?.cleanup();
  });

  test('CONNECT, absolute-URI forwarding and SOCKS5 all reach the target through the verified TLS upstream', async () => {
    const vias: Array<[string, string[]]> = [
      ['CONNECT', ['-p', '-x', `http://alice:alice-pass@127.0.0.1:${gw.ports.http}`]],
      ['absolute URI', ['-x', `http://alice:alice-pass@127.0.0.1:${gw.ports.http}`]],
      ['SOCKS5', ['-x', `socks5h://alice:alice-pass@127.0.0.1:${gw.ports.socks5}`]],
    ];
    for (const [name, args] of vias) {
      const before = { ...good.stats };
      const r = await curl([...args, target.url('/hello')]);
      assert.equal(r.exitCode, 0, `${name}: ${r.stderr}`);
      assert.equal(r.status, 200, name);
      assert.equal(r.body, 'hello from target', name);
      assert.ok(good.stats.connect + good.stats.forward > before.connect + before.forward, `${name} went through the TLS upstream`);
    }
    assert.ok(good.stats.tls >= 1);
    assert.equal(good.stats.refusedAuth, 0);
  });

  test('an upstream whose certificate the CAs do not vouch for is refused: 502, a handshake failure, nothing sent to it', async () => {
    const failures = await gw.metric('rotor_upstream_failures_total', { reason: 'handshake' });
    const r = await curl(['-p', '-x', `http://bob:bob-pass@127.0.0.1:${gw.ports.http}`, target.url('/hello')]);
    assert.equal(r.status, 0);
    assert.match(r.stderr, /CONNECT tunnel failed, response 502/);
    assert.ok((await gw.metric('rotor_upstream_failures_total', { reason: 'handshake' })) > failures);
    assert.equal(bad.stats.connect + bad.stats.forward, 0, 'no request reached the refused upstream');
    assert.match(logs.text(), /"reason":"UNABLE_TO_[A-Z_]+","msg":"upstream TLS certificate refused"/, 'the reason is logged');
  });

  test('a product in pool.tls.insecureProducts reaches the same upstream unverified, and it is logged once', async () => {
    for (let i = 0; i < 2; i++) {
      const r = await curl(['-p', '-x', `http://carol:carol-pass@127.0.0.1:${gw.ports.http}`, target.url('/hello')]);
      assert.equal(r.status, 200, r.stderr);
    }
    assert.ok(bad.stats.connect >= 2);
    const warned = logs
      .text()
      .split('\n')
      .filter((l) => l.includes('upstream TLS certificate not verified'));
    assert.equal(warned.length, 1);
  });
});
