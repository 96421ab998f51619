// The embedded sandbox's demo credit (src/sim/demo-credit.ts): an account without traffic gets the configured
// MB, the wait for the order runs on the sandbox's clock (here moved by the test, so the order's 60 s of
// platform time pass at once), and an account that already has a balance is left alone.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PlatformClient } from '../../src/platform/client.ts';
import { creditDemoFlow } from '../../src/sim/demo-credit.ts';
import { SIM_PRODUCTS, startSimulator, type Simulator } from '../../src/sim/index.ts';
import { clientFor } from './helpers.ts';

const FLOW = SIM_PRODUCTS.dynamicTraffic;

describe('sandbox demo credit', () => {
  let sim: Simulator;
  let client: PlatformClient;
  // Each poll's wait moves the sandbox clock by the poll period at once, so nothing waits for real time.
  const steppingClock = () => ({
    now: () => sim.clock.now(),
    schedule: (ms: number, fn: () => void) => {
      const cancel = sim.clock.schedule(ms, fn);
      sim.clock.advance(ms);
      return cancel;
    },
  });

  before(async () => {
    // A minute of platform time per order: only the injected clock can make this test quick.
    sim = await startSimulator({ orderDelayMs: 60_000, gatewayPorts: 1, clock: { speed: 1 } });
    client = clientFor(sim);
    await client.call('CreateUser', { appUsername: 'demo-main', status: 1 });
  });
  after(async () => {
    client.close();
    await sim.close();
  });

  test('an empty account is credited once; the order is awaited on the sandbox clock', async () => {
    const started = Date.now();
    const accounts = [
      { mainAccount: 'demo-main', product: FLOW },
      { mainAccount: 'demo-main', product: FLOW },
    ];
    await creditDemoFlow(accounts, { client, clock: steppingClock(), flowMb: 100, pollMs: 1000, maxPolls: 120 });
    assert.ok(Date.now() - started < 10_000, 'did not wait a minute of real time');
    const balance = sim.inspect.balance('demo-main', FLOW);
    assert.ok(balance, 'a balance exists');
    assert.equal(balance.totalBytes, 100 * 1024 * 1024, "100 MB at the product's base 1024");
    const demoOrders = sim.inspect.orders().filter((o) => String(o.appOrderNo).startsWith('demo'));
    assert.equal(demoOrders.length, 1, 'the duplicate (account, product) pair bought nothing more');

    await creditDemoFlow(accounts, { client, clock: steppingClock(), flowMb: 100 });
    assert.equal(
      sim.inspect.orders().filter((o) => String(o.appOrderNo).startsWith('demo')).length,
      1,
      'a credited account is not credited again',
    );
  });
});
