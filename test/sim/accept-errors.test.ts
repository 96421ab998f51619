// Embedded, the sandbox shares the daemon's process: a failed accept ('error' on one of its listening
// servers: EMFILE, ENFILE, ENOBUFS) must not end the process, and the sandbox keeps serving.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Server } from 'node:net';
import { startSimulator } from '../../src/sim/index.ts';
import { clientFor } from './helpers.ts';

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
