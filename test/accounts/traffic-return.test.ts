// A traffic return (DynamicProxyReturn) moves money each time the platform processes it and has no merchant
// number, and the seed does not say a platform recognises a resent reqId. Rotor (src/accounts/traffic.ts) never
// resends it: when the outcome is unknown it reads the product's `total` (or `ipTotal`) before and after; lower
// by exactly the amount: done; anything else (unchanged included): RETURN_OUTCOME_UNKNOWN (503) saying what the
// balance showed. Checked on the real sandbox over HTTP under both readings of reqId
// (faults `replayReqIds` true: a retry gets its first answer; false: a platform that processes every retry).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { SIM_PRODUCTS, startSimulator, type Simulator } from '../../src/sim/index.ts';
import { PlatformClient } from '../../src/platform/client.ts';
import { PlatformError } from '../../src/platform/errors.ts';
import { ProductCatalog } from '../../src/accounting/products.ts';
import { Traffic } from '../../src/accounts/traffic.ts';
import { AccountsError } from '../../src/accounts/errors.ts';
import { buyTraffic } from '../support/orders.ts';
import { poll } from '../support/wait.ts';

const FLOW = SIM_PRODUCTS.dynamicTraffic; // 104, base 1024, 0.004 a MB
const IPS = SIM_PRODUCTS.dynamicIpCount;
const MB = 1_048_576;

let sim: Simulator;
let client: PlatformClient;
let products: ProductCatalog;
before(async () => {
  sim = await startSimulator({ orderDelayMs: 30 });
  client = new PlatformClient({
    baseUrl: sim.baseUrl,
    appKey: sim.appKey,
    appSecret: sim.appSecret,
    retries: 3,
    backoff: { baseMs: 10, maxMs: 20 },
    timeoutMs: 3000,
  });
  products = new ProductCatalog({ client });
  await client.call('CreateUser', { appUsername: 'shop', status: 1 });
  await buyTraffic(client, 'shop', FLOW, 10_000);
  await buyTraffic(client, 'shop', IPS, 1);
});
after(async () => {
  client.close();
  await sim.close();
});

const total = () => sim.inspect.balance('shop', FLOW)!.totalBytes;
const refunds = () => sim.inspect.charges().filter((c) => c.operation === 'DynamicProxyReturn').length;

