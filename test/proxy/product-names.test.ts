// `-product-` names judged by the catalogue already loaded (src/proxy/product-names.ts, Router's admit): a
// product the catalogue holds is served, one it does not hold (or no longer) is refused 403 before any pool,
// and until a listing has loaded a product the catalogue has not seen is refused too (no look-up per
// connection); a failed listing is tried again until one loads. The user's own product is never judged.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ProductNames, type ProductCatalogue } from '../../src/proxy/product-names.ts';
import { Router } from '../../src/proxy/router.ts';
import { UnlimitedMeters } from '../support/meters.ts';
import { waitFor } from '../support/wait.ts';
import { FixedPool, FixedPools, MapSessions, Users, node, user } from './fixtures.ts';

/** A catalogue whose listing fails `failures` times first, then teaches it `listed`. */
class Listing implements ProductCatalogue {
  readonly learned = new Map<string, boolean>();
  calls = 0;
  constructor(
    private failures: number,
    private readonly listed: string[],
  ) {}
  async products(): Promise<unknown[]> {
    this.calls++;
    if (this.failures-- > 0) throw new Error('platform unreachable');
    for (const p of this.listed) this.learned.set(p, true);
    return this.listed.map((productNo) => ({ productNo }));
  }
  isAuthorized(productNo: string): boolean | undefined {
    return this.learned.get(productNo);
  }
}

function router(names: ProductNames) {
  const pools = new FixedPools(new FixedPool([node('socks5', 1)]));
  const r = new Router({
    users: new Users([user('alice', 'secret', { product: 'P0' })]),
    meters: new UnlimitedMeters(),
    pools,
    sessions: new MapSessions(),
    productKnown: (no) => names.isKnown(no),
  });
  return { r, pools };
}

describe('-product- names and the catalogue', () => {
  test('a listed product is served; an unknown or dropped one refused 403 before any pool', async () => {
    const catalogue = new Listing(0, ['P0', 'P2']);
    const names = new ProductNames(catalogue);
    await names.start();
    try {
      const { r, pools } = router(names);
      const ok = r.authorize('alice-product-P2', 'secret');
      assert.ok(ok.ok);
      assert.equal(ok.route.poolKey.productNo, 'P2');
      const forged = r.authorize('alice-product-FORGED', 'secret');
      assert.deepEqual(forged, { ok: false, kind: 'forbidden', reason: "unknown product 'FORGED'", user: 'alice', result: 'not_allowed' });
      // The catalogue learned P2 is no longer authorized (a later listing, a refusal): refused from then on.
      catalogue.learned.set('P2', false);
      assert.equal(r.authorize('alice-product-P2', 'secret').ok, false);
      assert.equal(pools.keys.length, 0, 'authorization asks no pool');
      assert.equal(catalogue.calls, 1, 'one listing, no look-up per name');
    } finally {
      names.stop();
    }
  });

  test('before a listing has loaded: unseen products refused, the user`s own served; the listing is tried again', async () => {
    const catalogue = new Listing(1, ['P0', 'P2']);
    const names = new ProductNames(catalogue, { retryMs: 20 });
    await names.start();
    try {
      const { r } = router(names);
      const early = r.authorize('alice-product-P2', 'secret');
      assert.equal(early.ok, false);
      assert.match(!early.ok ? early.reason : '', /not known yet/);
      assert.equal(r.authorize('alice-product-P0', 'secret').ok, true, "the user's own product is not judged");
      await waitFor(() => names.isKnown('P2') === true, 5000);
      assert.equal(r.authorize('alice-product-P2', 'secret').ok, true);
      assert.equal(names.isKnown('NOPE'), false);
    } finally {
      names.stop();
    }
  });
});
