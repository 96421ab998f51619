import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeUsername, encodeUsername } from '../../../src/sim/upstreams/index.ts';
import { UpstreamError } from '../../../src/sim/upstreams/errors.ts';

test('a plain credential encodes to the documented shape and decodes back', () => {
  const credential = { account: 'shop_01', productNo: 'P104.a', sessionId: 'abc123', sessTime: 5 };
  const name = encodeUsername(credential);
  assert.equal(name, 'shop_01-prod-P104.a-sess-abc123-time-5');
  assert.deepEqual(decodeUsername(name), credential);
});

test('area, negative sessTime and characters outside the safe set round-trip', () => {
  const credential = { account: 'shop-東', productNo: 'p:1', sessionId: 's~1', sessTime: -1, addressCode: '110000' };
  const name = encodeUsername(credential);
  assert.match(name, /^[A-Za-z0-9_.~-]+$/);
  assert.ok(name.endsWith('-time-n1-area-110000'));
  assert.deepEqual(decodeUsername(name), credential);
  assert.equal(decodeUsername(encodeUsername({ ...credential, sessTime: 0 }))?.sessTime, 0);
});

test('decoding is strict', () => {
  for (const bad of [
    '',
    'shop',
    'a-prod-b-sess-c-time-5-area',
    'a-prod-b-sess-c-time-05',
    'a-prod-b-sess-c-time-',
    'a-prod-b-sess-c-time-x',
    'a-prod-b-sess-c-time-5-zone-1',
    'a-prod-b-sess-c-tim-5',
    'a-prod--sess-c-time-5',
    'a b-prod-b-sess-c-time-5',
    'a~zz-prod-b-sess-c-time-5',
    'a~ff-prod-b-sess-c-time-5', // not UTF-8
    'a~41-prod-b-sess-c-time-5', // 'A' needs no escape: not the canonical form
  ]) {
    assert.equal(decodeUsername(bad), null, bad);
  }
});

test('a credential that cannot be encoded fails with a stable code', () => {
  assert.throws(
    () => encodeUsername({ account: 'a', productNo: 'b', sessionId: 'c', sessTime: 1.5 }),
    (err: unknown) => err instanceof UpstreamError && err.code === 'UPSTREAM_BAD_CREDENTIAL',
  );
  assert.throws(
    () => encodeUsername({ account: '', productNo: 'b', sessionId: 'c', sessTime: 1 }),
    (err: unknown) => err instanceof UpstreamError && err.code === 'UPSTREAM_BAD_CREDENTIAL',
  );
});
