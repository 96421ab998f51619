// The admin API's and the platform callbacks' listeners close connections that never send a whole request head
// within 10 s (src/admin/http-limits.ts), a silent one and one stopped half-way through its head alike, while
// they keep answering everyone else. Before, fastify's defaults held them forever: each one of the daemon's
// descriptors, shared with every tunnel. Real daemon on the embedded sandbox, real sockets.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { startGateway, type Gateway } from '../e2e/harness.ts';
import { poll } from '../support/wait.ts';

let gw: Gateway;
const opened: Socket[] = [];

before(async () => {
  gw = await startGateway({ config: { admin: { token: 'bounds-token-123456' } } });
});
after(async () => {
  for (const s of opened) s.destroy();
  await gw?.close();
});

/** A connection to `port` that sends `head` (maybe nothing) and then nothing more; `closedAt` once the daemon closes it. */
function stalled(port: number, head: string): Promise<{ closedAt: () => number }> {
  return new Promise((resolve) => {
    let at = 0;
    const socket = connect({ host: '127.0.0.1', port });
    opened.push(socket);
    socket.resume();
    socket.on('error', () => undefined);
    socket.on('close', () => (at = Date.now()));
    socket.once('connect', () => {
      if (head) socket.write(head);
      resolve({ closedAt: () => at });
    });
  });
}

test('admin and callback ports: silent and half-sent heads are closed at the 10 s head deadline; the ports answer meanwhile', async () => {
  const t0 = Date.now();
  const conns = await Promise.all(
    [gw.ports.admin, gw.ports.callback].flatMap((port) => [
      ...Array.from({ length: 5 }, () => stalled(port, '')),
      stalled(port, 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n'),
    ]),
  );
  // Served meanwhile.
  const health = await fetch(`${gw.adminUrl}/healthz`);
  assert.equal(health.status, 200);
  await poll(() => conns.every((c) => c.closedAt() > 0), {
    what: 'every stalled connection closed by the daemon',
    timeoutMs: 30_000,
    everyMs: 100,
  });
  const first = Math.min(...conns.map((c) => c.closedAt())) - t0;
  assert.ok(first >= 9_000, `closed at the head deadline, not before (${first} ms)`);
});
