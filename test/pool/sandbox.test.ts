// Drawing from the real sandbox platform through the real client, then leaving through a drawn node: the
// parser's output must be credentials the sandbox's upstreams accept.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { PlatformClient } from '../../src/platform/client.ts';
import { ApiDrawer, PwdDrawer, drawApiFromClient } from '../../src/pool/drawer.ts';
import { Pool } from '../../src/pool/pool.ts';
import { orderSucceeded } from '../support/orders.ts';
import { startPoolSandbox, type PoolSandbox } from '../support/pool-sandbox.ts';

let box: PoolSandbox;
let client: PlatformClient;

const waitOrder = (orderNo: string): Promise<void> => orderSucceeded(client, orderNo);

before(async () => {
  box = await startPoolSandbox();
  ({ client } = box);
  for (const [i, productNo] of [SIM_PRODUCTS.dynamicTraffic, SIM_PRODUCTS.dynamicTrafficCn].entries()) {
    const o = await client.call('InstanceOpen', { appOrderNo: `pool-test-${i}`, params: [{ productNo, appUsername: 'shop1', flow: 100 }] });
    await waitOrder(o.orderNo);
  }
});

after(() => box.close());

describe('drawing from the sandbox', () => {
  test('PwdDrawer: URL form (DYN-104) and colon form (DYN-105) parse into working nodes', async () => {
    const api = drawApiFromClient(client);
    for (const productNo of [SIM_PRODUCTS.dynamicTraffic, SIM_PRODUCTS.dynamicTrafficCn]) {
      const drawer = new PwdDrawer({ api, subAccount: 'alice', productNo, sessTime: 5, protocol: 'socks5' });
      const nodes = await drawer.draw(3);
      assert.equal(nodes.length, 3, productNo);
      assert.ok(nodes.every((n) => n.username && n.password && n.expiresAt && n.source === 'pwd'));
      assert.equal(await box.echoThrough(nodes[0]!), 'echo:ping', productNo);
    }
  });

  test('a pool fed by PwdDrawer hands out sandbox nodes', async () => {
    const drawer = new PwdDrawer({
      api: drawApiFromClient(client),
      subAccount: 'alice',
      productNo: SIM_PRODUCTS.dynamicTraffic,
      sessTime: 5,
    });
    const pool = new Pool({
      key: { user: 'alice', productNo: SIM_PRODUCTS.dynamicTraffic, region: '' },
      drawer,
      lowWater: 0,
      drawBatch: 4,
    });
    const a = await pool.acquire();
    const b = await pool.acquire();
    assert.notEqual(a.id, b.id);
    assert.equal(await box.echoThrough(b), 'echo:ping');
    assert.equal(pool.snapshot().ready, 4);
    pool.close();
  });

  test('PwdDrawer: a platform refusal surfaces with its code', async () => {
    const drawer = new PwdDrawer({ api: drawApiFromClient(client), subAccount: 'nobody', productNo: SIM_PRODUCTS.dynamicTraffic });
    await assert.rejects(drawer.draw(1), (err: unknown) => (err as { platformCode?: number }).platformCode === 10092);
  });

  test('ApiDrawer: txt with /br and json extraction links from the whitelist', async () => {
    const api = drawApiFromClient(client);
    const productNo = SIM_PRODUCTS.dynamicTraffic;
    const refused = new ApiDrawer({ api, mainAccount: 'shop1', productNo, proxyType: 104 });
    await assert.rejects(
      refused.draw(2),
      (err: unknown) => (err as { code?: string }).code === 'EXTRACTION_FAILED' && /whitelist/.test((err as Error).message),
    );
    await client.call('AddIpWhiteList', { appUsername: 'shop1', ip: '127.0.0.1', proxyType: 104, productNo });
    for (const opts of [{ returnType: 'txt' as const, delimiter: 2 as const }, { returnType: 'json' as const }]) {
      const drawer = new ApiDrawer({ api, mainAccount: 'shop1', productNo, proxyType: 104, ...opts });
      const nodes = await drawer.draw(3);
      assert.ok(nodes.length >= 1);
      assert.ok(nodes.every((n) => n.source === 'api' && n.username === undefined));
      assert.equal(await box.echoThrough(nodes[0]!), 'echo:ping');
    }
  });
});
