// The forwarder's idle upstream connections are bounded beyond their key (src/proxy/http-forward.ts): one
// kept-alive client connection keeps at most maxIdlePerClient (8) across all its keys, the ones it released
// last, and one user at most maxIdlePerUser (256) across all its client connections, sticky sessions
// included (their connections are shared by the user's clients and outlive the one that released them).
// Before, only maxIdlePerKey (8) bounded them: a client walking targets kept one upstream connection per target.
// The upstream here is a node:http server standing in for an HTTP proxy node (it answers absolute-URI requests).
import assert from 'node:assert/strict';
import { Agent, createServer, request as httpRequest, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { HttpListener } from '../../src/proxy/http.ts';
import { Router } from '../../src/proxy/router.ts';
import { UnlimitedMeters } from '../support/meters.ts';
import { waitFor } from '../support/wait.ts';
import { closeServer, FixedPool, FixedPools, listenPort, MapSessions, node, user, Users } from './fixtures.ts';

const PER_CLIENT = 8;
const PER_USER = 256;

let server: Server;
let upstreamPort = 0;
let accepted = 0;
const open = new Set<Socket>();

before(async () => {
  server = createServer((_req, res) => res.end('ok'));
  server.keepAliveTimeout = 120_000;
  server.on('connection', (s: Socket) => {
    accepted++;
    open.add(s);
    s.on('close', () => open.delete(s));
  });
  upstreamPort = await listenPort(server);
});
after(async () => {
  server.closeAllConnections();
  await closeServer(server);
});

function gateway(): HttpListener {
  const router = new Router({
    users: new Users([user('alice', 'alice-pass')]),
    meters: new UnlimitedMeters(),
    pools: new FixedPools(new FixedPool([node('http', upstreamPort)])),
    sessions: new MapSessions(),
    retries: 0,
  });
  return new HttpListener({ router, port: 0, responseTimeoutMs: 10_000 });
}

function get(proxyPort: number, agent: Agent, username: string, host: string): Promise<number> {
  const auth = `Basic ${Buffer.from(`${username}:alice-pass`).toString('base64')}`;
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: '127.0.0.1', port: proxyPort, path: `http://${host}/`, agent, headers: { 'Proxy-Authorization': auth } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('plain HTTP: idle upstream connections bounded per client connection and per user', () => {
  test(`one client connection walking 40 targets keeps the ${PER_CLIENT} it used last, and reuses them`, async () => {
    const listener = gateway();
    const { port } = await listener.listen();
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      for (let i = 0; i < 40; i++) assert.equal(await get(port, agent, 'alice', `t${i}.test`), 200);
      // Each target is a key of its own (rotating user): past the bound the least recently released closed.
      await waitFor(() => open.size <= PER_CLIENT, 5000);
      assert.equal(open.size, PER_CLIENT, `kept: ${open.size}`);
      const before = accepted;
      for (let i = 40 - PER_CLIENT; i < 40; i++) assert.equal(await get(port, agent, 'alice', `t${i}.test`), 200);
      assert.equal(accepted - before, 0, 'the targets used last are served by their kept connections');
      assert.equal(await get(port, agent, 'alice', 't0.test'), 200);
      assert.equal(accepted - before, 1, 'an early target closed to keep the bound: dialed again');
      agent.destroy();
      // The client connection closed: its rotating routes' connections with it.
      await waitFor(() => open.size === 0, 5000);
    } finally {
      agent.destroy();
      await listener.close();
    }
  });

  test(`40 client connections of one user with 8 sticky sessions each: at most ${PER_USER} kept`, async () => {
    const listener = gateway();
    const { port } = await listener.listen();
    const agents = Array.from({ length: 40 }, () => new Agent({ keepAlive: true, maxSockets: 1 }));
    try {
      await waitFor(() => open.size === 0, 5000);
      await Promise.all(
        agents.map(async (agent, c) => {
          // A session's first request binds its node (that connection is not kept); the second's is kept.
          for (let k = 0; k < 8; k++)
            for (let n = 0; n < 2; n++) assert.equal(await get(port, agent, `alice-session-c${c}k${k}`, 'example.test'), 200);
        }),
      );
      // 320 sessions, each its own key, 8 per client connection: the user's bound closes the rest.
      await waitFor(() => open.size <= PER_USER, 5000);
      assert.ok(open.size >= PER_USER - 8, `kept ${open.size}: the bound, not fewer`);
      for (const a of agents) a.destroy();
      // Sticky sessions' connections are the user's, shared by its clients: they stay (bounded), idle.
      assert.ok(open.size <= PER_USER && open.size > 0, `kept after the clients left: ${open.size}`);
    } finally {
      for (const a of agents) a.destroy();
      await listener.close();
    }
  });
});
