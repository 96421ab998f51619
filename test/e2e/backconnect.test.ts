// A backconnect gateway (DrawByPwd answering the same host:port:user:pass every time, the exit rotating at the
// provider) serves every connection from one drawn line: 1,000 tunnels through the real daemon make at most
// one DrawByPwd, counted at the sandbox; the exits still rotate (at the gateway). A product answering
// distinct lines per draw still spreads connections over several drawn nodes.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { nodeConnectGet, nodeSocksGet, startGateway, startTarget, waitFor, type Gateway, type Target } from './harness.ts';

const BACKCONNECT = SIM_PRODUCTS.dynamicTrafficCn;
const DISTINCT = SIM_PRODUCTS.dynamicTraffic;
const USERS = [
  { name: 'gwuser', password: 'gwuser-pass', mainAccount: 'shop1', product: BACKCONNECT, draw: 'pwd', sessTime: 5, limitBytes: -1 },
  { name: 'lines', password: 'lines-pass', mainAccount: 'shop1', product: DISTINCT, draw: 'pwd', sessTime: 5, limitBytes: -1 },
];

interface PoolView {
  key: { user: string };
  nodes: Array<{ id: string }>;
  quietUntil?: number;
}

const draws = (gw: Gateway): number => gw.daemon.sim?.inspect.calls().DrawByPwd ?? 0;

describe('drawing from a backconnect gateway', () => {
  let gw: Gateway;
  let target: Target;
  before(async () => {
    target = await startTarget();
    gw = await startGateway({ config: { users: USERS, platform: { sandbox: { backconnect: [BACKCONNECT] } } } });
  });
  after(async () => {
    await gw?.close();
    await target?.close();
  });

  test('the pool holds the one line the sandbox answers on every draw', async () => {
    // Two tunnels first, so the pool exists; then its one node is the whole pool, drawn once.
    for (let i = 0; i < 2; i++)
      assert.equal((await nodeConnectGet(gw.ports.http, 'gwuser', 'gwuser-pass', target.port, '/a', 15_000)).status, 200);
    const pool = await waitFor('the gateway user pool', async () =>
      (await gw.admin<PoolView[]>('/v1/pools')).body.find((p) => p.key.user === 'gwuser'),
    );
    assert.equal(pool.nodes.length, 1, JSON.stringify(pool.nodes));
  });

  test('1,000 tunnels make at most one DrawByPwd; the exits rotate at the gateway', async () => {
    const before = draws(gw);
    const exits = new Set<string>();
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < 1000) {
        const i = next++;
        const r =
          i % 2 === 0
            ? await nodeConnectGet(gw.ports.http, 'gwuser', 'gwuser-pass', target.port, '/t', 15_000)
            : await nodeSocksGet(gw.ports.socks5, 'gwuser', 'gwuser-pass', target.port, '/t', 15_000);
        assert.equal(r.status, 200, r.body);
        exits.add(r.body);
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    const made = draws(gw) - before;
    assert.ok(made <= 1, `${made} DrawByPwd calls for 1,000 tunnels`);
    assert.ok(exits.size > 1, `one exit only: ${[...exits].join(',')}`);
    assert.ok(
      [...exits].every((e) => gw.exits.includes(e)),
      [...exits].join(','),
    );
    const pool = (await gw.admin<PoolView[]>('/v1/pools')).body.find((p) => p.key.user === 'gwuser');
    assert.equal(pool?.nodes.length, 1);
    assert.ok((pool?.quietUntil ?? 0) > gw.clock.now(), 'the pool says when it draws again');
  });

  test('a product with distinct lines per draw still spreads connections over several nodes', async () => {
    const before = draws(gw);
    for (let i = 0; i < 12; i++)
      assert.equal((await nodeConnectGet(gw.ports.http, 'lines', 'lines-pass', target.port, '/d', 15_000)).status, 200);
    const pool = (await gw.admin<PoolView[]>('/v1/pools')).body.find((p) => p.key.user === 'lines');
    assert.ok((pool?.nodes.length ?? 0) >= 2, JSON.stringify(pool?.nodes));
    assert.equal(pool?.quietUntil, undefined);
    assert.ok(draws(gw) - before >= 1);
  });
});
