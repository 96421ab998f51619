// The TLS policy of upstream dials (src/proxy/dial-tls.ts) and where TLS nodes come from: https:// lines and
// static instances whose only protocol is 3 (https). The dials themselves are in test/e2e/tls-upstream.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { nodeOf } from '../../src/orders/facade.ts';
import { parseProxyString, toNode } from '../../src/pool/proxy-string.ts';
import { UpstreamTlsPolicy, readyEvent } from '../../src/proxy/dial-tls.ts';
import { TlsConfigError } from '../../src/proxy/https-listener.ts';
import type { InstanceRecord } from '../../src/store/types.ts';
import { captureLogger } from '../support/logger.ts';

const instance = (protocol: string): InstanceRecord => ({
  instanceNo: 'i1',
  orderNo: null,
  productNo: 'STC-101-USA-SOCKS',
  status: 3,
  ip: '127.0.0.5',
  port: 4443,
  username: 'u',
  pwd: 'p',
  protocol,
  userExpired: null,
  raw: null,
  updatedAt: 0,
});

describe('TLS upstream nodes and their check', () => {
  test('an https:// line is an HTTP node with tls, its own identity; http:// and socks5:// are not', () => {
    const tls = toNode(parseProxyString('https://u:p@127.0.0.1:8443', 'socks5'), 'pwd');
    assert.equal(tls.protocol, 'http');
    assert.equal(tls.tls, true);
    assert.equal(tls.id, 'https://u@127.0.0.1:8443');
    assert.equal(readyEvent(tls), 'secureConnect');
    const plain = toNode(parseProxyString('http://u:p@127.0.0.1:8443', 'socks5'), 'pwd');
    assert.equal(plain.tls, undefined);
    assert.equal(readyEvent(plain), 'connect');
    assert.notEqual(plain.id, tls.id);
  });

  test('a static instance offering only protocol 3 (https) is dialed over TLS; one offering socks5 or http is not', () => {
    assert.deepEqual([nodeOf(instance('3'), 0)?.tls, nodeOf(instance('3'), 0)?.protocol], [true, 'http']);
    assert.match(nodeOf(instance('3'), 0)!.id, /^https:\/\//);
    assert.equal(nodeOf(instance('2,3'), 0)?.tls, undefined);
    assert.equal(nodeOf(instance('1,3'), 0)?.protocol, 'socks5');
  });

  test('verify by default; pool.tls.verify false or an insecure product relaxes it, logged once per node', () => {
    const logs = captureLogger();
    const node = toNode(parseProxyString('https://u:p@127.0.0.1:8443', 'http'), 'pwd');
    const policy = new UpstreamTlsPolicy({ verify: true, insecureProducts: ['SELF-SIGNED'] }, logs.logger);
    assert.equal(policy.forDial(node, 'DYN-104-FLOW').verify, true);
    assert.equal(policy.forDial(node, 'SELF-SIGNED').verify, false);
    assert.equal(policy.forDial(node, 'SELF-SIGNED').verify, false);
    assert.equal(
      logs
        .text()
        .split('\n')
        .filter((l) => l.includes('not verified')).length,
      1,
    );
    policy.set({ verify: false, insecureProducts: [] });
    assert.equal(policy.forDial(node, 'DYN-104-FLOW').verify, false);
  });

  test('a caFile that cannot be read names pool.tls.caFile', () => {
    assert.throws(
      () => new UpstreamTlsPolicy({ verify: true, insecureProducts: [], caFile: '/nonexistent/ca.pem' }),
      (err: unknown) => err instanceof TlsConfigError && err.key === 'pool.tls.caFile',
    );
  });

  test('a reload reads the caFile off the event loop: an unreadable one is refused naming the key, the old check kept', async () => {
    const policy = new UpstreamTlsPolicy({ verify: true, insecureProducts: [] });
    await assert.rejects(
      policy.reload({ verify: false, insecureProducts: [], caFile: '/nonexistent/ca.pem' }),
      (err: unknown) => err instanceof TlsConfigError && err.key === 'pool.tls.caFile',
    );
    const node = { id: 'https://g:1', protocol: 'https', host: '127.0.0.1', port: 1, tls: true } as unknown as Parameters<
      typeof policy.forDial
    >[0];
    assert.equal(policy.forDial(node, 'P').verify, true, 'the refused reload changed nothing');
    await policy.reload({ verify: false, insecureProducts: [] });
    assert.equal(policy.forDial(node, 'P').verify, false);
  });
});
