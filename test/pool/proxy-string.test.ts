import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { nodeId, parseProxyString, ProxyStringError, toNode, type ProxyStringProblem } from '../../src/pool/proxy-string.ts';

describe('parseProxyString: accepted forms', () => {
  const cases: [string, 'socks5' | 'http', object][] = [
    ['127.0.0.1:1080', 'socks5', { protocol: 'socks5', host: '127.0.0.1', port: 1080 }],
    ['127.0.0.1:8080', 'http', { protocol: 'http', host: '127.0.0.1', port: 8080 }],
    ['localhost:1080:alice:s3cret', 'socks5', { protocol: 'socks5', host: 'localhost', port: 1080, username: 'alice', password: 's3cret' }],
    ['127.0.0.2:1080:u:pa:ss', 'http', { protocol: 'http', host: '127.0.0.2', port: 1080, username: 'u', password: 'pa:ss' }],
    ['127.0.0.3:1080:u:p@ss', 'socks5', { protocol: 'socks5', host: '127.0.0.3', port: 1080, username: 'u', password: 'p@ss' }],
    ['alice:s3cret@127.0.0.1:1080', 'socks5', { protocol: 'socks5', host: '127.0.0.1', port: 1080, username: 'alice', password: 's3cret' }],
    [
      'alice-sess-abc_1:x%2Fy@127.0.0.1:1080',
      'http',
      { protocol: 'http', host: '127.0.0.1', port: 1080, username: 'alice-sess-abc_1', password: 'x%2Fy' },
    ],
    [
      'socks5://alice:s3cret@127.0.0.1:1080',
      'http',
      { protocol: 'socks5', host: '127.0.0.1', port: 1080, username: 'alice', password: 's3cret' },
    ],
    [
      'socks5h://alice:s3cret@localhost:1080',
      'http',
      { protocol: 'socks5', host: 'localhost', port: 1080, username: 'alice', password: 's3cret' },
    ],
    ['SOCKS5://127.0.0.1:1080', 'http', { protocol: 'socks5', host: '127.0.0.1', port: 1080 }],
    [
      'http://alice:s3cret@127.0.0.1:8080',
      'socks5',
      { protocol: 'http', host: '127.0.0.1', port: 8080, username: 'alice', password: 's3cret' },
    ],
    [
      'http://alice:s3cret@127.0.0.1:80/',
      'socks5',
      { protocol: 'http', host: '127.0.0.1', port: 80, username: 'alice', password: 's3cret' },
    ],
    [
      'https://alice:s3cret@127.0.0.1:8443',
      'socks5',
      { protocol: 'http', host: '127.0.0.1', port: 8443, username: 'alice', password: 's3cret', tls: true },
    ],
    [
      'socks5://al%40ice:p%3Aa%20ss@127.0.0.1:1080',
      'http',
      { protocol: 'socks5', host: '127.0.0.1', port: 1080, username: 'al@ice', password: 'p:a ss' },
    ],
    ['socks5://u:p@ss@127.0.0.1:1080', 'http', { protocol: 'socks5', host: '127.0.0.1', port: 1080, username: 'u', password: 'p@ss' }],
    ['socks5://onlyuser@127.0.0.1:1080', 'http', { protocol: 'socks5', host: '127.0.0.1', port: 1080, username: 'onlyuser' }],
    ['[::1]:1080', 'socks5', { protocol: 'socks5', host: '::1', port: 1080 }],
    ['[::1]:1080:u:p', 'socks5', { protocol: 'socks5', host: '::1', port: 1080, username: 'u', password: 'p' }],
    ['u:p@[::1]:1080', 'http', { protocol: 'http', host: '::1', port: 1080, username: 'u', password: 'p' }],
    ['socks5://u:p@[::1]:1080', 'http', { protocol: 'socks5', host: '::1', port: 1080, username: 'u', password: 'p' }],
    // The colon form with a bare IPv6 host (no bracket convention there): port, user and password are the last three fields.
    ['::1:40000:user:pass', 'socks5', { protocol: 'socks5', host: '::1', port: 40000, username: 'user', password: 'pass' }],
    [
      '2001:db8::10:40000:user-1:secret',
      'http',
      { protocol: 'http', host: '2001:db8::10', port: 40000, username: 'user-1', password: 'secret' },
    ],
    ['2001:4860::1:8080:u:p', 'socks5', { protocol: 'socks5', host: '2001:4860::1', port: 8080, username: 'u', password: 'p' }],
    ['::ffff:127.0.0.1:8080:u:p', 'socks5', { protocol: 'socks5', host: '::ffff:127.0.0.1', port: 8080, username: 'u', password: 'p' }],
    // A scheme in front of the colon form: the scheme's protocol.
    ['socks5://127.0.0.1:1080:u:p', 'http', { protocol: 'socks5', host: '127.0.0.1', port: 1080, username: 'u', password: 'p' }],
    ['http://gw.example:8080:u:p:q', 'socks5', { protocol: 'http', host: 'gw.example', port: 8080, username: 'u', password: 'p:q' }],
    ['https://gw.example:443:u:p', 'socks5', { protocol: 'http', host: 'gw.example', port: 443, username: 'u', password: 'p', tls: true }],
    ['socks5://::1:40000:u:p', 'http', { protocol: 'socks5', host: '::1', port: 40000, username: 'u', password: 'p' }],
    // ... else the shortest address, then port and user; the rest is a password holding ':'.
    ['::1:8080:u:p:q', 'socks5', { protocol: 'socks5', host: '::1', port: 8080, username: 'u', password: 'p:q' }],
    ['  \t127.0.0.1:1080\r\n', 'socks5', { protocol: 'socks5', host: '127.0.0.1', port: 1080 }],
    ['127.0.0.1:65535', 'socks5', { protocol: 'socks5', host: '127.0.0.1', port: 65535 }],
  ];
  for (const [input, def, expected] of cases) {
    test(JSON.stringify(input), () => {
      assert.deepEqual(parseProxyString(input, def), expected);
    });
  }
});

