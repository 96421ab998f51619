import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sourceKey } from '../../src/proxy/auth-guard.ts';

test('sourceKey: IPv4 as is, an IPv4-mapped IPv6 address as its IPv4, IPv6 by its /64', () => {
  assert.equal(sourceKey('127.0.0.1'), '127.0.0.1');
  assert.equal(sourceKey('::ffff:10.1.2.3'), '10.1.2.3');
  assert.equal(sourceKey('::FFFF:10.1.2.3'), '10.1.2.3');
  assert.equal(sourceKey('2001:db8:1:2:3:4:5:6'), '2001:db8:1:2::/64');
  assert.equal(sourceKey('::1'), '0:0:0:0::/64');
  assert.equal(sourceKey(undefined), 'unknown');
  assert.equal(sourceKey(''), 'unknown');
  assert.equal(sourceKey('not an address'), 'not an address');
});
