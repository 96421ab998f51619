// Real clients through the sandbox's upstreams: curl in SOCKS5 and HTTP modes through drawn proxies,
// whitelist ports and static instances; every relayed byte is charged, exhaustion stops relays.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { SIM_PRODUCTS, startSimulator, type Simulator } from '../../src/sim/index.ts';
import type { PlatformClient } from '../../src/platform/client.ts';
import { clientFor } from './helpers.ts';
import { orderFinal } from '../support/orders.ts';
import { runCurl } from '../support/curl.ts';
import { startHttpTarget, type HttpTarget } from '../support/target.ts';

const FLOW = SIM_PRODUCTS.dynamicTraffic;

const curl = async (args: string[]): Promise<{ code: number; stdout: string }> => {
  const r = await runCurl(args, { maxTimeS: 10 });
  return { code: r.exitCode, stdout: r.stdout };
};

describe('sandbox traffic through real upstreams', () => {
  let sim: Simulator;
  let client: PlatformClient;
  let target: HttpTarget;
  /** /bytes/<n> of the target, or its root (which answers the peer address). */
  const targetUrl = (bytes?: number): string => target.url(bytes === undefined ? '/' : `/bytes/${bytes}`);
  const settle = (orderNo: string) => orderFinal(client, orderNo);
  /** socks5h:// form of a drawn socks5:// string */
  const socksArgs = (drawn: string) => ['-x', drawn.replace(/^socks5:/, 'socks5h:')];

  before(async () => {
    target = await startHttpTarget();
    sim = await startSimulator({ orderDelayMs: 60, gatewayPorts: 2 });
    client = clientFor(sim);
    await client.call('CreateUser', { appUsername: 'shop', status: 1 });
    await client.call('CreateProxyUser', { appMainUsername: 'shop', appUsername: 'bob', password: 'bob-pw', limitFlow: 0, status: 1 });
    const o = await client.call('InstanceOpen', { appOrderNo: 'traffic-1', params: [{ productNo: FLOW, appUsername: 'shop', flow: 100 }] });
    await settle(o.orderNo);
  });
  after(async () => {
    client.close();
    await sim.close();
    await target.close();
  });

  test('curl --socks5-hostname and -x http:// through drawn proxies reduce the balance by the bytes moved', async () => {
    const drawn = (await client.call('DrawByPwd', { appUsername: 'bob', productNo: FLOW, num: 2 })).list[0]!.list!;
    const before = sim.inspect.balance('shop', FLOW)!.usedBytes;
    const socks = await curl([...socksArgs(drawn[0]!), targetUrl(50000)]);
    assert.equal(socks.code, 0);
    assert.equal(socks.stdout.length, 50_000);
    const mid = sim.inspect.balance('shop', FLOW)!.usedBytes;
    assert.ok(mid - before >= 50_000 && mid - before < 52_000, `charged ${mid - before}`);
    const u = new URL(drawn[1]!);
    const http = await curl(['-p', '-x', `http://${u.username}:${u.password}@${u.hostname}:${u.port}`, targetUrl(30000)]);
    assert.equal(http.code, 0);
    const end = sim.inspect.balance('shop', FLOW)!.usedBytes;
    assert.ok(end - mid >= 30_000 && end - mid < 32_000, `charged ${end - mid}`);
    const info = await client.call('GetProxyUserInfo', { appUsername: 'bob', productNo: FLOW });
    assert.equal(info.useFlow, end);
    const bal = (await client.call('ProxyInfo', { appUsername: 'shop', proxyType: 104, productNo: FLOW })).list![0]!;
    assert.equal(Number(bal.used), Number((end / 1_048_576).toFixed(3)));
  });

  test('a wrong password is refused', async () => {
    const drawn = (await client.call('DrawByPwd', { appUsername: 'bob', productNo: FLOW })).list[0]!.list![0]!;
    const r = await curl(['-x', drawn.replace(/^socks5:/, 'socks5h:').replace(':bob-pw@', ':wrong@'), targetUrl()]);
    assert.notEqual(r.code, 0);
  });

  test('flow-use log: one entry per minute of traffic, newest first, paged', async () => {
    const drawn = (await client.call('DrawByPwd', { appUsername: 'bob', productNo: FLOW })).list[0]!.list![0]!;
    for (let i = 0; i < 2; i++) {
      sim.faults.advanceClock(61_000);
      assert.equal((await curl([...socksArgs(drawn), targetUrl(1000)])).code, 0);
    }
    const p1 = await client.call('ProxyFlowUseLog', { appUsername: 'shop', productNo: FLOW, pageSize: 2 });
    assert.equal(p1.total, 3);
    assert.equal(p1.list!.length, 2);
    const p2 = await client.call('ProxyFlowUseLog', { appUsername: 'shop', productNo: FLOW, pageSize: 2, page: 2 });
    assert.equal(p2.list!.length, 1);
    assert.equal(p2.curPage, 2);
    const [newest, middle] = p1.list!;
    assert.ok(Number(newest!.usedTime) > Number(middle!.usedTime));
    assert.ok(Number(newest!.used) >= 1000 && Number(newest!.used) < 2000);
    assert.equal(Number(newest!.total), 100 * 1_048_576);
    assert.equal(Number(newest!.balance), sim.inspect.balance('shop', FLOW)!.remainingBytes);
    const none = await client.call('ProxyFlowUseLog', {
      appUsername: 'shop',
      productNo: FLOW,
      startTime: '2000-01-01 00:00:00',
      endTime: '2000-01-02 00:00:00',
    });
    assert.equal(none.total, 0);
  });

  test('whitelist port from the extraction link relays for a whitelisted client and charges the main account', async () => {
    await client.call('AddIpWhiteList', { appUsername: 'shop', ip: '127.0.0.1', proxyType: 104, productNo: FLOW });
    const link = (await client.call('DrawByApi', { appUsername: 'shop', proxyType: 104, productNo: FLOW, delimiter: 4 })).list[0]!.proxyUrl;
    const entry = (await (await fetch(link)).text()).split('\n')[0]!;
    const before = sim.inspect.balance('shop', FLOW)!.usedBytes;
    const r = await curl(['--socks5-hostname', entry, targetUrl(20000)]);
    assert.equal(r.code, 0);
    assert.equal(r.stdout.length, 20_000);
    assert.ok(sim.inspect.balance('shop', FLOW)!.usedBytes - before >= 20_000);
  });

  test('sub-account limit and exhausted balance: running relay cut, new connections refused, draws still answer', async () => {
    await client.call('CreateProxyUser', { appMainUsername: 'shop', appUsername: 'carol', password: 'carol-pw', limitFlow: 0, status: 1 });
    await client.call('SetProxyUserFlowLimit', { appUsername: 'carol', productNo: FLOW, limitFlow: 1_024_000 });
    const drawn = (await client.call('DrawByPwd', { appUsername: 'carol', productNo: FLOW })).list[0]!.list![0]!;
    const cut = await curl([...socksArgs(drawn), targetUrl(3000000)]);
    assert.ok(cut.code !== 0 || cut.stdout.length < 3_000_000, 'the relay was cut');
    const used = (await client.call('GetProxyUserInfo', { appUsername: 'carol', productNo: FLOW })).useFlow;
    assert.ok(Number(used) >= 1_024_000 && Number(used) < 3_000_000, `used ${used}`);
    assert.notEqual((await curl([...socksArgs(drawn), targetUrl()])).code, 0, 'over the limit: refused');

    // main balance: give back all but ~1 MB, then exhaust it through bob
    const remaining = sim.inspect.balance('shop', FLOW)!.remainingBytes;
    await client.call('DynamicProxyReturn', {
      appUsername: 'shop',
      proxyType: 104,
      productNo: FLOW,
      flowNum: Math.floor(remaining / 1_048_576) - 1,
    });
    const left = sim.inspect.balance('shop', FLOW)!.remainingBytes;
    assert.ok(left > 1_000_000 && left <= 2 * 1_048_576);
    const bobs = (await client.call('DrawByPwd', { appUsername: 'bob', productNo: FLOW })).list[0]!.list![0]!;
    const big = await curl([...socksArgs(bobs), targetUrl(4000000)]);
    assert.ok(big.code !== 0 || big.stdout.length < 4_000_000);
    assert.equal(sim.inspect.balance('shop', FLOW)!.remainingBytes, 0);
    const again = (await client.call('DrawByPwd', { appUsername: 'bob', productNo: FLOW })).list[0]!.list![0]!;
    assert.notEqual((await curl([...socksArgs(again), targetUrl()])).code, 0, 'balance exhausted: refused');
  });

  test('static instance: relays with its credentials; change swaps them; release closes it', async () => {
    const o = await client.call('InstanceOpen', { appOrderNo: 'static-1', params: [{ productNo: SIM_PRODUCTS.staticUsSocks }] });
    const inst = (await settle(o.orderNo)).instances![0]!;
    const via = (i: typeof inst) => ['--socks5-hostname', `${i.ip}:${i.port}`, '--proxy-user', `${i.username}:${i.pwd}`, targetUrl(5000)];
    const first = await curl(via(inst));
    assert.equal(first.code, 0);
    assert.equal(first.stdout.length, 5000);
    const change = await client.call('ChangeProxy', { instanceNo: inst.instanceNo, appOrderNo: 'static-chg' });
    const changed = (await settle(change.orderNo)).instances![0]!;
    assert.equal(changed.instanceNo, inst.instanceNo);
    assert.equal((await curl(via(changed))).code, 0);
    assert.notEqual(
      (await curl([...via(changed).slice(0, 3), `${inst.username}:${inst.pwd}`, targetUrl()])).code,
      0,
      'old credentials refused',
    );
    const rel = await client.call('InstanceRelease', { orderNo: 'static-rel', instances: [inst.instanceNo] });
    await settle(rel.orderNo);
    assert.notEqual((await curl(via(changed))).code, 0, 'released: closed');
  });
});
