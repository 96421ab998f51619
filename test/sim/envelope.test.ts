// The sandbox's wire: every operation answers at its path with the real envelope; secrets, tolerance,
// validation codes and the code-500 / latency / dropped-reply knobs.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { OPERATION_NAMES, operations, type OperationName } from '../../src/platform/operations.ts';
import { SIM_DEFAULTS, SIM_PRODUCTS, startSimulator, type Simulator } from '../../src/sim/index.ts';
import { rawCall, waitFor } from './helpers.ts';

describe('sandbox envelope', () => {
  let sim: Simulator;
  before(async () => {
    sim = await startSimulator({ orderDelayMs: 100, upstreams: false });
  });
  after(() => sim.close());

  test('defaults: a 32-byte secret and fixed key', () => {
    assert.equal(Buffer.byteLength(SIM_DEFAULTS.appSecret), 32);
    assert.equal(sim.appKey, SIM_DEFAULTS.appKey);
  });

  test('every operation of the table answers at its path with code 200', async () => {
    const ok = async (name: OperationName, params: unknown) => {
      const r = await rawCall(sim, name, params);
      assert.equal(r.code, 200, `${name}: ${r.code} ${r.msg}`);
      if (operations[name].response === null) assert.equal(r.data, undefined, `${name} carries no data`);
      else assert.ok(operations[name].response!.safeParse(r.value).success, `${name} response matches the table's schema`);
      return r.value as Record<string, unknown>;
    };
    const seen = new Set<OperationName>();
    const call = async (name: OperationName, params: unknown) => {
      seen.add(name);
      return ok(name, params);
    };
    const dyn = SIM_PRODUCTS.dynamicTraffic;
    await call('GetAppInfo', {});
    await call('GetArea', {});
    await call('GetCityList', { codes: ['USA'] });
    await call('GetProjectList', {});
    await call('GetProductStock', { proxyType: [101] });
    await call('GetProductInfo', { productNo: SIM_PRODUCTS.staticUsSocks });
    await call('ProductAreaList', { productNo: dyn, proxyType: 104 });
    await call('CreateUser', { appUsername: 'env-main', status: 1 });
    await call('UserAuth', { appUsername: 'env-main', authType: 3 });
    await call('CreateProxyUser', { appMainUsername: 'env-main', appUsername: 'env-sub', limitFlow: 10, status: 1 });
    const open = await call('InstanceOpen', {
      appOrderNo: 'env-open',
      params: [
        { productNo: SIM_PRODUCTS.staticUsSocks, count: 3 },
        { productNo: dyn, appUsername: 'env-main', flow: 200 },
      ],
    });
    const order = await waitFor(async () => {
      const o = (await rawCall(sim, 'GetOrder', { orderNo: open.orderNo })).value as {
        status: number;
        instances: { instanceNo: string; proxyType: number }[];
      };
      return o.status === 3 && o;
    });
    const [a, b, c] = order.instances.filter((i) => i.proxyType === 101).map((i) => i.instanceNo) as [string, string, string];
    await call('GetOrder', { orderNo: String(open.orderNo) });
    await call('GetInstance', { instances: [a] });
    await call('InstanceRenew', { appOrderNo: 'env-renew', instances: [{ instanceNo: a, cycleTimes: 1 }] });
    await call('ChangeProxy', { instanceNo: b, appOrderNo: 'env-change' });
    await call('ResetProxyPassword', { resetNo: 'env_reset', instanceNoList: [a] });
    await call('InstanceRelease', { orderNo: 'env-release', instances: [c] });
    await call('GetAssignIpInfo', { ip: '198.51.100.77' });
    await call('InstanceOpenAssignIp', {
      appOrderNo: 'env-assign',
      productNo: SIM_PRODUCTS.staticUsSocks,
      cycleTimes: 1,
      assignIp: '198.51.100.77',
    });
    await call('ProxyInfo', { appUsername: 'env-main', proxyType: 104, productNo: dyn });
    await call('DrawByPwd', { appUsername: 'env-sub', productNo: dyn, sessTime: '10' });
    await call('DrawByApi', { appUsername: 'env-main', proxyType: 104, productNo: dyn });
    await call('AddIpWhiteList', { appUsername: 'env-main', ip: '127.0.0.1', proxyType: 104, productNo: dyn });
    await call('DelIpWhiteList', { appUsername: 'env-main', ip: '127.0.0.1', productNo: dyn });
    await call('SetProxyUserFlowLimit', { appUsername: 'env-sub', productNo: dyn, limitFlow: 2_048_000 });
    await call('GetProxyUserInfo', { appUsername: 'env-sub', productNo: dyn });
    await call('ProxyFlowUseLog', { appUsername: 'env-main', productNo: dyn });
    await call('DynamicProxyReturn', { appUsername: 'env-main', proxyType: 104, productNo: dyn, flowNum: 50 });
    // after-sale last: it needs a running instance of its own
    await call('InstanceAfterSale', { orderNo: 'env-aftersale', instances: [a], reason: 'lag' });
    assert.deepEqual([...seen].sort(), [...OPERATION_NAMES].sort());
  });

  test('wrong secret and unknown appKey answer 10001', async () => {
    const wrong = await rawCall(sim, 'GetAppInfo', {}, { secret: 'x'.repeat(32) });
    assert.equal(wrong.code, 10001);
    assert.equal(wrong.data, undefined);
    const unknown = await rawCall(sim, 'GetAppInfo', {}, { appKey: 'nobody' });
    assert.equal(unknown.code, 10001);
  });

  test('tolerates version 2.0, encrypt in any case, missing reqId, empty and {} params', async () => {
    assert.equal((await rawCall(sim, 'GetAppInfo', {}, { version: '2.0', encrypt: 'AES' })).code, 200);
    const noReq = await rawCall(sim, 'GetAppInfo', {}, { reqId: undefined });
    assert.equal(noReq.code, 200);
    assert.equal((await rawCall(sim, 'GetAppInfo', {}, { params: '' })).code, 200);
    assert.equal((await rawCall(sim, 'GetArea', {})).code, 200);
    const echoed = await rawCall(sim, 'GetAppInfo', {}, { reqId: 'keep-me' });
    assert.equal(echoed.reqId, 'keep-me');
    assert.equal((await rawCall(sim, 'GetAppInfo', {}, { version: 'v3' })).code, 10004);
  });

  test('schema violations answer 10004; sessTime out of range 10093', async () => {
    const tooLong = await rawCall(sim, 'InstanceOpen', { appOrderNo: 'x'.repeat(33), params: [{ productNo: SIM_PRODUCTS.staticUsSocks }] });
    assert.equal(tooLong.code, 10004);
    assert.match(tooLong.msg, /appOrderNo/);
    const limit = await rawCall(sim, 'SetProxyUserFlowLimit', {
      appUsername: 'env-sub',
      productNo: SIM_PRODUCTS.dynamicTraffic,
      limitFlow: 1000,
    });
    assert.equal(limit.code, 10004);
    const sess = await rawCall(sim, 'DrawByPwd', { appUsername: 'env-sub', productNo: SIM_PRODUCTS.dynamicTraffic, sessTime: '121' });
    assert.equal(sess.code, 10093);
    // 105's range is 1-90 (pwdDrawSessionRange)
    const sessCn = await rawCall(sim, 'DrawByPwd', { appUsername: 'env-sub', productNo: SIM_PRODUCTS.dynamicTrafficCn, sessTime: '100' });
    assert.equal(sessCn.code, 10093);
  });

  test('unauthorized product is never listed and GetProductInfo refuses it', async () => {
    const all = (await rawCall(sim, 'GetProductStock', { proxyType: [101, 102, 103, 104, 105] })).value as { productNo: string }[];
    assert.ok(!all.some((p) => p.productNo === SIM_PRODUCTS.unauthorized));
    assert.ok(all.some((p) => p.productNo === SIM_PRODUCTS.staticOffline));
    assert.equal((await rawCall(sim, 'GetProductInfo', { productNo: SIM_PRODUCTS.unauthorized })).code, 10004);
  });

  test('code-500 knob fails the next call only; latency knob delays', async () => {
    sim.faults.failNext(1, 'GetAppInfo');
    assert.equal((await rawCall(sim, 'GetArea', {})).code, 200);
    assert.equal((await rawCall(sim, 'GetAppInfo', {})).code, 500);
    assert.equal((await rawCall(sim, 'GetAppInfo', {})).code, 200);
    sim.faults.latency(150);
    const t0 = Date.now();
    await rawCall(sim, 'GetAppInfo', {});
    assert.ok(Date.now() - t0 >= 140);
    sim.faults.latency(0);
  });

  test('inspection and knobs are reachable over HTTP under /sim', async () => {
    const m = (await (await fetch(`${sim.baseUrl}/sim/merchant`)).json()) as { coin: string };
    assert.equal(m.coin, sim.inspect.merchant().coin);
    await fetch(`${sim.baseUrl}/sim/faults`, { method: 'POST', body: JSON.stringify({ fail: { count: 1 } }) });
    assert.equal((await rawCall(sim, 'GetArea', {})).code, 500);
    assert.equal((await rawCall(sim, 'GetArea', {})).code, 200);
    const charges = (await (await fetch(`${sim.baseUrl}/sim/charges?no=env-open`)).json()) as unknown[];
    assert.equal(charges.length, 1);
    const unknown = await fetch(`${sim.baseUrl}/api/open/app/nothing/v2`, { method: 'POST', body: '{}' });
    assert.equal(unknown.status, 404);
  });
});
