import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseUsername } from '../../src/proxy/username.ts';

const users = new Set(['alice', 'bob-smith', 'x']);
/** The users as the parse reads them (the gateway's table answers get with the user, or undefined). */
const isUser = { get: (n: string): string | undefined => (users.has(n) ? n : undefined) };

describe('user-name grammar', () => {
  test('plain user, no options', () => {
    assert.deepEqual(parseUsername('alice', isUser), { ok: true, user: 'alice', options: {} });
    assert.deepEqual(parseUsername('alice'), { ok: true, user: 'alice', options: {} });
  });

  test('every option, in the documented order', () => {
    const r = parseUsername('alice-session-s1-sesstime-10-region-US.CA-product-p_9-instance-I.42', isUser);
    assert.deepEqual(r, {
      ok: true,
      user: 'alice',
      options: { sessionId: 's1', sessTime: 10, region: 'US.CA', product: 'p_9', instance: 'I.42' },
    });
  });

  test('options in any order, read from the right', () => {
    const r = parseUsername('alice-region-DE-session-abc', isUser);
    assert.deepEqual(r, { ok: true, user: 'alice', options: { region: 'DE', sessionId: 'abc' } });
  });

  test('a user name that contains a dash, with and without options', () => {
    assert.deepEqual(parseUsername('bob-smith', isUser), { ok: true, user: 'bob-smith', options: {} });
    assert.deepEqual(parseUsername('bob-smith-session-7', isUser), { ok: true, user: 'bob-smith', options: { sessionId: '7' } });
  });

  test('an option key used as a session value is a value', () => {
    assert.deepEqual(parseUsername('alice-session-region', isUser), { ok: true, user: 'alice', options: { sessionId: 'region' } });
  });

  test('unknown option', () => {
    const r = parseUsername('alice-colour-red', isUser);
    assert.equal(r.ok, false);
    assert.ok(!r.ok && r.code === 'UNKNOWN_OPTION' && r.reason === "unknown option 'colour'");
    const r2 = parseUsername('alice-colour-red-session-1', isUser);
    assert.ok(!r2.ok && r2.code === 'UNKNOWN_OPTION');
    // Without a user directory, a user name cannot contain '-': the token after it is an option.
    const r3 = parseUsername('alice-colour-red');
    assert.ok(!r3.ok && r3.code === 'UNKNOWN_OPTION' && r3.reason.includes('colour'));
  });

  test('option names are case-sensitive', () => {
    const r = parseUsername('alice-Session-1', isUser);
    assert.ok(!r.ok && r.code === 'UNKNOWN_OPTION');
  });

  test('bad values', () => {
    for (const bad of ['alice-session-', 'alice-region-a b', 'alice-product-p/1', 'alice-instance-é', 'alice-session-a:b']) {
      const r = parseUsername(bad, isUser);
      assert.ok(!r.ok, bad);
      assert.equal(r.ok ? '' : r.code, 'BAD_VALUE', bad);
      assert.ok(!r.ok && !r.reason.includes('\n'));
    }
  });

  test('sesstime must be whole minutes 1..120', () => {
    for (const bad of ['0', '121', '-1', '1.5', 'ten', '99999']) {
      const r = parseUsername(`alice-sesstime-${bad}`, isUser);
      assert.ok(!r.ok, bad);
    }
    const ok = parseUsername('alice-sesstime-120', isUser);
    assert.ok(ok.ok && ok.options.sessTime === 120);
    const one = parseUsername('alice-sesstime-1', isUser);
    assert.ok(one.ok && one.options.sessTime === 1);
  });

  test('a productNo or instanceNo holding dashes is read whole, with options on either side', () => {
    assert.deepEqual(parseUsername('alice-product-DYN-105-FLOW', isUser), {
      ok: true,
      user: 'alice',
      options: { product: 'DYN-105-FLOW' },
    });
    assert.deepEqual(parseUsername('bob-smith-session-s1-product-STC-101-USA-SOCKS-region-US', isUser), {
      ok: true,
      user: 'bob-smith',
      options: { region: 'US', product: 'STC-101-USA-SOCKS', sessionId: 's1' },
    });
    assert.deepEqual(parseUsername('alice-instance-INS-7-product-DYN-105', isUser), {
      ok: true,
      user: 'alice',
      options: { product: 'DYN-105', instance: 'INS-7' },
    });
    // Without the users' table too (a user name then holds no dash).
    assert.deepEqual(parseUsername('alice-product-D-1'), { ok: true, user: 'alice', options: { product: 'D-1' } });
    // An option's name inside, or an empty piece, ends the value: the usual refusals.
    assert.equal(parseUsername('alice-product-A-session', isUser).ok, false);
    assert.equal(parseUsername('alice-product-A--B', isUser).ok, false);
    assert.ok(!parseUsername('alice-product-A-B-product-C', isUser).ok);
  });

  test('a value with a dash does not parse', () => {
    const r = parseUsername('alice-session-a-b', isUser);
    assert.ok(!r.ok && r.code === 'BAD_VALUE' && r.reason.includes("'session'"));
  });

  test('an option without a value', () => {
    const r = parseUsername('alice-session', isUser);
    assert.ok(!r.ok && r.code === 'MISSING_VALUE' && r.reason === "option 'session' needs a value");
    const r2 = parseUsername('alice-region-US-session', isUser);
    assert.ok(!r2.ok);
  });

  test('the same option twice', () => {
    const r = parseUsername('alice-session-1-session-2', isUser);
    assert.ok(!r.ok && r.code === 'DUPLICATE_OPTION');
  });

  test('empty user', () => {
    for (const bad of ['', '-session-1', 'session-1']) {
      const r = parseUsername(bad, isUser);
      if (bad === 'session-1') {
        // "session-1" has no user part before the option: it is read as a (unknown) user called session-1.
        assert.ok(r.ok && r.user === 'session-1');
        continue;
      }
      assert.ok(!r.ok && r.code === 'EMPTY_USER', bad);
    }
  });

  test('empty option name between dashes', () => {
    const r = parseUsername('alice--session-1', isUser);
    assert.ok(!r.ok && r.code === 'BAD_VALUE');
  });

  test('an unknown user with dashes is returned as the user (the caller refuses it)', () => {
    const r = parseUsername('nobody-here', isUser);
    assert.ok(r.ok && r.user === 'nobody-here');
  });

  test('reasons are one short printable line even for hostile input', () => {
    const r = parseUsername(`alice-${'\u0001'.repeat(5)}${'z'.repeat(200)}-v`, isUser);
    assert.ok(!r.ok);
    assert.ok(r.reason.length < 80 && /^[\x20-\x7e]+$/.test(r.reason));
  });
});
