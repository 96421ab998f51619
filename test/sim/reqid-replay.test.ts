// Seed part 5: "reqId: unique per request; on a retry after failure or timeout, keep the same value". The
// sandbox reads it as the platform recognising a retry: the same reqId with the same operation and params is
// answered with its first answer and not processed again (src/sim/platform/replays.ts), so a retried traffic
// return (DynamicProxyReturn: money, no merchant number) whose first reply was lost returns once. The same reqId
// with other params is a new request; the failure knob's 500 (nothing done) is not remembered; and
// `replayReqIds: false` plays a platform that processes every retry again.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { SIM_PRODUCTS, startSimulator, type Simulator } from '../../src/sim/index.ts';
import type { PlatformClient } from '../../src/platform/client.ts';
import { buyTraffic } from '../support/orders.ts';
import { clientFor, rawCall } from './helpers.ts';

const FLOW = SIM_PRODUCTS.dynamicTraffic; // base 1024
const MB = 1_048_576;

let sim: Simulator;
let client: PlatformClient;
before(async () => {
  sim = await startSimulator({ orderDelayMs: 30 });
  client = clientFor(sim);
  await client.call('CreateUser', { appUsername: 'shop', status: 1 });
  await buyTraffic(client, 'shop', FLOW, 1000);
});
after(async () => {
  client.close();
  await sim.close();
});

const total = () => sim.inspect.balance('shop', FLOW)!.totalBytes;
const refunds = () => sim.inspect.charges().filter((c) => c.operation === 'DynamicProxyReturn').length;
const ret = (flowNum: number) => ({ appUsername: 'shop', proxyType: 104, productNo: FLOW, flowNum });

test('a retried reqId gets its first answer again and is not processed twice; other params under it are a new request', async () => {
  const [t0, r0] = [total(), refunds()];
  const first = await rawCall(sim, 'DynamicProxyReturn', ret(10), { reqId: 'ret-1' });
  const again = await rawCall(sim, 'DynamicProxyReturn', ret(10), { reqId: 'ret-1' });
  assert.equal(first.code, 200);
  assert.deepEqual(again, first, 'the first answer again');
  assert.equal(t0 - total(), 10 * MB, 'returned once');
  assert.equal(refunds() - r0, 1);
  const other = await rawCall(sim, 'DynamicProxyReturn', ret(20), { reqId: 'ret-1' });
  assert.equal(other.code, 200);
  assert.equal(t0 - total(), 30 * MB, 'other params under the same reqId: processed');
});

test('a reply lost after the work was done: the retry under the same reqId is answered, not done again', async () => {
  const [t0, r0] = [total(), refunds()];
  sim.faults.dropNext(1, 'DynamicProxyReturn');
  await assert.rejects(rawCall(sim, 'DynamicProxyReturn', ret(10), { reqId: 'ret-drop' }));
  assert.equal(t0 - total(), 10 * MB, 'the dropped call did the work');
  const retry = await rawCall(sim, 'DynamicProxyReturn', ret(10), { reqId: 'ret-drop' });
  assert.equal(retry.code, 200);
  assert.deepEqual(retry.value, { returnAmount: 0.04 });
  assert.equal(t0 - total(), 10 * MB, 'not returned twice');
  assert.equal(refunds() - r0, 1);
});

test("the failure knob's 500 did nothing and is not remembered: the retry is processed", async () => {
  const t0 = total();
  sim.faults.failNext(1, 'DynamicProxyReturn');
  assert.equal((await rawCall(sim, 'DynamicProxyReturn', ret(10), { reqId: 'ret-fail' })).code, 500);
  assert.equal(total(), t0);
  assert.equal((await rawCall(sim, 'DynamicProxyReturn', ret(10), { reqId: 'ret-fail' })).code, 200);
  assert.equal(t0 - total(), 10 * MB);
});

test('replayReqIds false: a platform that processes every retry again', async () => {
  sim.faults.set({ replayReqIds: false });
  try {
    const t0 = total();
    await rawCall(sim, 'DynamicProxyReturn', ret(10), { reqId: 'ret-twice' });
    await rawCall(sim, 'DynamicProxyReturn', ret(10), { reqId: 'ret-twice' });
    assert.equal(t0 - total(), 20 * MB);
  } finally {
    sim.faults.reset();
  }
  const t1 = total();
  await rawCall(sim, 'DynamicProxyReturn', ret(10), { reqId: 'ret-once' });
  await rawCall(sim, 'DynamicProxyReturn', ret(10), { reqId: 'ret-once' });
  assert.equal(t1 - total(), 10 * MB, 'reset() turns the replays back on');
});

test('reads are never replayed: a retried ProxyInfo shows the balance as it is now (merchant-numbered orders: test/orders/final-at-placement)', async () => {
  const info = { appUsername: 'shop', proxyType: 104, productNo: FLOW };
  const first = await rawCall(sim, 'ProxyInfo', info, { reqId: 'read-1' });
  await rawCall(sim, 'DynamicProxyReturn', ret(10));
  const again = await rawCall(sim, 'ProxyInfo', info, { reqId: 'read-1' });
  const totalOf = (r: typeof first) => (r.value as { list: { total: number }[] }).list[0]!.total;
  assert.equal(totalOf(first) - totalOf(again), 10);
});

test('draws are not remembered (a second draw moves no money; its answer is the largest): a retried reqId draws again', async () => {
  await client.call('CreateProxyUser', { appMainUsername: 'shop', appUsername: 'cust-draw', limitFlow: -1, status: 1, password: 'pw-1' });
  const draw = { appUsername: 'cust-draw', productNo: FLOW, num: 1 };
  const a = await rawCall(sim, 'DrawByPwd', draw, { reqId: 'draw-1' });
  const b = await rawCall(sim, 'DrawByPwd', draw, { reqId: 'draw-1' });
  assert.equal(a.code, 200);
  assert.notDeepEqual(b.value, a.value, 'drawn again: other lines');
});
