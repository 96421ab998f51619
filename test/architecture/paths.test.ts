// A connection's control stays at or below the gateway (docs/architecture.md "As it runs"): the modules that run
// for a SOCKS5 connection and for a plain-HTTP request, measured on a real daemon with V8's precise coverage
// (test/support/path-modules.ts), are all in proxy/ or in folders below it in the declared order. A module of a
// folder above it (users/, daemon/, fleet/, config/ ...) running there means a call climbed up into it: a seam
// implemented above, or a closure the daemon handed down. On the Redis pass the daemon is a fleet of one: the
// fleet's shared sessions (its router and pool view) are the fleet's climbs, named there; a user's share of
// the fleet's allowance is data held in accounting/ (allowance-share.ts), so fleet/allowance.ts must not run.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { measurePaths } from '../support/path-modules.ts';
import { atOrBelow } from './declared-order.ts';

test('a SOCKS5 connection and a plain-HTTP request run no module above the gateway', { timeout: 120_000 }, async () => {
  const below = atOrBelow('proxy');
  const fleet = process.env.ROTOR_TEST_STORE === 'redis';
  // In a fleet, the shared sessions: counted in docs/architecture.md as the fleet's climbs.
  const allowed: Record<string, RegExp> = fleet ? { 'fleet/gateway.ts': /./ } : {};
  const { socks5, http } = await measurePaths();
  assert.ok(socks5.has('proxy/socks5.ts') && socks5.has('proxy/relay.ts'), `the SOCKS5 path was measured: ${[...socks5.keys()].join(' ')}`);
  assert.ok(
    http.has('proxy/http.ts') && http.has('proxy/http-forward.ts'),
    `the plain-HTTP path was measured: ${[...http.keys()].join(' ')}`,
  );
  const above = (ran: Map<string, Set<string>>): string[] =>
    [...ran]
      .filter(([f]) => !below.has(f.split('/')[0]!))
      .map(([f, fns]) => [f, [...fns].filter((fn) => !(allowed[f]?.test(fn) ?? false))] as const)
      .filter(([, fns]) => fns.length > 0)
      .map(([f, fns]) => `${f}: ${fns.join(', ')}`);
  assert.deepEqual(above(socks5), [], 'SOCKS5');
  assert.deepEqual(above(http), [], 'plain HTTP');
});
