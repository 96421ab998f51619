// The SOCKS5 listener's handshake deadline: a client that stalls in its handshake (silent, or greeted and then
// silent) is closed at the deadline (never before) and counted a bad request, under one sweep timer for all
// connections, not a timer per connection; a client that finishes in time is not cut.
import assert from 'node:assert/strict';
import { createHook } from 'node:async_hooks';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { test } from 'node:test';
import { Socks5Listener } from '../../src/proxy/socks5.ts';
import { createMetrics } from '../../src/telemetry/metrics.ts';
import { routerWithoutNodes } from './fixtures.ts';

test('a stalled SOCKS5 handshake is closed at the deadline and counted; connections add no timer each', { timeout: 20_000 }, async (t) => {
  const metrics = createMetrics({ defaultMetrics: false });
  const router = routerWithoutNodes(metrics);
  const handshakeTimeoutMs = 300;
  const socks = new Socks5Listener({ router, port: 0, metrics, handshakeTimeoutMs });
  const { port } = await socks.listen();
  t.after(() => socks.close());
  // Timeouts the listener and its handshake create while clients connect (the test's and node's own are not counted).
  let timers = 0;
  const hook = createHook({
    init(_id, type) {
      const stack = new Error().stack ?? '';
      // writeReply's close of a refused CONNECT is per refusal (the one client below), not per connection.
      if (type === 'Timeout' && /src[\\/](proxy[\\/]socks5|wire[\\/]socks5)\.ts/.test(stack) && !/writeReply/.test(stack)) timers++;
    },
  });
  hook.enable();
  const closedAfter: Promise<number>[] = [];
  const clients: Socket[] = [];
  const answers: number[][] = [];
  // Five at once, each timed from before its connect() (the listener's clock starts at its accept, which follows).
  for (let i = 0; i < 5; i++) {
    const started = performance.now();
    const c = connect(port, '127.0.0.1');
    c.on('error', () => undefined);
    // Three stay silent; two send their greeting (answered: user/password) and stop there.
    if (i >= 3) c.on('connect', () => c.write(Buffer.from([5, 1, 2])));
    // Read what it is answered (a paused socket would never see the server's close): the method choice, once.
    const got: number[] = [];
    c.on('data', (d: Buffer) => got.push(...d));
    answers.push(got);
    clients.push(c);
    closedAfter.push(once(c, 'close').then(() => performance.now() - started));
  }
  // One more that finishes its handshake in time: refused at its CONNECT (the pool has no node), not cut by the sweep.
  const answered = new Promise<Buffer>((resolve) => {
    const c = connect(port, '127.0.0.1');
    let got = Buffer.alloc(0);
    c.on('error', () => undefined);
    c.on('connect', () => {
      const u = Buffer.from('alice');
      const p = Buffer.from('alice-pass');
      c.write(
        Buffer.concat([Buffer.from([5, 1, 2, 1, u.length]), u, Buffer.from([p.length]), p, Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, 0, 9])]),
      );
    });
    c.on('data', (d: Buffer) => (got = Buffer.concat([got, d])));
    c.on('close', () => resolve(got));
  });
  const took = await Promise.all(closedAfter);
  hook.disable();
  for (const t of took) assert.ok(t >= handshakeTimeoutMs - 5, `closed after ${t.toFixed(0)} ms, before the deadline`);
  assert.ok(timers <= 1, `${timers} timers for 6 connections`);
  assert.deepEqual(answers, [[], [], [], [5, 2], [5, 2]], 'the greeted ones got the method choice once, then the close');
  // Method choice (5, 2), auth ok (1, 0), then a failure reply to the CONNECT (no upstream: not 0x00).
  const reply = await answered;
  assert.deepEqual([...reply.subarray(0, 4)], [5, 2, 1, 0]);
  assert.equal(reply[4], 5);
  assert.notEqual(reply[5], 0, 'the CONNECT was answered with a failure, not cut');
  const total = await metrics.connectionsTotal.get();
  const badRequests = total.values.find((v) => v.labels.listener === 'socks5' && v.labels.result === 'bad_request')?.value ?? 0;
  assert.equal(badRequests, 5, 'each stalled handshake counted a bad request');
});
