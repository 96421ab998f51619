// FleetSessions against a real redis-server, two "daemons" (two tables, two pools with different nodes) on
// one Redis: a miss adopts the fleet's binding, a node of another daemon is usable here, a failed node
// ends the shared binding and the next bind is claimed again, a lost claim adopts the winner, and with
// Redis gone everything stays local without throwing.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { FleetSessions } from '../../src/fleet/gateway.ts';
import { SharedSessions } from '../../src/store/redis-fleet-sessions.ts';
import { SessionTable } from '../../src/session/table.ts';
import { PoolEmptyError, type NodeSource, type PoolKey, type UpstreamNode } from '../../src/pool/types.ts';
import type { RedisConnection } from '../../src/store/redis-connection.ts';
import { connection, redisMissing, RedisServer } from './redis-server.ts';
import { poll } from '../support/wait.ts';

const server = new RedisServer();
before(async () => {
  if (!redisMissing) await server.start();
});
after(() => server.stop());

const KEY: PoolKey = { user: 'dave', productNo: 'P', region: '' };
const node = (name: string): UpstreamNode => ({
  id: `socks5://u@${name}:1`,
  protocol: 'socks5',
  host: '127.0.0.1',
  port: 1,
  username: 'u',
  password: 'p',
  source: 'pwd',
});

/** A pool of fixed nodes handed out in turn (the gateway's pool is not what is tested here). */
function fixedPool(nodes: UpstreamNode[]): NodeSource & { released: number } {
  let next = 0;
  const ids = new Set(nodes.map((n) => n.id));
  return {
    released: 0,
    acquire: async (exclude) => {
      const free = nodes.filter((n) => !exclude?.has(n.id));
      if (free.length === 0) throw new PoolEmptyError('fixed', 'empty');
      return free[next++ % free.length]!;
    },
    release() {
      this.released++;
    },
    reportFailure: () => undefined,
    reportSuccess: () => undefined,
    isUsable: (n) => ids.has(n.id),
  };
}

function daemon(conn: RedisConnection, prefix: string, nodes: UpstreamNode[]) {
  const table = new SessionTable();
  const pool = fixedPool(nodes);
  const fleet = new FleetSessions({ table, shared: new SharedSessions<UpstreamNode>(conn, { prefix }), pools: { pool: () => pool } });
  return { table, pool, fleet };
}

const settle = () => new Promise((r) => setTimeout(r, 50));

describe('FleetSessions', { skip: redisMissing }, () => {
  test('a session follows the fleet binding; failures end it; lost claims adopt the winner', async (t) => {
    const conn = await connection(server.url);
    // Closed however the test ends: an open connection would keep the test's process alive past its timeout.
    t.after(() => conn.close());
    const a = daemon(conn, 'g1:', [node('a1'), node('a2')]);
    const b = daemon(conn, 'g1:', [node('b1'), node('b2')]);

    // a binds first (claims a1); b adopts a1, a node of a's pool that b dials directly.
    await a.fleet.prepare('dave', 's1', 5, KEY);
    assert.equal(a.fleet.get('dave', 's1')?.node.id, node('a1').id);
    assert.equal(a.pool.released, 1, 'the node taken to claim with is handed back');
    await b.fleet.prepare('dave', 's1', 5, KEY);
    const adopted = b.fleet.get('dave', 's1')!.node;
    assert.equal(adopted.id, node('a1').id);
    assert.equal(adopted.password, 'p', 'the binding carries the credentials');
    assert.equal(b.pool.isUsable(adopted), false);
    assert.equal(
      b.fleet.get('dave', 's1')!.foreign,
      true,
      "another daemon's node is adopted as foreign: the router dials it while it lasts",
    );
    assert.equal(a.fleet.get('dave', 's1')!.foreign, false, "a node of the daemon's own pool is judged by its pool");

    // a1 fails on b: the router rotates, binds b1 after a good dial; the fleet follows b1.
    b.fleet.rotate('dave', 's1', 'failed');
    b.fleet.bind('dave', 's1', node('b1'), 5);
    // bind() writes the fleet's binding in the background: a reads it once it is there.
    const shared = new SharedSessions<UpstreamNode>(conn, { prefix: 'g1:' });
    await poll(async () => (await shared.get('dave', 's1'))?.node.id === node('b1').id, { what: "b's binding of s1 in Redis" });
    a.table.clear();
    await a.fleet.prepare('dave', 's1', 5, KEY);
    assert.equal(a.fleet.get('dave', 's1')?.node.id, node('b1').id);

    // Both bind a session the fleet does not know yet (no prepare: e.g. after a retry): a's claim wins,
    // b adopts a's node for its next connections.
    a.fleet.bind('dave', 's2', node('a2'), 5);
    await poll(async () => (await shared.get('dave', 's2'))?.node.id === node('a2').id, { what: "a's claim of s2 in Redis" });
    b.fleet.bind('dave', 's2', node('b2'), 5);
    await poll(() => b.fleet.get('dave', 's2')?.node.id === node('a2').id, { what: "b adopting a's node for s2" });

    // b's lost claim left the winner's binding in place.
    const kept = await shared.get('dave', 's2');
    assert.equal(kept?.node.id, node('a2').id);
  });

  test('with the shared connection unusable, prepare and bind stay local and never throw', async () => {
    const conn = await connection(server.url);
    const a = daemon(conn, 'g2:', [node('a1')]);
    await conn.close();
    await a.fleet.prepare('dave', 's1', 5, KEY);
    assert.equal(a.fleet.get('dave', 's1'), undefined, 'nothing adopted: the router binds locally');
    a.fleet.bind('dave', 's1', node('a1'), 5);
    await settle();
    assert.equal(a.fleet.get('dave', 's1')?.node.id, node('a1').id);
    assert.equal(a.fleet.rotate('dave', 's1', 'failed'), true);
    await settle();
  });
});
