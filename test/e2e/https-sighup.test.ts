// The HTTPS proxy's certificate renewed by a real SIGHUP to a real `rotor start`: the PEM files are replaced
// on disk, the signal sent, the reload's log line waited for; a new TLS connection then sees the new
// certificate (and curl --proxy https:// trusts it), while a CONNECT tunnel opened before the signal keeps
// working on its old TLS session.
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { after, before, describe, test } from 'node:test';
import { parse, stringify } from 'yaml';
import { launchRotor, REPO_ROOT, type RotorChild } from '../support/rotor-process.ts';
import { makeCa, type TestCa } from '../support/tls.ts';
import { poll } from '../support/wait.ts';
import { curl, startTarget, type Target } from './harness.ts';

const AUTH = `Basic ${Buffer.from('alice:alice-pass').toString('base64')}`;

/** The fingerprint of the certificate a new TLS connection to `port` is served. */
function fingerprintOf(port: number, ca: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = tlsConnect({ host: '127.0.0.1', port, ca, servername: 'localhost' }, () => {
      resolve(s.getPeerCertificate().fingerprint256);
      s.destroy();
    });
    s.once('error', reject);
  });
}

/** Reads from `s` until `done(text so far)`; resolves with the text. */
function readUntil(s: TLSSocket, done: (text: string) => boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (c: Buffer): void => {
      text += c.toString('latin1');
      if (!done(text)) return;
      s.off('data', onData).off('close', onClose);
      resolve(text);
    };
    const onClose = (): void => reject(new Error(`closed after: ${text}`));
    s.on('data', onData).once('close', onClose);
  });
}

describe('the HTTPS proxy certificate on a real SIGHUP', () => {
  let ca: TestCa;
  let dir: string;
  let rotor: RotorChild;
  let target: Target;
  let httpsPort: number;
  const certFile = () => join(dir, 'proxy.pem');
  const keyFile = () => join(dir, 'proxy-key.pem');

  before(async () => {
    ca = await makeCa('Rotor Test CA');
    dir = mkdtempSync(join(tmpdir(), 'rotor-sighup-'));
    const leaf = await ca.leaf('proxy');
    copyFileSync(leaf.certFile, certFile());
    copyFileSync(leaf.keyFile, keyFile());
    const config = parse(readFileSync(join(REPO_ROOT, 'config/default.yaml'), 'utf8')) as { proxy: Record<string, unknown> };
    config.proxy.https = { host: '127.0.0.1', port: 0, cert: certFile(), key: keyFile() };
    const configFile = join(dir, 'rotor.yaml');
    writeFileSync(configFile, stringify(config));
    target = await startTarget();
    rotor = await launchRotor({
      args: ['--config', configFile],
      env: {
        ROTOR_HTTP_PORT: '0',
        ROTOR_SOCKS_PORT: '0',
        ROTOR_ADMIN_PORT: '0',
        ROTOR_CALLBACK_PORT: '0',
        ROTOR_STORE: join(dir, 'rotor.db'),
        ROTOR_LOG_LEVEL: 'info',
      },
    });
    const ready = rotor.lines().find((l) => l.msg === 'rotor is ready') as { https?: { port: number } };
    httpsPort = ready.https!.port;
    assert.ok(httpsPort > 0);
  });
  after(async () => {
    const exit = await rotor?.stop();
    await target?.close();
    ca?.cleanup();
    if (dir) rmSync(dir, { recursive: true, force: true });
    assert.equal(exit?.code, 0, rotor?.output().slice(-2000));
  });

  test('new files + SIGHUP: new connections get the new certificate, an open tunnel keeps working', async () => {
    const old = await fingerprintOf(httpsPort, ca.certPem());
    // A CONNECT tunnel through the TLS listener, one request answered before the signal.
    const tunnel = tlsConnect({ host: '127.0.0.1', port: httpsPort, ca: ca.certPem(), servername: 'localhost' });
    tunnel.on('error', () => undefined);
    await new Promise<void>((r, j) => tunnel.once('secureConnect', r).once('error', j));
    assert.equal(tunnel.getPeerCertificate().fingerprint256, old);
    tunnel.write(`CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nHost: 127.0.0.1:${target.port}\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    assert.match(await readUntil(tunnel, (t) => t.includes('\r\n\r\n')), /^HTTP\/1\.1 200/);
    const ask = () => {
      tunnel.write('GET /hello HTTP/1.1\r\nHost: t\r\n\r\n');
      return readUntil(tunnel, (t) => t.includes('hello from target'));
    };
    assert.match(await ask(), /200 OK/);

    const renewed = await ca.leaf('proxy-renewed');
    copyFileSync(renewed.certFile, certFile());
    copyFileSync(renewed.keyFile, keyFile());
    const reloadsBefore = rotor.lines().filter((l) => l.msg === 'tls certificate reloaded').length;
    rotor.signal('SIGHUP');
    await poll(() => rotor.lines().filter((l) => l.msg === 'tls certificate reloaded').length > reloadsBefore, {
      timeoutMs: 20_000,
      what: 'the reload line in the log',
    });

    const now = await fingerprintOf(httpsPort, ca.certPem());
    assert.notEqual(now, old, 'a new connection is served the renewed certificate');
    const viaCurl = await curl([
      '--proxy',
      `https://alice:alice-pass@127.0.0.1:${httpsPort}`,
      '--proxy-cacert',
      ca.certFile,
      target.url('/hello'),
    ]);
    assert.equal(viaCurl.status, 200, viaCurl.stderr);
    assert.equal(viaCurl.body, 'hello from target');
    // The tunnel opened before the signal: same TLS session, still relaying.
    assert.equal(tunnel.destroyed, false);
    assert.match(await ask(), /200 OK/);
    tunnel.destroy();
  });
});
