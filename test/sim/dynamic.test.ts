// Dynamic accounts on the sandbox: main/sub accounts, dynamic orders crediting MB or IPs, units of limits,
// traffic return, whitelist, DrawByPwd string forms and the DrawByApi extraction link.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { SIM_PRODUCTS, startSimulator, type Simulator } from '../../src/sim/index.ts';
import type { PlatformClient } from '../../src/platform/client.ts';
import { clientFor, codeOf } from './helpers.ts';
import { orderFinal } from '../support/orders.ts';

const FLOW = SIM_PRODUCTS.dynamicTraffic; // base 1024
const FLOW_CN = SIM_PRODUCTS.dynamicTrafficCn; // base 1000
const IPS = SIM_PRODUCTS.dynamicIpCount;

describe('sandbox dynamic accounts', () => {
  let sim: Simulator;
  let client: PlatformClient;
  const settle = (orderNo: string) => orderFinal(client, orderNo);

  before(async () => {
    sim = await startSimulator({ orderDelayMs: 60, gatewayPorts: 2 });
    client = clientFor(sim);
    await client.call('CreateUser', { appUsername: 'shop', status: 1 });
  });
  after(async () => {
    client.close();
    await sim.close();
  });

  test('main accounts: same-name sub, modify on repeat, verification, 10051/10061/10052', async () => {
    const main = await client.call('CreateUser', { appUsername: 'acct', password: 'pw-1', status: 1 });
    assert.equal(main.appUsername, 'acct');
    assert.ok(main.username && main.username !== 'acct');
    const own = await client.call('GetProxyUserInfo', { appUsername: 'acct', productNo: FLOW });
    assert.equal(own.limitFlow, -1);
    const modified = await client.call('CreateUser', { appUsername: 'acct', status: 2 });
    assert.equal(modified.status, 2);
    assert.equal(modified.username, main.username);
    assert.equal(
      await codeOf(client.call('CreateProxyUser', { appMainUsername: 'acct', appUsername: 'x1', limitFlow: 0, status: 1 })),
      10061,
    );
    await client.call('CreateUser', { appUsername: 'acct', status: 1 });
    await client.call('CreateProxyUser', { appMainUsername: 'acct', appUsername: 'acct-sub', limitFlow: 0, status: 1 });
    assert.equal(
      await codeOf(client.call('CreateProxyUser', { appMainUsername: 'acct', appUsername: 'acct-sub', limitFlow: 0, status: 1 })),
      10061,
    );
    assert.equal(
      await codeOf(client.call('CreateProxyUser', { appMainUsername: 'ghost', appUsername: 'x2', limitFlow: 0, status: 1 })),
      10061,
    );
    assert.equal(await codeOf(client.call('CreateUser', { appUsername: 'acct-sub', status: 1 })), 10051);
    const auth = await client.call('UserAuth', { username: main.username!, authType: 2 });
    assert.equal(auth.authStatus, 2);
    assert.equal(await codeOf(client.call('UserAuth', { appUsername: 'ghost', authType: 2 })), 10052);
    const generated = await client.call('CreateUser', { status: 1 });
    assert.ok(generated.appUsername && generated.password);
  });

  test('traffic orders credit MB per product base; IP orders credit IPs; charges per seed 4.3 rule 4', async () => {
    const o1 = await client.call('InstanceOpen', { appOrderNo: 'dyn-1', params: [{ productNo: FLOW, appUsername: 'shop', flow: 200 }] });
    assert.equal(o1.amount, '0.80');
    const o2 = await client.call('InstanceOpen', {
      appOrderNo: 'dyn-2',
      params: [
        { productNo: FLOW_CN, appUsername: 'shop', flow: 100 },
        { productNo: IPS, appUsername: 'shop', count: 20 },
      ],
    });
    assert.equal(o2.amount, '4.30');
    const done = await settle(o1.orderNo);
    assert.equal(done.status, 3);
    const pkg = done.instances![0]!;
    assert.equal(pkg.flowTotal, 200);
    assert.equal(pkg.productNo, FLOW);
    await settle(o2.orderNo);
    const info = (await client.call('ProxyInfo', { appUsername: 'shop', proxyType: 104, productNo: FLOW })).list![0]!;
    assert.equal(info.total, 200);
    assert.equal(info.balance, 200);
    assert.equal(sim.inspect.balance('shop', FLOW)!.totalBytes, 200 * 1_048_576);
    assert.equal(sim.inspect.balance('shop', FLOW_CN)!.totalBytes, 100 * 1_000_000);
    const ips = (await client.call('ProxyInfo', { appUsername: 'shop', proxyType: 104, productNo: IPS })).list![0]!;
    assert.equal(ips.ipTotal, 20);
    assert.equal(
      await codeOf(client.call('InstanceOpen', { appOrderNo: 'dyn-3', params: [{ productNo: FLOW, appUsername: 'ghost', flow: 200 }] })),
      10071,
    );
    assert.equal(
      await codeOf(client.call('InstanceOpen', { appOrderNo: 'dyn-4', params: [{ productNo: FLOW, appUsername: 'shop', flow: 10 }] })),
      10004,
    );
    assert.equal(
      await codeOf(client.call('InstanceOpen', { appOrderNo: 'dyn-5', params: [{ productNo: IPS, appUsername: 'shop', count: 15 }] })),
      10004,
    );
    assert.equal(await codeOf(client.call('ProxyInfo', { appUsername: 'shop', proxyType: 105, productNo: FLOW })), 10004);
  });

  test('sub-account limits: MB at create (per product base), bytes at set-limit', async () => {
    await client.call('CreateProxyUser', { appMainUsername: 'shop', appUsername: 'alice', limitFlow: 10, status: 1, password: 'alice-pw' });
    assert.equal((await client.call('GetProxyUserInfo', { appUsername: 'alice', productNo: FLOW })).limitFlow, 10 * 1_048_576);
    assert.equal((await client.call('GetProxyUserInfo', { appUsername: 'alice', productNo: FLOW_CN })).limitFlow, 10 * 1_000_000);
    assert.equal(await client.call('SetProxyUserFlowLimit', { appUsername: 'alice', productNo: FLOW, limitFlow: 2_048_000 }), null);
    const info = await client.call('GetProxyUserInfo', { appUsername: 'alice', productNo: FLOW });
    assert.equal(info.limitFlow, 2_048_000);
    assert.equal(info.useFlow, 0);
    await client.call('SetProxyUserFlowLimit', { appUsername: 'alice', productNo: FLOW, limitFlow: -1 });
    assert.equal((await client.call('GetProxyUserInfo', { appUsername: 'alice', productNo: FLOW })).limitFlow, -1);
    assert.equal(await codeOf(client.call('SetProxyUserFlowLimit', { appUsername: 'nobody', productNo: FLOW, limitFlow: -1 })), 10062);
    assert.equal(await codeOf(client.call('SetProxyUserFlowLimit', { appUsername: 'alice', productNo: IPS, limitFlow: -1 })), 10004);
  });

  test('traffic return refunds to coin; more than the balance → 10081', async () => {
    const coin = Number(sim.inspect.merchant().coin);
    const back = await client.call('DynamicProxyReturn', { appUsername: 'shop', proxyType: 104, productNo: FLOW, flowNum: 50 });
    assert.equal(back.returnAmount, 0.2);
    assert.equal(Number(sim.inspect.merchant().coin), Math.round((coin + 0.2) * 100) / 100);
    assert.equal((await client.call('ProxyInfo', { appUsername: 'shop', proxyType: 104, productNo: FLOW })).list![0]!.total, 150);
    assert.equal(
      await codeOf(client.call('DynamicProxyReturn', { appUsername: 'shop', proxyType: 104, productNo: FLOW, flowNum: 151 })),
      10081,
    );
    const ipBack = await client.call('DynamicProxyReturn', { appUsername: 'shop', proxyType: 104, productNo: IPS, ipNum: 5 });
    assert.equal(ipBack.returnAmount, 1);
  });

  test('whitelist add and delete per main account and product', async () => {
    assert.deepEqual(
      (await client.call('AddIpWhiteList', { appUsername: 'shop', ip: '10.1.2.3', proxyType: 104, productNo: FLOW })).ipWhiteList,
      ['10.1.2.3'],
    );
    assert.deepEqual(
      (await client.call('AddIpWhiteList', { appUsername: 'shop', ip: '10.1.2.4', proxyType: 104, productNo: FLOW })).ipWhiteList,
      ['10.1.2.3', '10.1.2.4'],
    );
    assert.deepEqual((await client.call('DelIpWhiteList', { appUsername: 'shop', ip: '10.1.2.3', productNo: FLOW })).ipWhiteList, [
      '10.1.2.4',
    ]);
    assert.deepEqual((await client.call('ProxyInfo', { appUsername: 'shop', proxyType: 104, productNo: FLOW })).list![0]!.ipWhiteList, [
      '10.1.2.4',
    ]);
    assert.equal(
      await codeOf(client.call('AddIpWhiteList', { appUsername: 'shop', ip: 'not-an-ip', proxyType: 104, productNo: FLOW })),
      10004,
    );
    assert.equal(
      await codeOf(client.call('AddIpWhiteList', { appUsername: 'ghost', ip: '10.0.0.1', proxyType: 104, productNo: FLOW })),
      10052,
    );
    await client.call('DelIpWhiteList', { appUsername: 'shop', ip: '10.1.2.4', productNo: FLOW });
  });

  test('DrawByPwd: one string form per product, gateway ports, region and sub-account checks', async () => {
    const gw = sim.upstreams!.gatewayPorts;
    const a = await client.call('DrawByPwd', { appUsername: 'alice', productNo: FLOW, num: 3, addressCode: 'USA005', sessTime: '10' });
    const list = a.list[0]!.list!;
    assert.equal(list.length, 3);
    assert.equal(a.list[0]!.proxyUrl, list[0]);
    for (const s of list) {
      const u = new URL(s);
      assert.equal(u.protocol, 'socks5:');
      assert.ok(gw.includes(Number(u.port)));
      assert.equal(decodeURIComponent(u.password), 'alice-pw');
    }
    assert.equal(new Set(list).size, 3, 'each string carries its own session');
    const cn = (await client.call('DrawByPwd', { appUsername: 'alice', productNo: FLOW_CN })).list[0]!.list![0]!;
    assert.match(cn, /^127\.0\.0\.1:\d+:[^:]+:alice-pw$/);
    const ip = (await client.call('DrawByPwd', { appUsername: 'alice', productNo: IPS })).list[0]!.list![0]!;
    assert.match(ip, /^[^:@]+:alice-pw@127\.0\.0\.1:\d+$/);
    assert.equal(sim.inspect.balance('shop', IPS)!.ipUsed, 1);
    assert.equal(await codeOf(client.call('DrawByPwd', { appUsername: 'nobody', productNo: FLOW })), 10092);
    assert.equal(await codeOf(client.call('DrawByPwd', { appUsername: 'alice', productNo: FLOW, addressCode: 'ZZZ' })), 10091);
  });

  test('DrawByApi: the link refuses until whitelisted, then serves txt with each delimiter and json', async () => {
    const draw = async (extra: Record<string, unknown>) =>
      (await client.call('DrawByApi', { appUsername: 'shop', proxyType: 104, productNo: FLOW, num: 3, ...extra })).list[0]!.proxyUrl;
    const link = await draw({});
    assert.ok(link.startsWith(`${sim.baseUrl}/sim/extract/`));
    const refused = JSON.parse(await (await fetch(link)).text()) as { code: number; msg: string };
    assert.notEqual(refused.code, 0);
    assert.match(refused.msg, /whitelist/);
    await client.call('AddIpWhiteList', { appUsername: 'shop', ip: '127.0.0.1', proxyType: 104, productNo: FLOW });
    const port = await sim.upstreams!.whitelistPort('shop', FLOW);
    const entry = `127.0.0.1:${port}`;
    const delimiters: Record<number, string> = { 1: '\r\n', 2: '/br', 3: '\r', 4: '\n', 5: '\t' };
    for (const [d, sep] of Object.entries(delimiters)) {
      const text = await (await fetch(await draw({ delimiter: Number(d) }))).text();
      assert.equal(text, [entry, entry, entry].join(sep), `delimiter ${d}`);
    }
    const json = (await (await fetch(await draw({ returnType: 'json', num: 2 }))).json()) as {
      code: number;
      data: { ip: string; port: number }[];
    };
    assert.equal(json.code, 0);
    assert.deepEqual(json.data, [
      { ip: '127.0.0.1', port },
      { ip: '127.0.0.1', port },
    ]);
    assert.equal(await codeOf(client.call('DrawByApi', { appUsername: 'ghost', proxyType: 104, productNo: FLOW })), 10052);
  });
});
