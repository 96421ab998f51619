// A connection's control stays at or below the gateway (docs/architecture.md "As it runs"): the modules that run
// for a SOCKS5 connection and for a plain-HTTP request, measured on a real daemon with V8's precise coverage
// (test/support/path-modules.ts), are all in proxy/ or in folders below it in the declared order. A module of a
// folder above it (users/, daemon/, fleet/, config/ ...) running there means a call climbed up into it: a seam
// implemented above, or a closure the daemon handed down. On the Redis pass the daemon is a fleet of one, and a
// rotating connection runs no fleet code either: a user's share of the fleet's allowance is data held in
// accounting/ (allowance-share.ts), a node another daemon drew is a session flag the router reads.
//
// By control (test/support/control-path.ts): every call from one module into another while a SOCKS5 connection and
// a plain-HTTP request run (a breakpoint on each function of src/ they run, the stack at each), and the chain of
// modules on the stack where the upstream dial begins and where the relay (or the answer) starts. A call into a
// module above the caller fails the second test — a callback into an importer inside proxy/ (the dial race
// calling a job of router.ts, which imports it; the upstream dial calling its dialer's handshake) as much as a
// seam implemented above the gateway. None is allowed: the upstream handshake is data (a sans-I/O reader the
// dial feeds), and a cancelled attempt's socket is destroyed by its DialCancel, not through a listener.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { measurePaths } from '../support/path-modules.ts';
import { declaredOrder, measureControl, SRC_DIR } from '../support/control-path.ts';
import { atOrBelow } from './declared-order.ts';

test('a SOCKS5 connection and a plain-HTTP request run no module above the gateway', { timeout: 120_000 }, async () => {
  const below = atOrBelow('proxy');
  const { socks5, http } = await measurePaths();
  assert.ok(socks5.has('proxy/socks5.ts') && socks5.has('proxy/relay.ts'), `the SOCKS5 path was measured: ${[...socks5.keys()].join(' ')}`);
  assert.ok(
    http.has('proxy/http.ts') && http.has('proxy/http-forward.ts'),
    `the plain-HTTP path was measured: ${[...http.keys()].join(' ')}`,
  );
  const above = (ran: Map<string, Set<string>>): string[] =>
    [...ran].filter(([f]) => !below.has(f.split('/')[0]!)).map(([f, fns]) => `${f}: ${[...fns].join(', ')}`);
  assert.deepEqual(above(socks5), [], 'SOCKS5');
  assert.deepEqual(above(http), [], 'plain HTTP');
});

test('a SOCKS5 connection and a plain-HTTP request: no call climbs back up; the spines stay short', { timeout: 180_000 }, async () => {
  const order = declaredOrder('docs/architecture.md');
  assert.ok(order?.has('proxy'), 'the declared folder order was read');
  const { socks5, http, socks5Calls, httpCalls } = await measureControl({
    srcDir: SRC_DIR,
    // The connection log written every 10 ms: the store's own work (on the Redis pass, replies on ioredis's
    // socket) runs inside the measured windows, as a loaded machine's timing makes it, and is told apart.
    config: { pool: { warm: { perNode: 0 } }, log: { access: { flushIntervalMs: 10 } } },
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
      (dial!.length === 0 && name === 'plain HTTP') || (dial!.includes('proxy/dial-race.ts') && dial!.at(-1) === 'proxy/upstream-dial.ts'),
      `${name}: the dial's stack: ${dial!.join(' ')}`,
    );
    assert.ok(relay!.length > 0, `${name}: the relay's (the answer's) stack was taken`);
    // In a fleet too: a rotating connection runs no fleet code (a sticky one awaits the shared sessions' prepare).
    assert.deepEqual(calls.climbs, [], `${name}: calls into a module above the caller`);
    assert.deepEqual(path.climbs, [], `${name}: the stack's chain climbs`);
    assert.ok(path.modules <= 9, `${name}: ${path.modules} modules on the stacks: ${path.path.join(' ')}`);
  }
});
