// A connection's control stays at or below the gateway (docs/architecture.md "As it runs"): the modules that run
// for a SOCKS5 connection and for a plain-HTTP request, measured on a real daemon with V8's precise coverage
// (test/support/path-modules.ts), are all in proxy/ or in folders below it in the declared order. A module of a
// folder above it (users/, daemon/, fleet/, config/ ...) running there means a call climbed up into it: a seam
// implemented above, or a closure the daemon handed down. On the Redis pass the daemon is a fleet of one: the
// fleet's shared sessions (its router and pool view) are the fleet's climbs, named there; a user's share of
// the fleet's allowance is data held in accounting/ (allowance-share.ts), so fleet/allowance.ts must not run.
//
// By control (test/support/control-path.ts): every call from one module into another while a SOCKS5 connection and
// a plain-HTTP request run (a breakpoint on each function of src/ they run, the stack at each), and the chain of
// modules on the stack where the upstream dial begins and where the relay (or the answer) starts. A call into a
// module above the caller fails the second test — a callback into an importer inside proxy/ (the dial race
// calling a job of router.ts, which imports it) as much as a seam implemented above the gateway — except the
// ones docs/architecture.md counts and names: the upstream dial's handshake callbacks, and in a fleet the pools' view.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { measurePaths } from '../support/path-modules.ts';
import { declaredOrder, measureControl, SRC_DIR } from '../support/control-path.ts';
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

/** The climbs counted in docs/architecture.md "As it runs" (the dialer's handshake function and its done callback). */
const COUNTED = new Set([
  'proxy/upstream-dial.ts → proxy/dial-socks5.ts',
  'wire/socks5-client.ts → proxy/dial-socks5.ts',
  // A dial's abort listener (DialCancel dispatches to the dial that registered it), when an attempt is cancelled.
  'proxy/cancel.ts → proxy/upstream-dial.ts',
]);

/** In a fleet: the router asks the pools' view for a pool, and the race calls the view's methods. */
const FLEET_VIEW = new Set(['proxy/router.ts → fleet/gateway.ts', 'proxy/dial-race.ts → fleet/gateway.ts']);

test(
  'a SOCKS5 connection and a plain-HTTP request: no call climbs back up but the counted ones; the spines stay short',
  { timeout: 180_000 },
  async () => {
    const fleet = process.env.ROTOR_TEST_STORE === 'redis';
    const order = declaredOrder('docs/architecture.md');
    assert.ok(order?.has('proxy'), 'the declared folder order was read');
    const { socks5, http, socks5Calls, httpCalls } = await measureControl({
      srcDir: SRC_DIR,
      config: { pool: { warm: { perNode: 0 } } },
      order,
    });
    for (const [name, path, calls] of [
      ['SOCKS5', socks5, socks5Calls],
      ['plain HTTP', http, httpCalls],
    ] as const) {
      assert.ok(
        calls.modules.includes('proxy/router.ts') && calls.steps.length > 10,
        `${name}: the calls were measured: ${calls.steps.join('; ')}`,
      );
      const [dial, relay] = Object.values(path.chains);
      // A plain-HTTP request may ride an upstream connection the last one left open (no dial then).
      assert.ok(
        (dial!.length === 0 && name === 'plain HTTP') ||
          (dial!.includes('proxy/dial-race.ts') && dial!.at(-1) === 'proxy/upstream-dial.ts'),
        `${name}: the dial's stack: ${dial!.join(' ')}`,
      );
      assert.ok(relay!.length > 0, `${name}: the relay's (the answer's) stack was taken`);
      // In a fleet each pool is seen through fleet/gateway.ts's view (another daemon's node usable): the fleet's climbs.
      const unexpected = calls.climbs.filter((c) => !COUNTED.has(c) && !(fleet && FLEET_VIEW.has(c)));
      assert.deepEqual(unexpected, [], `${name}: calls into a module above the caller`);
      assert.deepEqual(path.climbs, [], `${name}: the stack's chain climbs`);
      assert.ok(path.modules <= 9, `${name}: ${path.modules} modules on the stacks: ${path.path.join(' ')}`);
    }
  },
);
