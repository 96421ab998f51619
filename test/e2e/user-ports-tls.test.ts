// TLS on a user's own port (`listen.tls: true`, with the certificate and key of proxy.https): curl --proxy
// https:// --proxy-cacert through it (plain HTTP and CONNECT, by address and with credentials), SOCKS5 inside
// the TLS connection, plain clients refused, the certificate renewed by a reload like the HTTPS listener's, and
// a clear refusal (config and API, naming the key) when no certificate is configured.
import assert from 'node:assert/strict';
import { copyFileSync } from 'node:fs';
import { connect as tlsConnect, type PeerCertificate } from 'node:tls';
import { after, before, describe, test } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { makeCa, type TestCa } from '../support/tls.ts';
import { poll } from '../support/wait.ts';
import { curl, startGateway, startTarget, type Gateway, type Target } from './harness.ts';

const ALICE = { name: 'alice', password: 'alice-pass', mainAccount: 'shop1', listen: { port: 0, allowIps: ['127.0.0.1/32'], tls: true } };
// Loopback is not in bob's allowIps: his TLS port wants credentials.
const BOB = { name: 'bob', password: 'bob-pass', mainAccount: 'shop1', listen: { port: 0, allowIps: ['10.0.0.0/8'], tls: true } };
// carol's port stays plain.
const CAROL = { name: 'carol', password: 'carol-pass', mainAccount: 'shop1', listen: { port: 0, allowIps: ['127.0.0.1/32'] } };

function certOf(port: number, ca: string): Promise<PeerCertificate> {
  return new Promise((resolve, reject) => {
    const s = tlsConnect({ host: '127.0.0.1', port, ca, servername: 'localhost' }, () => {
      const cert = s.getPeerCertificate();
      s.destroy();
      resolve(cert);
    });
    s.once('error', reject);
  });
}

