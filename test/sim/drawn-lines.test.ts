// The sandbox setting the bench uses (SimOptions.drawnLines, config platform.sandbox.drawnLines): DrawByPwd
// hands out the given proxy strings round robin for a product, instead of the sandbox's gateways, with the
// draw still checked (unknown sub account refused); other products keep the sandbox's own lines.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { SIM_PRODUCTS, startSimulator, type Simulator } from '../../src/sim/index.ts';
import type { PlatformClient } from '../../src/platform/client.ts';
import { clientFor, codeOf } from './helpers.ts';

const LINES = ['http://127.0.0.1:3128', 'socks5://u:p@127.0.0.1:1080'];
let sim: Simulator;
let client: PlatformClient;

before(async () => {
  sim = await startSimulator({ orderDelayMs: 60, gatewayPorts: 1, drawnLines: { [SIM_PRODUCTS.dynamicTraffic]: LINES } });
  client = clientFor(sim);
  await client.call('CreateUser', { appUsername: 'shop', status: 1 });
  await client.call('CreateProxyUser', { appMainUsername: 'shop', appUsername: 'shop-sub', limitFlow: 0, status: 1 });
});
after(async () => {
  client.close();
  await sim.close();
});

test('DrawByPwd answers the configured lines round robin for that product only', async () => {
  const a = await client.call('DrawByPwd', { appUsername: 'shop-sub', productNo: SIM_PRODUCTS.dynamicTraffic, num: 3 });
  assert.deepEqual(a.list[0]!.list, [LINES[0], LINES[1], LINES[0]]);
  const b = await client.call('DrawByPwd', { appUsername: 'shop-sub', productNo: SIM_PRODUCTS.dynamicTraffic, num: 1 });
  assert.deepEqual(b.list[0]!.list, [LINES[1]], 'the rotation continues across draws');
  const other = await client.call('DrawByPwd', { appUsername: 'shop-sub', productNo: SIM_PRODUCTS.dynamicTrafficCn });
  const line = other.list[0]!.list![0]!;
  assert.ok(
    !LINES.includes(line) && line.includes(`:${sim.upstreams!.gatewayPorts[0]}:`),
    `another product draws the sandbox's gateway: ${line}`,
  );
  assert.equal(await codeOf(client.call('DrawByPwd', { appUsername: 'nobody', productNo: SIM_PRODUCTS.dynamicTraffic })), 10092);
});
