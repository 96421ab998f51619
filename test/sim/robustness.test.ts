// Embedded, the sandbox shares the daemon's process: a failed accept ('error' on one of its listening
// servers: EMFILE, ENFILE, ENOBUFS) must not end the process, and the sandbox keeps serving; nor may a
// callback address that is not a URL.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Server } from 'node:net';
import { SIM_PRODUCTS, startSimulator } from '../../src/sim/index.ts';
import { clientFor, waitFor } from './helpers.ts';

/** Listening servers of this process (Node keeps them as active handles). */
function listeningServers(): Server[] {
  const handles = (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles();
  return handles.filter((h): h is Server => h instanceof Server && h.listening);
}

test('the sandbox platform server and its upstream ports survive a failed accept', async () => {
  const before = new Set(listeningServers());
  const sim = await startSimulator({ gatewayPorts: 2, orderDelayMs: 10 });
  const client = clientFor(sim);
  try {
    const servers = listeningServers().filter((s) => !before.has(s));
    // The platform server and at least the two password-gateway ports.
    assert.ok(servers.length >= 3, `found ${servers.length} sandbox servers`);
    for (const s of servers) {
      assert.doesNotThrow(() => s.emit('error', Object.assign(new Error('accept EMFILE'), { code: 'EMFILE', syscall: 'accept' })));
      assert.doesNotThrow(() => s.emit('error', Object.assign(new Error('accept ENFILE'), { code: 'ENFILE', syscall: 'accept' })));
    }
    const app = await client.call('GetAppInfo', {});
    assert.equal(app.status, 1);
  } finally {
    client.close();
    await sim.close();
  }
});

test('a merchant callback address that is not a URL fails the attempt instead of the process', async () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown): void => {
    unhandled.push(reason);
  };
  process.on('unhandledRejection', onUnhandled);
  const sim = await startSimulator({ orderDelayMs: 10, upstreams: false, callbackUrl: 'not a url', callbackBackoffMs: 10_000 });
  const client = clientFor(sim);
  try {
    const accepted = await client.call('InstanceOpen', {
      appOrderNo: 'bad-url-1',
      params: [{ productNo: SIM_PRODUCTS.staticUsSocks, count: 1, cycleTimes: 1 }],
    });
    const rec = await waitFor(() => sim.inspect.callbacks({ type: 'order', no: accepted.orderNo }).find((r) => r.attempts.length > 0));
    assert.equal(rec.attempts[0]?.ok, false);
    assert.match(rec.attempts[0]?.error ?? '', /URL/i);
    assert.deepEqual(unhandled, []);
  } finally {
    process.off('unhandledRejection', onUnhandled);
    client.close();
    await sim.close();
  }
});
