// The portal's own listener faces anyone who can reach it, and each socket it holds is one of the daemon's
// descriptors, shared with every tunnel. Connections that never send a byte are closed at the head's deadline
// (10 s), one client address holds at most 32 (more are closed at once, unread), and a customer from another
// address is served meanwhile. Before, fastify's defaults held every silent socket forever with no cap, so
// enough of them left the proxy without descriptors. Real daemon on the embedded sandbox, real sockets.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { startGateway, type Gateway } from '../e2e/harness.ts';
import { poll } from '../support/wait.ts';

let gw: Gateway;
const opened: Socket[] = [];

before(async () => {
  gw = await startGateway({ config: { portal: { host: '127.0.0.1', port: 0 } } });
});
after(async () => {
  for (const s of opened) s.destroy();
  await gw?.close();
});

/** A connection from `from` that sends nothing; `closed` is set when the daemon closes it. */
function silent(from: string): Promise<{ socket: Socket; closed: () => boolean; closedAt: () => number }> {
  return new Promise((resolve) => {
    let at = 0;
    const socket = connect({ host: '127.0.0.1', port: gw.ports.portal!, localAddress: from });
    opened.push(socket);
    socket.resume();
    socket.on('error', () => undefined);
    socket.on('close', () => (at = Date.now()));
    socket.once('connect', () => resolve({ socket, closed: () => at > 0, closedAt: () => at }));
  });
}

const page = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: gw.ports.portal!, path: gw.config.portal.path, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });

test('40 silent connections from one address: 8 closed at once (32 per address), the rest at the head deadline; a customer is served meanwhile', async () => {
  const t0 = Date.now();
  const conns = await Promise.all(Array.from({ length: 40 }, () => silent('127.0.0.7')));
  await poll(() => conns.filter((c) => c.closed()).length >= 8, { what: '8 of 40 closed at once', timeoutMs: 8_000, everyMs: 20 });
  const early = conns.filter((c) => c.closed());
  assert.equal(early.length, 8, `closed at once: ${early.length} (the 32 held ones must wait for the head deadline)`);
  assert.ok(
    early.every((c) => c.closedAt() - t0 < 8_000),
    'the ones over the cap were closed well before the head deadline',
  );
  // Another address is served while the first holds its 32.
  assert.equal(await page(), 200);
  // Nothing sent within the head's deadline (10 s): every one closed by the daemon.
  await poll(() => conns.every((c) => c.closed()), {
    what: 'every silent connection closed by the daemon',
    timeoutMs: 30_000,
    everyMs: 100,
  });
  const last = Math.max(...conns.map((c) => c.closedAt())) - t0;
  assert.ok(last >= 9_000, `the held ones were closed at the head deadline, not before (${last} ms)`);
});
