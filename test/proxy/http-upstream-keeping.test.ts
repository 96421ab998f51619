// The forwarder keeps its upstream connections itself (src/proxy/http-forward.ts): a kept-alive client's
// requests share one upstream connection, an idle one closes after upstreamIdleMs (or sooner when the
// upstream's Keep-Alive hint says so), a silent upstream fails the request with 504 after responseTimeoutMs,
// and a client connection's rotating-route connections close with it. The upstream here is a node:http
// server standing in for an HTTP proxy node (it answers absolute-URI requests itself).
import assert from 'node:assert/strict';
import { Agent, createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { HttpListener } from '../../src/proxy/http.ts';
import { Router } from '../../src/proxy/router.ts';
import { UnlimitedMeters } from '../support/meters.ts';
import { waitFor } from '../support/wait.ts';
import { closeServer, FixedPool, FixedPools, listenPort, MapSessions, node, user, Users } from './fixtures.ts';

const AUTH = `Basic ${Buffer.from('alice:alice-pass').toString('base64')}`;

interface Upstream {
  port: number;
  server: Server;
  /** connections accepted so far, and those still open */
  accepted: () => number;
  open: () => number;
}

/** An HTTP "proxy node": /silent never answers, /hint answers with `Keep-Alive: timeout=1`, anything else 200 ok. */
async function startUpstream(): Promise<Upstream> {
  let accepted = 0;
  const sockets = new Set<Socket>();
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.url?.endsWith('/silent')) return;
    if (req.url?.endsWith('/hint')) res.setHeader('Keep-Alive', 'timeout=1');
    res.end('ok');
  });
  server.keepAliveTimeout = 60_000;
  server.on('connection', (s: Socket) => {
    accepted++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  const port = await listenPort(server);
  return { port, server, accepted: () => accepted, open: () => sockets.size };
}

function gateway(upstreamPort: number, o: { responseTimeoutMs: number; upstreamIdleMs?: number }): HttpListener {
  const router = new Router({
    users: new Users([user('alice', 'alice-pass')]),
    meters: new UnlimitedMeters(),
    pools: new FixedPools(new FixedPool([node('http', upstreamPort)])),
    sessions: new MapSessions(),
    retries: 0,
  });
  return new HttpListener({ router, port: 0, ...o });
}

/** GET an absolute URI through the proxy on `agent`'s connections; the status and body. */
function get(proxyPort: number, agent: Agent, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: '127.0.0.1', port: proxyPort, path: `http://example.test${path}`, agent, headers: { 'Proxy-Authorization': AUTH } },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('plain HTTP: the forwarder keeps its upstream connections', () => {
  let upstream: Upstream;
  before(async () => {
    upstream = await startUpstream();
  });
  after(async () => {
    upstream.server.closeAllConnections();
    await closeServer(upstream.server);
  });

  test('a kept-alive client: five requests over one upstream connection; it closes once idle past upstreamIdleMs', async () => {
    const listener = gateway(upstream.port, { responseTimeoutMs: 10_000, upstreamIdleMs: 300 });
    const { port } = await listener.listen();
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const before = upstream.accepted();
      for (let i = 0; i < 5; i++) assert.deepEqual(await get(port, agent, '/a'), { status: 200, body: 'ok' });
      assert.equal(upstream.accepted() - before, 1, 'one upstream connection for five requests');
      // Idle past 300 ms (the sweep runs every 75 ms): closed by the forwarder, the client still connected.
      await waitFor(() => upstream.open() === 0, 5000);
      assert.deepEqual(await get(port, agent, '/a'), { status: 200, body: 'ok' });
      assert.equal(upstream.accepted() - before, 2, 'a new upstream connection after the idle one closed');
    } finally {
      agent.destroy();
      await listener.close();
    }
  });

  test("an upstream's Keep-Alive hint shorter than the idle margin: the connection is not kept", async () => {
    const listener = gateway(upstream.port, { responseTimeoutMs: 10_000 });
    const { port } = await listener.listen();
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const before = upstream.accepted();
      assert.equal((await get(port, agent, '/hint')).status, 200);
      assert.equal((await get(port, agent, '/hint')).status, 200);
      assert.equal(upstream.accepted() - before, 2, 'timeout=1 leaves no safe idle time: each request dials');
    } finally {
      agent.destroy();
      await listener.close();
    }
  });

  test('an upstream silent past responseTimeoutMs: 504, and the next request on the client connection is served', async () => {
    const listener = gateway(upstream.port, { responseTimeoutMs: 300 });
    const { port } = await listener.listen();
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const started = Date.now();
      const r = await get(port, agent, '/silent');
      assert.equal(r.status, 504);
      assert.ok(Date.now() - started >= 300, 'not before the timeout');
      // 504 closes the client connection; a new one is served by a new upstream connection.
      assert.deepEqual(await get(port, agent, '/a'), { status: 200, body: 'ok' });
    } finally {
      agent.destroy();
      await listener.close();
    }
  });

  test('a client that leaves while its response is due: the upstream request is dropped at once', async () => {
    const listener = gateway(upstream.port, { responseTimeoutMs: 60_000 });
    const { port } = await listener.listen();
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      await waitFor(() => upstream.open() === 0, 5000);
      const pending = get(port, agent, '/silent').catch(() => 'gone');
      await waitFor(() => upstream.open() === 1, 5000);
      agent.destroy();
      assert.equal(await pending, 'gone');
      // Long before the response timeout: the client's 'close' stopped the exchange and its upstream request.
      await waitFor(() => upstream.open() === 0, 5000);
    } finally {
      agent.destroy();
      await listener.close();
    }
  });

  test("a client connection's rotating-route connections close with it", async () => {
    const listener = gateway(upstream.port, { responseTimeoutMs: 10_000 });
    const { port } = await listener.listen();
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      // The earlier tests' upstream connections are gone first.
      await waitFor(() => upstream.open() === 0, 5000);
      assert.equal((await get(port, agent, '/a')).status, 200);
      assert.equal(upstream.open(), 1);
      agent.destroy();
      await waitFor(() => upstream.open() === 0, 5000);
    } finally {
      agent.destroy();
      await listener.close();
    }
  });
});
