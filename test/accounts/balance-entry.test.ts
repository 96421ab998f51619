// Which ProxyInfo entry is the balance of the product asked for (src/platform/balance-entry.ts), read by the
// balance watcher, the whitelist and the IP count. ProxyInfo is asked for one product, but a platform may list
// every product of the account (entries named, none for a product never bought), or name no product in its one
// entry. Rotor once took the first entry when this product had none: 2048 MB of DYN-105-FLOW shown as
// DYN-104-FLOW's balance, its whitelist taken as 104's (review15 #20). The real client on the sandbox behind
// test/support/platform-variants.ts; 2048 MB of DYN-105-FLOW bought, none of DYN-104-FLOW.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ProductCatalog } from '../../src/accounting/products.ts';
import { BalanceWatcher } from '../../src/accounts/balances.ts';
import { Whitelist } from '../../src/accounts/whitelist.ts';
import { balanceEntry } from '../../src/platform/balance-entry.ts';
import { PlatformClient } from '../../src/platform/client.ts';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { buyTraffic } from '../support/orders.ts';
import { startVariantPlatform, type VariantPlatform } from '../support/platform-variants.ts';

const FLOW = SIM_PRODUCTS.dynamicTraffic; // 104: nothing bought
const FLOW_CN = SIM_PRODUCTS.dynamicTrafficCn; // 105: 2048 MB bought
const MAIN = 'entryshop';
type Entry = Record<string, unknown>;

test('balanceEntry: own entry wherever it stands; else a lone unnamed one; never another product', () => {
  const e = (productNo: unknown, balance: string) => ({ productNo, balance }) as never;
  assert.equal(balanceEntry([e('B', '1'), e('A', '2')], 'A')?.balance, '2');
  for (const unnamed of [undefined, null, '']) assert.equal(balanceEntry([e(unnamed, '3')], 'A')?.balance, '3');
  assert.equal(balanceEntry([e('B', '1')], 'A'), undefined);
  assert.equal(balanceEntry([e('', '1'), e('', '2')], 'A'), undefined, 'two unnamed entries: which is not known');
  assert.equal(balanceEntry([], 'A'), undefined);
  assert.equal(balanceEntry(undefined, 'A'), undefined);
});

describe("a platform that answers ProxyInfo with every product's entry", () => {
  let platform: VariantPlatform;
  let client: PlatformClient;
  let products: ProductCatalog;
  /** The platform's answer for the product asked: its own list (undefined) or another. */
  let answer: ((asked: string, own: Entry[]) => Entry[]) | undefined;
  before(async () => {
    platform = await startVariantPlatform({
      data: (op, data, params) =>
        op === 'ProxyInfo' && answer ? { list: answer(String(params.productNo), (data as { list: Entry[] }).list) } : data,
    });
    const direct = new PlatformClient({
      baseUrl: platform.sim.baseUrl,
      appKey: platform.appKey,
      appSecret: platform.appSecret,
      retries: 0,
    });
    await direct.call('CreateUser', { appUsername: MAIN, status: 1 });
    await buyTraffic(direct, MAIN, FLOW_CN, 2048);
    await direct.call('AddIpWhiteList', { appUsername: MAIN, ip: '127.0.0.9', proxyType: 105, productNo: FLOW_CN });
    direct.close();
    client = new PlatformClient({ baseUrl: platform.url, appKey: platform.appKey, appSecret: platform.appSecret, retries: 0 });
    products = new ProductCatalog({ client });
  });
  after(async () => {
    client?.close();
    await platform?.close();
  });

  /** Every product the account has, each entry named (what such a platform lists whatever was asked). */
  const everyProduct = (): Entry[] => {
    const b = platform.sim.inspect.balance(MAIN, FLOW_CN)!;
    const mb = b.remainingBytes / 1_000_000;
    return [{ productNo: FLOW_CN, used: '0', total: mb, balance: String(mb), ipWhiteList: ['127.0.0.9'], ipUsed: 0, ipTotal: 0 }];
  };

  test("no entry for the product asked: its balance is 0 and its whitelist empty, not DYN-105-FLOW's", async () => {
    answer = () => everyProduct();
    const watcher = new BalanceWatcher({ client, products });
    const b = await watcher.fetch(MAIN, FLOW);
    assert.deepEqual([b.balanceMb, b.totalMb, b.hasBalance], [0, undefined, false], JSON.stringify(b));
    const whitelist = new Whitelist({
      client,
      products,
      store: { kvGet: () => Promise.resolve(undefined), kvSet: () => Promise.resolve() },
      egressIp: '127.0.0.1',
    });
    assert.deepEqual(await whitelist.list(MAIN, FLOW), []);
    // The product that has an entry reads its own.
    const cn = await watcher.fetch(MAIN, FLOW_CN);
    assert.deepEqual([cn.balanceMb, cn.hasBalance], [2048, true]);
    assert.deepEqual(await whitelist.list(MAIN, FLOW_CN), ['127.0.0.9']);
  });

  test('a lone entry naming no product is the one asked for', async () => {
    answer = (_asked, own) => own.map((e) => ({ ...e, productNo: '' }));
    const b = await new BalanceWatcher({ client, products }).fetch(MAIN, FLOW_CN);
    assert.deepEqual([b.balanceMb, b.hasBalance], [2048, true]);
  });
});
