// The flow-use log's times (seed 4.19: `YYYY-MM-DD HH:MM:SS`, no zone) written on the platform's clock
// (`platform.timeZone`: an IANA zone or a fixed offset), and the default range ending with the platform's day.
// The real client on the sandbox behind test/support/platform-variants.ts, which shows what was asked.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ProductCatalog } from '../../src/accounting/products.ts';
import { Traffic } from '../../src/accounts/traffic.ts';
import { PlatformClient } from '../../src/platform/client.ts';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { startVariantPlatform, type VariantPlatform } from '../support/platform-variants.ts';

const T = Date.UTC(2026, 10, 29, 17, 30, 5); // 2026-11-29 17:30:05 UTC
const JULY = Date.UTC(2026, 6, 1, 12, 0, 0); // summer time in New York

describe('flow-use log times on the platform clock', () => {
  test('formatTime in each kind of zone', () => {
    const at = (zone: string | undefined, ms: number) =>
      new Traffic({
        client: { call: () => Promise.reject(new Error('no')) },
        products: {} as ProductCatalog,
        ...(zone ? { timeZone: zone } : {}),
      }).formatTime(ms);
    assert.equal(at(undefined, T), '2026-11-29 17:30:05');
    assert.equal(at('UTC', T), '2026-11-29 17:30:05');
    assert.equal(at('Asia/Shanghai', T), '2026-11-30 01:30:05');
    assert.equal(at('+08:00', T), '2026-11-30 01:30:05');
    assert.equal(at('+0800', T), '2026-11-30 01:30:05');
    assert.equal(at('-05:30', T), '2026-11-29 12:00:05');
    assert.equal(at('America/New_York', T), '2026-11-29 12:30:05');
    assert.equal(at('America/New_York', JULY), '2026-07-01 08:00:00');
    assert.equal(at('Asia/Shanghai', Date.UTC(2026, 10, 29, 16, 0, 0)), '2026-11-30 00:00:00');
  });

  describe('the range sent', () => {
    let platform: VariantPlatform;
    let client: PlatformClient;
    const asked: Array<Record<string, unknown>> = [];
    before(async () => {
      platform = await startVariantPlatform({
        reply: (op, params) => {
          if (op === 'ProxyFlowUseLog') asked.push(params);
          return undefined;
        },
      });
      client = new PlatformClient({ baseUrl: platform.url, appKey: platform.appKey, appSecret: platform.appSecret, retries: 0 });
      await client.call('CreateUser', { appUsername: 'tzshop', status: 1 });
    });
    after(async () => {
      client?.close();
      await platform?.close();
    });

    for (const [zone, start, end] of [
      ['UTC', '2026-11-22 17:30:05', '2026-11-29 23:59:59'],
      ['Asia/Shanghai', '2026-11-23 01:30:05', '2026-11-30 23:59:59'],
      ['+08:00', '2026-11-23 01:30:05', '2026-11-30 23:59:59'],
    ] as const) {
      test(`${zone}: the last 7 days up to the end of the platform's day`, async () => {
        const traffic = new Traffic({ client, products: new ProductCatalog({ client }), timeZone: zone, now: () => T });
        const page = await traffic.flowLog({ account: 'tzshop', productNo: SIM_PRODUCTS.dynamicTraffic });
        assert.deepEqual([page.startTime, page.endTime], [start, end]);
        const sent = asked.at(-1)!;
        assert.deepEqual([sent.startTime, sent.endTime], [start, end]);
      });
    }
  });
});
