// Shared sticky sessions against a real redis-server: the first daemon's binding wins and every daemon
// follows it; ending checks the node; the TTL is fixed at the start.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { UpstreamNode as SharedNode } from '../../src/pool/types.ts';
import { SharedSessions } from '../../src/store/redis-fleet-sessions.ts';
import { redisMissing, RedisServer, connection } from './redis-server.ts';
import { poll } from '../support/wait.ts';

const server = new RedisServer();
before(async () => {
  if (!redisMissing) await server.start();
});
after(() => server.stop());

const node = (n: number): SharedNode => ({
  id: `socks5://u${n}@127.0.0.1:${20000 + n}`,
  protocol: 'socks5',
  host: '127.0.0.1',
  port: 20000 + n,
  username: `u${n}`,
  password: 'pw',
  source: 'pwd',
});

describe('SharedSessions', { skip: redisMissing }, () => {
  test('two daemons binding one session at once: one node wins, both leave through it', async () => {
    const ca = await connection(server.url, 'a');
    const cb = await connection(server.url, 'b');
    const a = new SharedSessions(ca, { prefix: 's1:' });
    const b = new SharedSessions(cb, { prefix: 's1:' });
    const [ra, rb] = await Promise.all([a.claim('alice', 'sess1', node(1), 60_000), b.claim('alice', 'sess1', node(2), 60_000)]);
    assert.equal([ra.won, rb.won].filter(Boolean).length, 1);
    assert.equal(ra.session.node.id, rb.session.node.id);
    assert.deepEqual((await b.get('alice', 'sess1'))?.node, ra.session.node);
    assert.equal(ra.session.expiresAt - ra.session.startedAt, 60_000);
    // Other users and sessions are separate.
    assert.equal(await a.get('alice', 'sess2'), undefined);
    assert.equal(await a.get('bob', 'sess1'), undefined);
    // Ending with a node the session is not on does nothing; with its node it ends, and a new claim wins.
    const winner = ra.session.node.id;
    assert.equal(await a.end('alice', 'sess1', 'socks5://nobody@127.0.0.1:1'), false);
    assert.equal(await a.end('alice', 'sess1', winner), true);
    assert.equal(await b.get('alice', 'sess1'), undefined);
    const again = await b.claim('alice', 'sess1', node(3), 60_000);
    assert.equal(again.won, true);
    assert.equal((await a.get('alice', 'sess1'))?.node.id, node(3).id);
    await ca.close();
    await cb.close();
  });

  test('a session ends at its TTL whatever the traffic', async () => {
    const c = await connection(server.url);
    const s = new SharedSessions(c, { prefix: 's2:' });
    // Redis keeps the session's clock (PX): the test reads it with PTTL and runs it out with PEXPIRE.
    const key = 's2:sess:alice:x';
    await s.claim('alice', 'x', node(1), 60_000);
    assert.equal(await c.client.pexpire(key, 30_000), 1, 'the session key exists');
    assert.equal((await s.claim('alice', 'x', node(2), 60_000)).session.node.id, node(1).id);
    assert.ok((await c.client.pttl(key)) <= 30_000, 'a later claim does not extend the session');
    await c.client.pexpire(key, 1);
    await poll(async () => (await s.get('alice', 'x')) === undefined, {
      what: 'the session to end at its TTL',
      timeoutMs: 5000,
      everyMs: 5,
    });
    assert.equal((await s.claim('alice', 'x', node(2), 250)).won, true);
    await c.close();
  });
});