describe('TLS on a user port (listen.tls)', () => {
  let ca: TestCa;
  let leaf: { certFile: string; keyFile: string };
  let gw: Gateway;
  let target: Target;
  let alicePort: number;
  let bobPort: number;

  before(async () => {
    ca = await makeCa('Rotor Test CA');
    leaf = await ca.leaf('proxy');
    gw = await startGateway({
      config: { proxy: { https: { host: '127.0.0.1', port: 0, cert: leaf.certFile, key: leaf.keyFile } }, users: [ALICE, BOB, CAROL] },
    });
    target = await startTarget();
    alicePort = gw.daemon.userPorts.portOf('alice')!;
    bobPort = gw.daemon.userPorts.portOf('bob')!;
    assert.ok(alicePort > 0 && bobPort > 0);
  });
  after(async () => {
    await target?.close();
    await gw?.close();
    ca?.cleanup();
  });

  test('curl --proxy https:// --proxy-cacert: plain HTTP and CONNECT, served as the user by address', async () => {
    const before = gw.daemon.accounting.usedOf('alice');
    for (const extra of [[], ['-p']]) {
      const r = await curl([...extra, '--proxy', `https://127.0.0.1:${alicePort}`, '--proxy-cacert', ca.certFile, target.url('/ip')]);
      assert.equal(r.exitCode, 0, r.stderr);
      assert.equal(r.status, 200);
      assert.ok(gw.exits.includes(r.body), `${extra.join(' ')}: the target saw an upstream exit, got ${r.body}`);
    }
    await poll(() => gw.daemon.accounting.usedOf('alice') > before, { timeoutMs: 10_000, what: 'counted as alice' });
  });

  test('credentials inside TLS on a port that wants them; 407 without', async () => {
    const none = await curl(['--proxy', `https://127.0.0.1:${bobPort}`, '--proxy-cacert', ca.certFile, target.url('/ip')]);
    assert.equal(none.status, 407);
    for (const extra of [[], ['-p']]) {
      const r = await curl([
        ...extra,
        '--proxy',
        `https://bob:bob-pass@127.0.0.1:${bobPort}`,
        '--proxy-cacert',
        ca.certFile,
        target.url('/ip'),
      ]);
      assert.equal(r.status, 200, r.stderr);
      assert.ok(gw.exits.includes(r.body), r.body);
    }
  });

  test('SOCKS5 inside the TLS connection (a Node client)', async () => {
    const s = tlsConnect({ host: '127.0.0.1', port: alicePort, ca: ca.certPem(), servername: 'localhost' });
    await new Promise<void>((r, j) => s.once('secureConnect', r).once('error', j));
    const chunks: Buffer[] = [];
    s.on('data', (c: Buffer) => chunks.push(c));
    const have = (n: number) => poll(() => Buffer.concat(chunks).length >= n, { timeoutMs: 15_000, what: `${n} bytes` });
    s.write(Buffer.from([5, 1, 0]));
    await have(2);
    assert.deepEqual([...Buffer.concat(chunks).subarray(0, 2)], [5, 0], 'no authentication: alice by address');
    s.write(Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, target.port >> 8, target.port & 0xff]));
    await have(12);
    assert.equal(Buffer.concat(chunks)[3], 0, 'CONNECT succeeded');
    s.write('GET /ip HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n');
    await new Promise<void>((r) => s.once('end', r));
    const body = Buffer.concat(chunks).subarray(12).toString().split('\r\n\r\n')[1] ?? '';
    assert.ok(gw.exits.includes(body), `through an upstream exit: ${body}`);
    s.destroy();
  });

  test('a plain client on a TLS port is not served; a plain port stays plain', async () => {
    const plain = await curl(['--proxy', `http://127.0.0.1:${alicePort}`, target.url('/ip')], { maxTimeS: 15 });
    assert.notEqual(plain.status, 200);
    const carol = await curl(['--proxy', `http://127.0.0.1:${gw.daemon.userPorts.portOf('carol')}`, target.url('/ip')]);
    assert.equal(carol.status, 200, carol.stderr);
  });

  test('reload (SIGHUP) gives user TLS ports the renewed certificate too', async () => {
    const before = await certOf(alicePort, ca.certPem());
    const renewed = await ca.leaf('proxy-renewed');
    copyFileSync(renewed.certFile, leaf.certFile);
    copyFileSync(renewed.keyFile, leaf.keyFile);
    await gw.daemon.reload(gw.config);
    const now = await certOf(alicePort, ca.certPem());
    assert.notEqual(now.fingerprint256, before.fingerprint256);
    assert.equal(now.fingerprint256, (await certOf(gw.ports.https!, ca.certPem())).fingerprint256, 'the same certificate as proxy.https');
    const r = await curl(['--proxy', `https://127.0.0.1:${alicePort}`, '--proxy-cacert', ca.certFile, target.url('/ip')]);
    assert.equal(r.status, 200, r.stderr);
  });

  test('the API turns a port to TLS and back', async () => {
    const made = await gw.admin('/v1/users', {
      body: { name: 'dave', password: 'dave-pass', mainAccount: 'shop1', listen: { port: 0, allowIps: ['127.0.0.1/32'], tls: true } },
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const port = await poll(() => gw.daemon.userPorts.portOf('dave'), { timeoutMs: 10_000, what: "dave's port" });
    const tls = await curl(['--proxy', `https://127.0.0.1:${port}`, '--proxy-cacert', ca.certFile, target.url('/ip')]);
    assert.equal(tls.status, 200, tls.stderr);
    const patched = await gw.admin('/v1/users/dave', { method: 'PATCH', body: { listen: { port: 0, allowIps: ['127.0.0.1/32'] } } });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    await poll(
      async () =>
        (await curl(['--proxy', `http://127.0.0.1:${gw.daemon.userPorts.portOf('dave')}`, target.url('/ip')], { maxTimeS: 10 })).status ===
        200,
      { timeoutMs: 20_000, what: "dave's port plain again" },
    );
  });
});

describe('listen.tls without a certificate', () => {
  test('the config is refused naming users.N.listen.tls', () => {
    assert.throws(
      () => parseConfig({ users: [CAROL, ALICE] }, { env: {} }),
      (err: Error) => /users\.1\.listen\.tls/.test(err.message) && /proxy\.https/.test(err.message),
    );
  });

  test('the API answers 400 naming listen.tls; nothing is opened', async () => {
    const gw = await startGateway({ config: { users: [] } });
    try {
      const r = await gw.admin<{ code: string; message: string }>('/v1/users', {
        body: { name: 'erin', password: 'erin-pass', mainAccount: 'shop1', listen: { port: 0, allowIps: [], tls: true } },
      });
      assert.equal(r.status, 400, JSON.stringify(r.body));
      assert.match(JSON.stringify(r.body), /listen\.tls/);
      assert.match(JSON.stringify(r.body), /proxy\.https/);
      assert.equal(gw.daemon.userPorts.portOf('erin'), undefined);
    } finally {
      await gw.close();
    }
  });
});
