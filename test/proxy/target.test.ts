// Issue 13, item 4: targets are checked before any dial (src/proxy/target.ts), and a failure that is the
// target's never cools a node.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { UnlimitedMeters } from '../support/meters.ts';
import { GatewayError, UpstreamDialError } from '../../src/proxy/errors.ts';
import { Router, type Dialer } from '../../src/proxy/router.ts';
import { BadTargetError, checkTarget } from '../../src/proxy/target.ts';
import { REPLY } from '../../src/wire/socks5.ts';
import { Socks5ClientError } from '../../src/wire/socks5-client.ts';
import { classifySocksError } from '../../src/proxy/dial-socks5.ts';
import { FixedPool, FixedPools, MapSessions, Users, node, user } from './fixtures.ts';

describe('checkTarget', () => {
  test('well-formed targets pass, normalized', () => {
    assert.deepEqual(checkTarget({ host: 'example.com', port: 443 }), { host: 'example.com', port: 443 });
    assert.deepEqual(checkTarget({ host: 'example.com.', port: 1 }), { host: 'example.com', port: 1 });
    assert.deepEqual(checkTarget({ host: '[::1]', port: 80 }), { host: '::1', port: 80 });
    assert.deepEqual(checkTarget({ host: '::1', port: 80 }), { host: '::1', port: 80 });
    assert.deepEqual(checkTarget({ host: '2001:db8::1', port: 65535 }), { host: '2001:db8::1', port: 65535 });
    assert.deepEqual(checkTarget({ host: '10.0.0.1', port: 8080 }), { host: '10.0.0.1', port: 8080 });
    assert.deepEqual(checkTarget({ host: '_srv.my-host.example', port: 53 }), { host: '_srv.my-host.example', port: 53 });
    assert.deepEqual(checkTarget({ host: `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`, port: 1 }).port, 1);
  });

  test('malformed targets are BadTargetError: 400 and SOCKS5 0x01', () => {
    for (const [host, port] of [
      ['example.com', 0],
      ['example.com', 65536],
      ['example.com', -1],
      ['example.com', 1.5],
      ['', 80],
      [`${'a'.repeat(60)}.`.repeat(5) + 'com', 443],
      [`${'a'.repeat(64)}.com`, 80],
      ['a..b', 80],
      ['-a.example', 80],
      ['a-.example', 80],
      ['exa mple.com', 80],
      ['[::1', 80],
      ['[example.com]', 80],
      ['999.1.1.1', 80],
      ['1.2.3', 80],
      ['ex%61mple.com', 80],
      ['example.com/x', 80],
      ['user@example.com', 80],
      ['.', 80],
    ] as const) {
      assert.throws(
        () => checkTarget({ host, port }),
        (err: unknown) => {
          assert.ok(err instanceof BadTargetError, `${host}:${port}`);
          assert.ok(err instanceof GatewayError);
          assert.equal(err.code, 'BAD_TARGET');
          assert.equal(err.httpStatus, 400);
          assert.equal(err.socksReply, REPLY.generalFailure);
          return true;
        },
      );
    }
  });
});

describe('Router.dial and the target', () => {
  function router(dial: Dialer) {
    const pool = new FixedPool([node('socks5', 1), node('socks5', 2)]);
    const r = new Router({
      users: new Users([user('alice', 'secret')]),
      meters: new UnlimitedMeters(),
      pools: new FixedPools(pool),
      sessions: new MapSessions(),
      dialers: { socks5: dial, http: dial },
    });
    const a = r.authorize('alice', 'secret');
    assert.ok(a.ok);
    return { r, pool, route: a.route };
  }

  test('a malformed target is refused before any pool is asked or any node dialed', async () => {
    let dials = 0;
    const { r, pool, route } = router(async () => {
      dials++;
      throw new UpstreamDialError('other', 'x');
    });
    await assert.rejects(r.dial(route, { host: 'x'.repeat(300), port: 443 }), BadTargetError);
    await assert.rejects(r.dial(route, { host: 'example.com', port: 0 }), BadTargetError);
    assert.equal(dials, 0);
    assert.deepEqual(pool.failures, []);
  });

  test("failures classified as the target's cool no node; messages name no address", async () => {
    // A SOCKS5 node's "unreachable", "refused" and "address type not supported" are the target's.
    for (const reply of [REPLY.hostUnreachable, REPLY.networkUnreachable, REPLY.connectionRefused, REPLY.addressTypeNotSupported]) {
      assert.equal(classifySocksError(new Socks5ClientError('REJECTED', 'x', reply)).reason, 'target_refused', String(reply));
    }
    for (const reason of ['target_refused'] as const) {
      const { r, pool, route } = router(async (n) => {
        throw new UpstreamDialError(reason, `upstream ${n.host}:${n.port}: the target refused`);
      });
      await assert.rejects(r.dial(route, { host: 'example.com', port: 443 }), (err: unknown) => {
        assert.ok(err instanceof GatewayError);
        assert.doesNotMatch(err.message, /127\.0\.0\.1|:\d/);
        return true;
      });
      assert.deepEqual(pool.failures, []);
    }
    // A node's own failure still counts against it, and its message does not reach the client either.
    const { r, pool, route } = router(async (n) => {
      throw new UpstreamDialError('refused', `upstream ${n.host}:${n.port}: ECONNREFUSED`);
    });
    await assert.rejects(r.dial(route, { host: 'example.com', port: 443 }), (err: unknown) => {
      assert.ok(err instanceof GatewayError && err.code === 'UPSTREAM_FAILED');
      assert.equal(err.message, 'the upstream failed');
      return true;
    });
    assert.ok(pool.failures.length > 0);
  });
});