describe('parseProxyString: rejected input', () => {
  const cases: [string, ProxyStringProblem][] = [
    ['', 'empty'],
    ['   ', 'empty'],
    ['127.0.0.1', 'bad_port'],
    ['127.0.0.1:', 'bad_port'],
    ['127.0.0.1:0', 'bad_port'],
    ['127.0.0.1:65536', 'bad_port'],
    ['127.0.0.1:80a', 'bad_port'],
    ['127.0.0.1:1080:user', 'bad_form'],
    ['::1:1080', 'bad_host'],
    ['::1:1080:user', 'bad_form'],
    ['::1:99999:u:p', 'bad_form'],
    ['fe80::1', 'bad_host'],
    ['[::1:1080', 'bad_host'],
    ['[zz::1]:1080', 'bad_host'],
    ['[::1]1080', 'bad_port'],
    ['ftp://127.0.0.1:21', 'unsupported_scheme'],
    ['ssh://u:p@127.0.0.1:22', 'unsupported_scheme'],
    ['socks5://127.0.0.1:1080/path', 'trailing_path'],
    ['http://127.0.0.1:8080?x=1', 'trailing_path'],
    ['socks5://127.0.0.1', 'bad_port'],
    ['socks5://127.0.0.1:1080:user', 'bad_host'],
    ['socks5://:pass@127.0.0.1:1080', 'bad_userinfo'],
    [':pass@127.0.0.1:1080', 'bad_userinfo'],
    ['socks5://u:%zz@127.0.0.1:1080', 'bad_percent_encoding'],
    ['host name:1080', 'bad_form'],
    ['exa$mple.com:1080', 'bad_host'],
    ['://127.0.0.1:1080', 'unsupported_scheme'],
    ['ip not in whitelist', 'bad_form'],
  ];
  for (const [input, problem] of cases) {
    test(JSON.stringify(input), () => {
      assert.throws(
        () => parseProxyString(input, 'socks5'),
        (err: unknown) => err instanceof ProxyStringError && err.code === 'PROXY_STRING_INVALID' && err.problem === problem,
      );
    });
  }

  test('the error message never carries the string (it may hold a password)', () => {
    try {
      parseProxyString('socks5://user:hunter2@127.0.0.1:99999', 'socks5');
      assert.fail('should throw');
    } catch (err) {
      assert.ok(err instanceof ProxyStringError);
      assert.equal(err.problem, 'bad_port');
      assert.ok(!err.message.includes('hunter2'));
    }
  });
});

describe('node identity', () => {
  test('id is protocol://user@host:port without the password; IPv6 bracketed', () => {
    assert.equal(nodeId({ protocol: 'socks5', host: '127.0.0.1', port: 1080, username: 'a@b' }), 'socks5://a%40b@127.0.0.1:1080');
    assert.equal(nodeId({ protocol: 'http', host: '::1', port: 8080 }), 'http://[::1]:8080');
    const node = toNode(parseProxyString('u:secret@127.0.0.1:1080', 'socks5'), 'pwd', 123);
    assert.deepEqual(node, {
      id: 'socks5://u@127.0.0.1:1080',
      protocol: 'socks5',
      host: '127.0.0.1',
      port: 1080,
      username: 'u',
      password: 'secret',
      source: 'pwd',
      expiresAt: 123,
    });
    assert.ok(!node.id.includes('secret'));
  });
});
