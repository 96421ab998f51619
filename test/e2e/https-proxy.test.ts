// The HTTP proxy over TLS (proxy.https): curl --proxy https:// with --proxy-cacert (absolute URI and CONNECT),
// a Python client speaking TLS to the proxy (http.client, and urllib3 2's HTTPS-proxy support that requests
// uses), headless Chromium with --proxy-server=https://, the plain listener's users, rules and refusals, TLS
// 1.2+ only, and a new certificate taken on reload (what SIGHUP runs). Certificates come from openssl.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect, type PeerCertificate } from 'node:tls';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';
import { CHROMIUM, CHROMIUM_ARGS } from '../support/browser.ts';
import { makeCa, type TestCa } from '../support/tls.ts';
import { curl, startGateway, startTarget, type Gateway, type Target } from './harness.ts';

const execFileP = promisify(execFile);

/** The leaf the proxy presents now (its fingerprint), and the protocol negotiated. */
function peerOf(
  port: number,
  ca: string,
  options: { maxVersion?: 'TLSv1.2' | 'TLSv1.3' } = {},
): Promise<{ cert: PeerCertificate; protocol: string | null }> {
  return new Promise((resolve, reject) => {
    const s = tlsConnect({ host: '127.0.0.1', port, ca, servername: 'localhost', ...options }, () => {
      const r = { cert: s.getPeerCertificate(), protocol: s.getProtocol() };
      s.destroy();
      resolve(r);
    });
    s.once('error', reject);
  });
}

const PYTHON = String.raw`
import http.client, socket, ssl, sys, base64, json
import urllib3
port, ca, target_port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
auth = 'Basic ' + base64.b64encode(b'alice:alice-pass').decode()
ctx = ssl.create_default_context(cafile=ca)
out = {}
# 1. plain HTTP through the TLS proxy: an absolute-URI request on a TLS connection to the proxy
c = http.client.HTTPSConnection('127.0.0.1', port, context=ctx, timeout=30)
c.request('GET', 'http://127.0.0.1:%d/ip' % target_port, headers={'Proxy-Authorization': auth})
r = c.getresponse()
out['absolute'] = [r.status, r.read().decode()]
out['tls'] = c.sock.version()
c.close()
# 2. CONNECT over the TLS connection, then HTTP inside the tunnel
raw = socket.create_connection(('127.0.0.1', port), timeout=30)
s = ctx.wrap_socket(raw, server_hostname='127.0.0.1')
s.sendall(('CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nProxy-Authorization: %s\r\n\r\n' % (target_port, target_port, auth)).encode())
f = s.makefile('rb')
status = f.readline().split()[1].decode()
while f.readline() not in (b'\r\n', b''):
    pass
s.sendall(b'GET /ip HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n')
body = f.read().decode().split('\r\n\r\n', 1)[1]
out['connect'] = [int(status), body]
s.close()
# 3. urllib3 2 (what requests uses): an HTTPS proxy with its own CA
# (an http:// target goes to the proxy in absolute form over a TLS pool to the proxy: ca_certs verifies it)
pm = urllib3.ProxyManager('https://127.0.0.1:%d' % port, proxy_headers=urllib3.make_headers(proxy_basic_auth='alice:alice-pass'), proxy_ssl_context=ctx, ca_certs=ca)
r = pm.request('GET', 'http://127.0.0.1:%d/ip' % target_port, retries=False)
out['urllib3'] = [r.status, r.data.decode()]
print(json.dumps(out))
`;

