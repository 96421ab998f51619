import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { PlatformClient } from '../../src/platform/client.ts';
import { SIM_PRODUCTS, startSimulator, type Simulator } from '../../src/sim/index.ts';
import { Catalog, isPurchasable } from '../../src/orders/index.ts';
import { FakePlatform } from '../platform/fake-platform.ts';

const client = (p: { baseUrl: string; appKey: string; appSecret: string }) =>
  new PlatformClient({ baseUrl: p.baseUrl, appKey: p.appKey, appSecret: p.appSecret, retries: 0, timeoutMs: 3000 });

describe('catalog on the sandbox', () => {
  let sim: Simulator;
  let c: PlatformClient;
  before(async () => {
    sim = await startSimulator({ upstreams: false });
    c = client(sim);
  });
  after(async () => {
    c.close();
    await sim.close();
  });

  test('dictionaries and listings; purchasable = enable 1 and inventory > 0', async () => {
    const cat = new Catalog({ client: c });
    const areas = await cat.areas();
    assert.ok(areas.some((a) => a.code === 'NA'));
    assert.ok((await cat.cities()).some((x) => x.cityCode === 'USA005001'));
    assert.ok((await cat.projects()).some((p) => p.code === 'tiktok'));
    const products = await cat.products();
    const by = new Map(products.map((p) => [p.productNo, p]));
    assert.equal(isPurchasable(by.get(SIM_PRODUCTS.staticUsSocks)!), true);
    assert.equal(isPurchasable(by.get(SIM_PRODUCTS.staticOffline)!), false, 'enable 2');
    assert.equal(isPurchasable(by.get(SIM_PRODUCTS.staticSoldOut)!), false, 'inventory 0');
    assert.equal(by.has(SIM_PRODUCTS.unauthorized), false);
    assert.deepEqual(
      (await cat.products({ proxyType: [104] })).every((p) => p.proxyType === 104),
      true,
    );
    assert.equal(await cat.product(SIM_PRODUCTS.unauthorized), undefined);
    assert.equal(cat.isAuthorized(SIM_PRODUCTS.unauthorized), false);
    // The platform's own offline segments are reported.
    assert.deepEqual(
      cat.offlineSegments(SIM_PRODUCTS.staticUsSocks).map((s) => s.cidr),
      ['192.0.2.0/26'],
    );
    assert.deepEqual(cat.availableSegments(by.get(SIM_PRODUCTS.staticUsSocks)!), ['198.51.100.0/24', '203.0.113.0/25']);
  });

  test('a product that disappears from a later listing is unauthorized; a product callback refreshes it', async () => {
    const cat = new Catalog({ client: c });
    await cat.products();
    assert.equal(cat.isAuthorized(SIM_PRODUCTS.staticDeYear), true);
    sim.faults.updateProduct(SIM_PRODUCTS.staticDeYear, { authorized: false });
    try {
      // cached listing still shows it; the product callback path drops the cache
      assert.equal(await cat.refreshProduct(SIM_PRODUCTS.staticDeYear), undefined);
      assert.equal(cat.isAuthorized(SIM_PRODUCTS.staticDeYear), false);
      const cat2 = new Catalog({ client: c });
      sim.faults.updateProduct(SIM_PRODUCTS.staticDeYear, { authorized: true });
      await cat2.products();
      sim.faults.updateProduct(SIM_PRODUCTS.staticDeYear, { authorized: false });
      cat2.invalidate();
      const later = await cat2.products();
      assert.equal(
        later.some((p) => p.productNo === SIM_PRODUCTS.staticDeYear),
        false,
      );
      assert.equal(cat2.isAuthorized(SIM_PRODUCTS.staticDeYear), false, 'missing from a full listing');
      // a filtered listing proves nothing about absent products
      const cat3 = new Catalog({ client: c });
      await cat3.product(SIM_PRODUCTS.staticSgDay);
      await cat3.products({ proxyType: [101], countryCode: 'USA' });
      assert.equal(cat3.isAuthorized(SIM_PRODUCTS.staticSgDay), true);
    } finally {
      sim.faults.updateProduct(SIM_PRODUCTS.staticDeYear, { authorized: true });
    }
    const back = await cat.refreshProduct(SIM_PRODUCTS.staticDeYear);
    assert.equal(back?.productNo, SIM_PRODUCTS.staticDeYear);
    assert.equal(cat.isAuthorized(SIM_PRODUCTS.staticDeYear), true);
  });
});

describe('catalog caching and segments (scripted platform)', () => {
  let fake: FakePlatform;
  let c: PlatformClient;
  let blocks = [
    { cidr: '10.0.0.0/24', count: 5 },
    { cidr: '10.0.1.0/24', count: 5 },
  ];
  before(async () => {
    fake = await new FakePlatform({
      responder: (op) => {
        if (op === 'GetArea') return [{ code: 'NA', cname: 'x' }];
        if (op === 'GetProductStock' || op === 'GetProductInfo') {
          const p = { productNo: 'P1', proxyType: 101, enable: 1, inventory: 3, cidrStatus: 1, cidrBlocks: blocks };
          return op === 'GetProductStock' ? [p] : p;
        }
        return {};
      },
    }).start();
    c = client(fake);
  });
  after(async () => {
    c.close();
    await fake.close();
  });

  test('TTL: dictionaries are reused until they expire; concurrent misses are one call', async () => {
    let now = 1_000_000;
    const cat = new Catalog({ client: c, ttlMs: 1000, now: () => now });
    fake.reset();
    await Promise.all([cat.areas(), cat.areas(), cat.areas()]);
    await cat.areas();
    assert.equal(fake.received.filter((r) => r.operation === 'GetArea').length, 1);
    now += 1500;
    await cat.areas();
    assert.equal(fake.received.filter((r) => r.operation === 'GetArea').length, 2);
  });

  test('a segment absent from a later listing is offline; it comes back when listed again', async () => {
    let now = 5000;
    const cat = new Catalog({ client: c, now: () => now });
    const first = await cat.products({ proxyType: [101] });
    assert.deepEqual(cat.availableSegments(first[0]!), ['10.0.0.0/24', '10.0.1.0/24']);
    blocks = [{ cidr: '10.0.0.0/24', count: 5 }];
    now = 6000;
    cat.invalidate();
    const second = await cat.products({ proxyType: [101] });
    assert.deepEqual(cat.offlineSegments('P1'), [{ cidr: '10.0.1.0/24', since: 6000 }]);
    assert.deepEqual(cat.availableSegments(second[0]!), ['10.0.0.0/24']);
    blocks = [
      { cidr: '10.0.0.0/24', count: 5 },
      { cidr: '10.0.1.0/24', count: 5 },
    ];
    await cat.product('P1', { fresh: true });
    assert.deepEqual(cat.offlineSegments('P1'), []);
  });
});
