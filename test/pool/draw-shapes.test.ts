// Every DrawByPwd answer shape the seed allows (proxyUrl a gateway with full lines, host:port:user:pass or
// user:pass pairs; proxyUrl a full line with list empty; proxyUrl an extraction link), answered by the real
// sandbox (its pwdDrawShape setting) through the real client: the drawer yields exactly the nodes drawn,
// each with credentials, each one carrying bytes through the sandbox's gateway; a gateway address never
// becomes a node. Then the odd shapes a platform might send, with what is dropped said once at warn.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { SIM_PRODUCTS, type Simulator } from '../../src/sim/index.ts';
import { PWD_DRAW_SHAPES } from '../../src/sim/platform/faults.ts';
import { PlatformClient } from '../../src/platform/client.ts';
import { PwdDrawer, drawApiFromClient, type DrawApi } from '../../src/pool/drawer.ts';
import { readPwdAnswer } from '../../src/pool/pwd-answer.ts';
import { orderSucceeded } from '../support/orders.ts';
import { startPoolSandbox, type PoolSandbox } from '../support/pool-sandbox.ts';
import { captureLogger } from '../support/logger.ts';

let box: PoolSandbox;
let sim: Simulator;
let client: PlatformClient;

before(async () => {
  box = await startPoolSandbox();
  ({ sim, client } = box);
  const o = await client.call('InstanceOpen', {
    appOrderNo: 'shapes-1',
    params: [{ productNo: SIM_PRODUCTS.dynamicTraffic, appUsername: 'shop1', flow: 100 }],
  });
  await orderSucceeded(client, o.orderNo);
});

after(() => box.close());

describe('DrawByPwd shapes from the sandbox', () => {
  for (const shape of PWD_DRAW_SHAPES) {
    test(`shape '${shape}': exactly the drawn nodes, each with credentials, each working`, async () => {
      sim.faults.set({ pwdDrawShape: shape });
      // What the platform answered, read raw, to know which nodes it listed.
      const seen: unknown[] = [];
      const real = drawApiFromClient(client);
      const api: DrawApi = {
        drawByPwd: async (req) => {
          const res = await real.drawByPwd(req);
          seen.push(res);
          return res;
        },
        drawByApi: (req) => real.drawByApi(req),
      };
      const drawer = new PwdDrawer({ api, subAccount: 'alice', productNo: SIM_PRODUCTS.dynamicTraffic, sessTime: 5 });
      const nodes = await drawer.draw(5);
      assert.equal(nodes.length, 5, `${shape}: ${JSON.stringify(seen)}`);
      assert.equal(new Set(nodes.map((n) => n.id)).size, 5);
      for (const n of nodes) {
        assert.ok(n.username && n.password, `${shape}: node without credentials ${n.id}`);
        assert.ok(sim.upstreams!.gatewayPorts.includes(n.port), `${shape}: ${n.id} is not on a gateway port`);
      }
      // No node is a gateway address on its own (the bug: socks5://host:port without credentials).
      assert.ok(!nodes.some((n) => n.username === undefined));
      for (const n of nodes) assert.equal(await box.echoThrough(n), 'echo:ping', `${shape}: ${n.id}`);
    });
  }
  after(() => sim.faults.set({ pwdDrawShape: 'lines' }));
});

describe('odd answers: what yields a node and what is dropped', () => {
  test('a gateway alone, a list of bare host:port, a pair without a gateway: no node; reasons said once at warn', async () => {
    const answers = [
      { list: [{ proxyUrl: '10.0.0.1:7000', list: [] }] },
      { list: [{ proxyUrl: '10.0.0.1:7000', list: ['10.0.0.2:7001', 'u1:p1'] }] },
      { list: [{ list: ['u2:p2', '10.0.0.3:7002'] }] },
    ];
    let i = 0;
    const api: DrawApi = { drawByPwd: async () => answers[i++]!, drawByApi: async () => ({ list: [] }) };
    const { logger, text } = captureLogger('warn');
    const drawer = new PwdDrawer({ api, subAccount: 'a', productNo: 'P', logger });
    await assert.rejects(drawer.draw(1), /none a proxy address \(no_credentials\)/);
    const second = await drawer.draw(2);
    assert.deepEqual(
      second.map((n) => n.id),
      ['socks5://u1@10.0.0.1:7000'],
    );
    assert.equal(second[0]!.password, 'p1');
    await assert.rejects(drawer.draw(2), /pair_without_gateway/);
    const lines = text()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { reason: string; msg: string; level: number });
    assert.deepEqual(lines.map((l) => l.reason).sort(), ['no_credentials', 'pair_without_gateway']);
    assert.ok(lines.every((l) => l.level === 40));
    // Passwords never in the log.
    assert.ok(!text().includes('p1') && !text().includes('p2'));
  });

  test('readPwdAnswer: numeric passwords join the gateway; full lines keep their own address; http gateway scheme carries over', () => {
    const r = readPwdAnswer(
      [
        { proxyUrl: 'http://10.0.0.9:8080', list: ['user:12345', '10.0.0.8:9000:v:w', 'socks5://x:y@10.0.0.7:1080'] },
        { proxyUrl: 'socks5://k:l@10.0.0.6:1081' },
      ],
      'socks5',
    );
    assert.deepEqual(
      r.proxies.map((p) => `${p.protocol}://${p.username}:${p.password}@${p.host}:${p.port}`),
      ['http://user:12345@10.0.0.9:8080', 'http://v:w@10.0.0.8:9000', 'socks5://x:y@10.0.0.7:1080', 'socks5://k:l@10.0.0.6:1081'],
    );
    assert.deepEqual(r.dropped, []);
  });

  test('readPwdAnswer: an extraction link with a query but no path is a link, not an unparsable line', () => {
    const r = readPwdAnswer(
      [
        { proxyUrl: 'http://127.0.0.1:8080?key=abc&num=5' },
        { proxyUrl: 'https://127.0.0.1/extract/t1' },
        { proxyUrl: 'http://127.0.0.1:8080' },
      ],
      'socks5',
    );
    assert.deepEqual(r.links, ['http://127.0.0.1:8080?key=abc&num=5', 'https://127.0.0.1/extract/t1']);
    assert.deepEqual(r.dropped, [{ reason: 'no_credentials', detail: '127.0.0.1:8080' }]);
  });
});