describe('the HTTP proxy over TLS (proxy.https)', () => {
  let ca: TestCa;
  let other: TestCa;
  let leaf: { certFile: string; keyFile: string };
  let gw: Gateway;
  let target: Target;
  let port: number;
  const proxy = () => `https://alice:alice-pass@127.0.0.1:${port}`;

  before(async () => {
    ca = await makeCa('Rotor Test CA');
    other = await makeCa('Another CA');
    leaf = await ca.leaf('proxy');
    gw = await startGateway({ config: { proxy: { https: { host: '127.0.0.1', port: 0, cert: leaf.certFile, key: leaf.keyFile } } } });
    target = await startTarget();
    port = gw.ports.https!;
    assert.ok(port > 0);
  });
  after(async () => {
    await target?.close();
    await gw?.close();
    ca?.cleanup();
    other?.cleanup();
  });

  test('curl --proxy https:// --proxy-cacert: plain HTTP (absolute URI) reaches the target through an upstream', async () => {
    const r = await curl(['--proxy', proxy(), '--proxy-cacert', ca.certFile, target.url('/ip')]);
    assert.equal(r.exitCode, 0, r.stderr);
    assert.equal(r.status, 200);
    assert.ok(gw.exits.includes(r.body), `the target saw an upstream exit: ${r.body}`);
  });

  test('curl --proxy https:// -p: a CONNECT tunnel inside the TLS connection', async () => {
    const r = await curl(['-p', '--proxy', proxy(), '--proxy-cacert', ca.certFile, target.url('/ip')]);
    assert.equal(r.exitCode, 0, r.stderr);
    assert.equal(r.status, 200);
    assert.ok(gw.exits.includes(r.body), r.body);
  });

  test('the same users and refusals as the plain listener: 407 without or with wrong credentials, 403 on a denied port', async () => {
    const none = await curl(['--proxy', `https://127.0.0.1:${port}`, '--proxy-cacert', ca.certFile, target.url('/ip')]);
    assert.equal(none.status, 407);
    const wrong = await curl(['--proxy', `https://alice:nope@127.0.0.1:${port}`, '--proxy-cacert', ca.certFile, target.url('/ip')]);
    assert.equal(wrong.status, 407);
    // proxy.rules denies port 25 by default (config/default.yaml).
    const denied = await curl(['--proxy', proxy(), '--proxy-cacert', ca.certFile, 'http://127.0.0.1:25/']);
    assert.equal(denied.status, 403);
  });

  test('a client that does not trust the certificate fails its handshake; nothing is proxied', async () => {
    const r = await curl(['--proxy', proxy(), '--proxy-cacert', other.certFile, target.url('/ip')]);
    assert.notEqual(r.exitCode, 0);
    assert.match(r.stderr, /certificate|SSL/i);
  });

  test('TLS 1.2 and 1.3 are served; plain HTTP on the TLS port is not', async () => {
    assert.equal((await peerOf(port, ca.certPem(), { maxVersion: 'TLSv1.2' })).protocol, 'TLSv1.2');
    assert.equal((await peerOf(port, ca.certPem())).protocol, 'TLSv1.3');
    const plain = await curl(['--proxy', `http://alice:alice-pass@127.0.0.1:${port}`, target.url('/ip')], { maxTimeS: 15 });
    assert.notEqual(plain.status, 200);
  });

  test('a Python client: http.client over TLS (absolute URI and CONNECT) and urllib3 HTTPS proxy', async () => {
    const { stdout } = await execFileP('python3', ['-c', PYTHON, String(port), ca.certFile, String(target.port)], { timeout: 60_000 });
    const out = JSON.parse(stdout) as { absolute: [number, string]; connect: [number, string]; urllib3: [number, string]; tls: string };
    assert.equal(out.absolute[0], 200);
    assert.ok(gw.exits.includes(out.absolute[1]), out.absolute[1]);
    assert.equal(out.connect[0], 200);
    assert.ok(gw.exits.includes(out.connect[1]), out.connect[1]);
    assert.equal(out.urllib3[0], 200);
    assert.ok(gw.exits.includes(out.urllib3[1]), out.urllib3[1]);
    assert.match(out.tls, /^TLSv1\.[23]$/);
  });

  test('headless Chromium with --proxy-server=https:// (the test CA trusted for this certificate only)', async () => {
    assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing`);
    // The proxy's certificate is accepted by its public-key pin (--ignore-certificate-errors-spki-list):
    // only this key is let through, not every bad certificate.
    const { stdout: spki } = await execFileP('sh', [
      '-c',
      `openssl x509 -in '${leaf.certFile}' -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64`,
    ]);
    const profile = mkdtempSync(join(tmpdir(), 'rotor-chromium-'));
    // Playwright's proxy option answers the proxy's 407 with these credentials.
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: [...CHROMIUM_ARGS, '--proxy-bypass-list=<-loopback>', `--ignore-certificate-errors-spki-list=${spki.trim()}`],
      proxy: { server: `https://127.0.0.1:${port}`, username: 'alice', password: 'alice-pass', bypass: '<-loopback>' },
      timeout: 60_000,
    });
    try {
      const tab = context.pages()[0] ?? (await context.newPage());
      const res = await tab.goto(target.url('/ip'), { timeout: 30_000 });
      assert.equal(res?.status(), 200);
      const body = (await tab.textContent('body'))?.trim() ?? '';
      assert.ok(gw.exits.includes(body), `the target saw an upstream exit: ${body}`);
    } finally {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    }
  });

  test('reload (SIGHUP) serves a renewed certificate to new connections; an unreadable one keeps the old', async () => {
    const before = await peerOf(port, ca.certPem());
    const renewed = await ca.leaf('proxy-renewed');
    copyFileSync(renewed.certFile, leaf.certFile);
    copyFileSync(renewed.keyFile, leaf.keyFile);
    await gw.daemon.reload(gw.config);
    const afterReload = await peerOf(port, ca.certPem());
    assert.notEqual(afterReload.cert.fingerprint256, before.cert.fingerprint256);
    // A broken file: the reload goes on, the running certificate stays.
    await gw.daemon.reload({
      ...gw.config,
      proxy: { ...gw.config.proxy, https: { ...gw.config.proxy.https!, cert: `${leaf.certFile}.missing` } },
    });
    assert.equal((await peerOf(port, ca.certPem())).cert.fingerprint256, afterReload.cert.fingerprint256);
    const r = await curl(['--proxy', proxy(), '--proxy-cacert', ca.certFile, target.url('/ip')]);
    assert.equal(r.status, 200);
  });
});

describe('proxy.https with an unusable certificate', () => {
  test('the start fails naming the key, before any listener is bound', async () => {
    const ca = await makeCa();
    try {
      const leaf = await ca.leaf('proxy');
      await assert.rejects(
        startGateway({ config: { proxy: { https: { port: 0, cert: `${leaf.certFile}.missing`, key: leaf.keyFile } } } }),
        (err: Error & { key?: string }) => err.key === 'proxy.https.cert' && /cannot read/.test(err.message),
      );
      // A key that is not the certificate's.
      const stranger = await ca.leaf('stranger');
      await assert.rejects(
        startGateway({ config: { proxy: { https: { port: 0, cert: leaf.certFile, key: stranger.keyFile } } } }),
        (err: Error & { code?: string }) => err.code === 'TLS_CONFIG',
      );
    } finally {
      ca.cleanup();
    }
  });
});
