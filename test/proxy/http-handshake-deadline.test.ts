// The HTTP listener's handshake deadline: a client that connects and sends no request head is closed at the
// deadline (never before), under one sweep timer for all connections, not a timer per connection.
import assert from 'node:assert/strict';
import { createHook } from 'node:async_hooks';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { test } from 'node:test';
import { HttpListener } from '../../src/proxy/http.ts';
import { createMetrics } from '../../src/telemetry/metrics.ts';
import { routerWithoutNodes } from './fixtures.ts';

test('a silent client is closed at the handshake deadline; connections add no timer each', async () => {
  const metrics = createMetrics({ defaultMetrics: false });
  const router = routerWithoutNodes(metrics);
  const handshakeTimeoutMs = 300;
  const http = new HttpListener({ router, port: 0, metrics, handshakeTimeoutMs });
  const { port } = await http.listen();
  // Timeouts http.ts creates while clients connect (the test's and node's own are not counted).
  let timers = 0;
  const hook = createHook({
    init(_id, type) {
      if (type === 'Timeout' && /src[\\/]proxy[\\/]http\.ts/.test(new Error().stack ?? '')) timers++;
    },
  });
  hook.enable();
  const clients: Socket[] = [];
  const closedAfter: Promise<number>[] = [];
  // All five at once, each timed from before its connect() (the listener's clock starts at its accept, which
  // follows: a client's own 'connect' event can run later than that on a loaded machine).
  for (let i = 0; i < 5; i++) {
    const started = performance.now();
    const c = connect(port, '127.0.0.1');
    c.on('error', () => undefined);
    clients.push(c);
    closedAfter.push(once(c, 'close').then(() => performance.now() - started));
  }
  const took = await Promise.all(closedAfter);
  hook.disable();
  for (const t of took) assert.ok(t >= handshakeTimeoutMs - 5, `closed after ${t.toFixed(0)} ms, before the deadline`);
  assert.ok(timers <= 1, `${timers} timers for 5 connections`);
  await http.close();
});

test('a connection whose first request head arrived is not closed at the handshake deadline', async () => {
  const metrics = createMetrics({ defaultMetrics: false });
  const router = routerWithoutNodes(metrics);
  const handshakeTimeoutMs = 200;
  const http = new HttpListener({ router, port: 0, metrics, handshakeTimeoutMs });
  const { port } = await http.listen();
  // One client asks once (answered 407: no credentials) and stays connected, kept alive; a silent one beside it
  // is the clock: once the sweep has closed it, the deadline has passed for both.
  const asked = connect(port, '127.0.0.1');
  asked.on('error', () => undefined);
  let closed = false;
  asked.on('close', () => (closed = true));
  await once(asked, 'connect');
  const answered = once(asked, 'data');
  asked.write('GET http://example.invalid/ HTTP/1.1\r\nHost: example.invalid\r\n\r\n');
  const [head] = (await answered) as [Buffer];
  assert.match(head.toString('latin1'), /^HTTP\/1\.1 407/);
  const silent = connect(port, '127.0.0.1');
  silent.on('error', () => undefined);
  await once(silent, 'close');
  // The sweep that closed the silent one (accepted later) had the one that asked past its deadline too: it is
  // still served.
  const again = once(asked, 'data');
  asked.write('GET http://example.invalid/ HTTP/1.1\r\nHost: example.invalid\r\n\r\n');
  const [second] = (await Promise.race([again, once(asked, 'close')])) as [Buffer | boolean];
  assert.equal(closed, false, 'the connection that sent a request head was closed at the handshake deadline');
  assert.match(String(second), /^HTTP\/1\.1 407/);
  asked.destroy();
  await http.close();
});
