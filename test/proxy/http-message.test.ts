import assert from 'node:assert/strict';
import { isIPv6 } from 'node:net';
import { describe, test } from 'node:test';
import { forwardHeaderObject, forwardHeaders, parseAbsoluteTarget, parseConnectTarget } from '../../src/proxy/http-message.ts';

describe('request targets', () => {
  test('the same absolute URI again gives the same target object (a kept-alive client parses once); others parse anew', () => {
    const a = parseAbsoluteTarget('http://a.test:8080/x?y');
    assert.equal(parseAbsoluteTarget('http://a.test:8080/x?y'), a);
    assert.deepEqual(parseAbsoluteTarget('http://b.test/z'), {
      host: 'b.test',
      port: 80,
      path: '/z',
      authority: 'b.test',
      absolute: 'http://b.test/z',
    });
    assert.equal(parseAbsoluteTarget('http://a:0/'), undefined);
    assert.equal(parseAbsoluteTarget('http://a:0/'), undefined);
    assert.equal(parseAbsoluteTarget('http://a.test:8080/x?y')?.path, '/x?y');
  });

  test('absolute URIs: ports read as 1-5 digits within 1..65535, the default 80 when absent or empty', () => {
    assert.equal(parseAbsoluteTarget('http://a:8080/x')?.port, 8080);
    assert.equal(parseAbsoluteTarget('http://a:65535/')?.port, 65535);
    assert.equal(parseAbsoluteTarget('http://a:00080/')?.port, 80);
    assert.equal(parseAbsoluteTarget('http://a:/')?.port, 80);
    assert.equal(parseAbsoluteTarget('http://a/')?.port, 80);
    for (const bad of ['http://a:0/', 'http://a:65536/', 'http://a:123456/', 'http://a:1a/', 'http://a:-1/'])
      assert.equal(parseAbsoluteTarget(bad), undefined, bad);
    assert.deepEqual(parseAbsoluteTarget('ws://[::1]:8080/p?q#f'), {
      host: '::1',
      port: 8080,
      path: '/p?q',
      authority: '[::1]:8080',
      absolute: 'http://[::1]:8080/p?q',
    });
  });

  test('CONNECT authorities use the same port rule', () => {
    assert.deepEqual(parseConnectTarget('a:443'), { host: 'a', port: 443 });
    for (const bad of ['a:0', 'a:70000', 'a:', 'a:x']) assert.equal(parseConnectTarget(bad), undefined, bad);
  });

  test('the same CONNECT authority again gives the same target object; others parse anew', () => {
    const a = parseConnectTarget('a.test:443');
    assert.equal(parseConnectTarget('a.test:443'), a);
    assert.deepEqual(parseConnectTarget('[::1]:8443'), { host: '::1', port: 8443 });
    assert.deepEqual(parseConnectTarget('a.test:443'), a);
  });

  test('CONNECT authorities read by hand answer as the pattern they replaced', () => {
    // The former parse: one pattern for the authority, HOST_NAME for a name, isIPv6 for a literal.
    const pattern = (url: string): { host: string; port: number } | undefined => {
      const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9._-]+)):(\d{1,5})$/.exec(url);
      if (!m) return undefined;
      const port = Number(m[3]);
      if (port < 1 || port > 65535) return undefined;
      if (m[1] !== undefined) return isIPv6(m[1]) ? { host: m[1], port } : undefined;
      return /^[A-Za-z0-9_](?:[A-Za-z0-9._-]{0,252})$/.test(m[2]!) ? { host: m[2]!, port } : undefined;
    };
    const fixed = [
      'a:443',
      '_a:1',
      '.a:1',
      '-a:1',
      'a-:1',
      'a.b.c:65535',
      'a:65536',
      'a:00443',
      'a:123456',
      ':443',
      'a::443',
      'a:b:443',
      '[::1]:443',
      '[::1]',
      '[]:443',
      '[::1]x:443',
      '[fe80::1%eth0]:443',
      '[1.2.3.4]:80',
      '[::ffff:1.2.3.4]:80',
      '::1:443',
      'a b:443',
      'ä:443',
      `${'a'.repeat(253)}:1`,
      `${'a'.repeat(254)}:1`,
      'a:+1',
      'a: 1',
      '1.2.3.4:8080',
    ];
    for (const url of fixed) assert.deepEqual(parseConnectTarget(url), pattern(url), url);
    // And random ones from the characters that matter.
    const alphabet = 'a0_.-:[]f9% Z';
    let seed = 27;
    const next = (n: number): number => ((seed = (seed * 1103515245 + 12345) % 2147483648), seed % n);
    for (let k = 0; k < 20000; k++) {
      let url = '';
      for (let len = next(12); len > 0; len--) url += alphabet[next(alphabet.length)];
      if (next(2) === 0) url += `:${next(70000)}`;
      assert.deepEqual(parseConnectTarget(url), pattern(url), url);
    }
  });
});

describe('forwarded headers', () => {
  test('Connection: keep-alive / close removes only the hop-by-hop fields; a list names more', () => {
    const raw = ['Host', 'h', 'Connection', 'Keep-Alive', 'Keep-Alive', 'timeout=5', 'X-A', '1'];
    assert.deepEqual(forwardHeaders(raw), ['Host', 'h', 'X-A', '1']);
    assert.deepEqual(forwardHeaders(['Connection', 'close', 'X-A', '1']), ['X-A', '1']);
    assert.deepEqual(forwardHeaders(['Connection', 'close, X-A', 'X-A', '1', 'X-B', '2']), ['X-B', '2']);
    assert.deepEqual(forwardHeaders(['Connection', 'x-a', 'X-A', '1', 'X-B', '2']), ['X-B', '2']);
  });

  test('the request header object: Host first from the URI, repeated fields as arrays, dropped and named fields out', () => {
    const raw = [
      'host',
      'client.example',
      'Accept',
      'a',
      'Cookie',
      'c1',
      'Cookie',
      'c2',
      'Cookie',
      'c3',
      'Expect',
      '100-continue',
      'Connection',
      'x-hop',
      'X-Hop',
      '1',
      'Proxy-Authorization',
      'Basic eA==',
    ];
    const headers = forwardHeaderObject(raw, new Set(['expect', 'host']), 'target:8080');
    assert.deepEqual(headers, { Host: 'target:8080', Accept: 'a', Cookie: ['c1', 'c2', 'c3'] });
    assert.deepEqual(Object.keys(headers)[0], 'Host');
  });
});
