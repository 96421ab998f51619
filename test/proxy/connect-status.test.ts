// The upstream's answer to CONNECT is judged by its status line read from the bytes (statusOf): the same lines
// are accepted and refused as by the pattern it replaces, /^HTTP\/1\.[01] (\d{3})(?: |$)/ on the first line.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { statusOf } from '../../src/proxy/dial-http.ts';

function byPattern(head: string): number {
  const line = head.slice(0, Math.min(head.indexOf('\r\n'), 200));
  const m = /^HTTP\/1\.[01] (\d{3})(?: |$)/.exec(line);
  return m ? Number(m[1]) : -1;
}

describe('CONNECT answer status line', () => {
  const heads = [
    'HTTP/1.1 200 Connection established\r\n\r\n',
    'HTTP/1.0 200 OK\r\n\r\n',
    'HTTP/1.1 200\r\n\r\n',
    'HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n\r\n',
    'HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n',
    'HTTP/1.1 999 x\r\n\r\n',
    'HTTP/1.2 200 OK\r\n\r\n',
    'HTTP/2.0 200 OK\r\n\r\n',
    'HTTP/1.1 20 OK\r\n\r\n',
    'HTTP/1.1 2000 OK\r\n\r\n',
    'HTTP/1.1 2x0 OK\r\n\r\n',
    'HTTP/1.1  200 OK\r\n\r\n',
    'http/1.1 200 OK\r\n\r\n',
    'HTTP/1.1 200\tOK\r\n\r\n',
    'HTTP/1.1 200\r\r\n\r\n',
    'SSH-2.0-OpenSSH_9.6\r\n\r\n',
    'HTTP/1.1\r\n\r\n',
    '\r\n\r\n',
  ];
  for (const head of heads)
    test(JSON.stringify(head.slice(0, 24)), () => {
      assert.equal(statusOf(Buffer.from(head, 'latin1')), byPattern(head));
    });

  test('the statuses that matter', () => {
    assert.equal(statusOf(Buffer.from('HTTP/1.1 200 Connection established\r\n\r\n')), 200);
    assert.equal(statusOf(Buffer.from('HTTP/1.1 407 Proxy Authentication Required\r\n\r\n')), 407);
    assert.equal(statusOf(Buffer.from('HTTP/1.1 2000 OK\r\n\r\n')), -1);
  });
});
