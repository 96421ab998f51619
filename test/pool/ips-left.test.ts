// The IPs left in a package sold by IP count (src/pool/planned-drawer.ts ipsLeft: ProxyInfo ipTotal - ipUsed) on
// a real platform over HTTP (the sandbox behind test/support/platform-variants.ts) that writes the balance entry's
// `productNo` its own way. The seed does not require the field (2.11) and ProxyInfo is asked for one product, so
// an entry naming no product — absent, "" (Go's zero string) or null (Java) — is that product's. Rotor once took
// only an absent one: "" or null read as 0 IPs and every draw was refused "used up" (review15 #9).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { PlatformClient } from '../../src/platform/client.ts';
import { ipsLeft } from '../../src/pool/planned-drawer.ts';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { orderSucceeded } from '../support/orders.ts';
import { startVariantPlatform, type VariantPlatform } from '../support/platform-variants.ts';

const PRODUCT = SIM_PRODUCTS.dynamicIpCount;
const MAIN = 'ipshop';
type Entry = Record<string, unknown>;

describe('ipsLeft reads the balance entry of the product asked for', () => {
  let platform: VariantPlatform;
  let client: PlatformClient;
  /** What the platform writes in place of the sandbox's list (undefined: the sandbox's own answer). */
  let rewrite: ((list: Entry[]) => Entry[]) | undefined;
  before(async () => {
    platform = await startVariantPlatform({
      data: (op, data) => (op === 'ProxyInfo' && rewrite ? { list: rewrite((data as { list: Entry[] }).list) } : data),
    });
    const direct = new PlatformClient({
      baseUrl: platform.sim.baseUrl,
      appKey: platform.appKey,
      appSecret: platform.appSecret,
      retries: 0,
    });
    await direct.call('CreateUser', { appUsername: MAIN, status: 1 });
    const o = await direct.call('InstanceOpen', {
      appOrderNo: `ip${randomBytes(8).toString('hex')}`,
      params: [{ productNo: PRODUCT, appUsername: MAIN, count: 10, cycleTimes: 1 }],
    });
    await orderSucceeded(direct, o.orderNo);
    direct.close();
    client = new PlatformClient({ baseUrl: platform.url, appKey: platform.appKey, appSecret: platform.appSecret, retries: 0 });
  });
  after(async () => {
    client?.close();
    await platform?.close();
  });

  test("control: the sandbox's entry names the product: 10 IPs", async () => {
    rewrite = undefined;
    assert.equal(await ipsLeft(client, MAIN, PRODUCT, 104), 10);
  });

  for (const unnamed of ['', null, undefined]) {
    test(`an entry whose productNo is ${JSON.stringify(unnamed) ?? 'absent'}: 10 IPs`, async () => {
      rewrite = (list) => list.map(({ productNo: _, ...e }) => (unnamed === undefined ? e : { ...e, productNo: unnamed }));
      assert.equal(await ipsLeft(client, MAIN, PRODUCT, 104), 10);
    });
  }

  test("another product's entry is never read for this one (its own entry is, wherever it stands)", async () => {
    rewrite = (list) => [{ ...list[0], productNo: 'DYN-OTHER', ipTotal: 99, ipUsed: 0 }, ...list];
    assert.equal(await ipsLeft(client, MAIN, PRODUCT, 104), 10);
    rewrite = (list) => [{ ...list[0], productNo: 'DYN-OTHER', ipTotal: 99, ipUsed: 0 }];
    assert.equal(await ipsLeft(client, MAIN, PRODUCT, 104), 0);
  });
});
