// Plain HTTP over one kept-alive client connection, a user held to maxConnections 1, walking 150 targets (each
// its own key in the forwarder: src/proxy/http-forward.ts keyFor). The idle upstream connections one client
// connection keeps are bounded across its keys (the ones it released last), not only per key: before, each
// target kept its upstream connection for idleMs (30 s) and the one client connection held 622 descriptors of
// the daemon's (descriptors for everyone). Real daemon on the embedded sandbox, real sockets.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { Agent, request } from 'node:http';
import { poll } from '../support/wait.ts';
import { startGateway, type Gateway } from './harness.ts';

const TARGETS = 150;
let gw: Gateway;
const servers: Server[] = [];
before(async () => {
  gw = await startGateway();
  assert.equal(
    (await gw.admin('/v1/users', { body: { name: 'walker', mainAccount: 'shop1', password: 'walker-pass-1', maxConnections: 1 } })).status,
    201,
  );
  for (let i = 0; i < TARGETS; i++) {
    const s = createServer((_req, res) => res.end('ok'));
    s.keepAliveTimeout = 120_000;
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    servers.push(s);
  }
});
after(async () => {
  for (const s of servers) s.closeAllConnections();
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  await gw?.close();
});

const fds = (): number => readdirSync('/proc/self/fd').length;

test('one kept-alive client connection walking 150 targets holds a bounded number of upstream connections', async () => {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const auth = `Basic ${Buffer.from('walker:walker-pass-1').toString('base64')}`;
  const before = fds();
  for (const s of servers) {
    const port = (s.address() as { port: number }).port;
    const status = await new Promise<number>((resolve, reject) => {
      const req = request({
        host: '127.0.0.1',
        port: gw.ports.http,
        path: `http://127.0.0.1:${port}/`,
        agent,
        headers: { 'proxy-authorization': auth },
      });
      req.on('response', (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', reject);
      req.end();
    });
    assert.equal(status, 200);
  }
  // Upstream connections closed to keep the bound end asynchronously (the sandbox's side after Rotor's): the
  // count is read once they settle, the client connection still open.
  let grown = fds() - before;
  await poll(() => ((grown = fds() - before) < 64 ? true : undefined), { timeoutMs: 5000 }).catch(() => undefined);
  agent.destroy();
  // One client connection: its own socket pair, a few upstream connections kept. Each kept upstream costs
  // this process 2 descriptors (Rotor -> sandbox gateway) plus the sandbox's own to the target.
  assert.ok(grown < 64, `one client connection of a maxConnections 1 user left ${grown} descriptors open in the daemon's process`);
});