for (const replayReqIds of [true, false]) {
  describe(`a platform that ${replayReqIds ? 'answers a retried reqId with its first answer' : 'processes every retry again'}`, () => {
    before(() => sim.faults.set({ replayReqIds }));
    after(() => sim.faults.reset());

    test('the reply lost after the return was done: answered done (confirmed by the balance), returned once', async () => {
      const traffic = new Traffic({ client, products });
      const [t0, r0] = [total(), refunds()];
      sim.faults.dropNext(1, 'DynamicProxyReturn');
      const r = await traffic.returnTraffic({ account: 'shop', productNo: FLOW, flowNum: 100 });
      assert.deepEqual(r, { returnAmount: undefined, confirmedBy: 'balance' });
      assert.equal(t0 - total(), 100 * MB, 'returned once');
      assert.equal(refunds() - r0, 1);
    });

    test('code 500 with nothing done: not sent again; 503 saying the balance is unchanged; a new return then goes through once', async () => {
      const traffic = new Traffic({ client, products });
      const [t0, r0] = [total(), refunds()];
      sim.faults.failNext(1, 'DynamicProxyReturn');
      await assert.rejects(traffic.returnTraffic({ account: 'shop', productNo: FLOW, flowNum: 100 }), (e: unknown) => {
        assert.ok(e instanceof AccountsError && e.code === 'RETURN_OUTCOME_UNKNOWN', String(e));
        assert.match(e.message, /the platform answered 500; the balance's total is \d+ MB as before/);
        return true;
      });
      assert.equal(total(), t0, 'nothing returned');
      assert.equal(refunds(), r0);
      assert.deepEqual(await traffic.returnTraffic({ account: 'shop', productNo: FLOW, flowNum: 100 }), { returnAmount: 0.4 });
      assert.equal(t0 - total(), 100 * MB);
      assert.equal(refunds() - r0, 1);
    });

    test('no answer while the platform is still at work: 503 RETURN_OUTCOME_UNKNOWN naming the balance to read; it ends returned once', async () => {
      const quick = new PlatformClient({
        baseUrl: sim.baseUrl,
        appKey: sim.appKey,
        appSecret: sim.appSecret,
        retries: 3,
        backoff: { baseMs: 10, maxMs: 20 },
        timeoutMs: 3000,
      });
      // Only the return is slow (the latency knob is read when a call arrives): longer than the client waits.
      const impatient = new PlatformClient({
        baseUrl: sim.baseUrl,
        appKey: sim.appKey,
        appSecret: sim.appSecret,
        retries: 3,
        timeoutMs: 200,
      });
      const slow = {
        call: (async (name: string, params: never, options?: never) => {
          if (name !== 'DynamicProxyReturn') return quick.call(name as never, params, options);
          sim.faults.set({ latencyMs: 1500 });
          const p = impatient.call(name, params, options);
          p.catch(() => undefined); // handled by the caller; not unhandled while we wait
          await poll(() => sim.inspect.heldByLatency() > 0, { what: 'the return to be held', timeoutMs: 5_000 });
          sim.faults.set({ latencyMs: 0 });
          return p;
        }) as PlatformClient['call'],
      };
      const traffic = new Traffic({ client: slow, products });
      const [t0, r0] = [total(), refunds()];
      await assert.rejects(traffic.returnTraffic({ account: 'shop', productNo: FLOW, flowNum: 100 }), (e: unknown) => {
        assert.ok(e instanceof AccountsError, String(e));
        assert.equal(e.code, 'RETURN_OUTCOME_UNKNOWN');
        assert.equal(e.httpStatus, 503);
        assert.match(e.message, /GET \/v1\/accounts\/shop\/balance\?productNo=DYN-104-FLOW/);
        return true;
      });
      await poll(() => sim.inspect.heldByLatency() === 0 && refunds() > r0, { what: 'the held return to be done', timeoutMs: 10_000 });
      assert.equal(t0 - total(), 100 * MB, 'returned once, not resent');
      assert.equal(refunds() - r0, 1);
      quick.close();
      impatient.close();
    });

    test('two returns at once, the first reply lost: each is checked alone, both answered, two returns', async () => {
      const traffic = new Traffic({ client, products });
      const [t0, r0] = [total(), refunds()];
      sim.faults.dropNext(1, 'DynamicProxyReturn');
      const [a, b] = await Promise.all([
        traffic.returnTraffic({ account: 'shop', productNo: FLOW, flowNum: 100 }),
        traffic.returnTraffic({ account: 'shop', productNo: FLOW, flowNum: 50 }),
      ]);
      assert.deepEqual(a, { returnAmount: undefined, confirmedBy: 'balance' });
      assert.deepEqual(b, { returnAmount: 0.2 });
      assert.equal(t0 - total(), 150 * MB);
      assert.equal(refunds() - r0, 2);
    });

    test('IP-count products are checked by ipTotal; a refusal (10081) is no unknown outcome', async () => {
      const traffic = new Traffic({ client, products });
      const ip0 = sim.inspect.balance('shop', IPS)!.ipTotal;
      sim.faults.dropNext(1, 'DynamicProxyReturn');
      assert.deepEqual(await traffic.returnTraffic({ account: 'shop', productNo: IPS, ipNum: 1 }), {
        returnAmount: undefined,
        confirmedBy: 'balance',
      });
      assert.equal(ip0 - sim.inspect.balance('shop', IPS)!.ipTotal, 1);
      const r0 = refunds();
      await assert.rejects(
        traffic.returnTraffic({ account: 'shop', productNo: FLOW, flowNum: 1_000_000 }),
        (e: unknown) => e instanceof PlatformError && e.platformCode === 10081,
      );
      assert.equal(refunds(), r0);
    });
  });
}
