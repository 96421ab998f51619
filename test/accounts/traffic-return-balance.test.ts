// The balance that settles a traffic return whose answer was lost is this product's entry of ProxyInfo only:
// an answer that lists other products but not this one is "could not be compared" (503), never another
// product's total read as this one's. A stand-in platform client (the failure and the listing are the point).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Traffic } from '../../src/accounts/traffic.ts';
import { AccountsError } from '../../src/accounts/errors.ts';
import { TransportError } from '../../src/platform/errors.ts';

test("a lost return's balance is read from this product's entry only", async () => {
  let returns = 0;
  const client = {
    call: async (name: string) => {
      if (name === 'ProxyInfo') return { list: [{ productNo: 'OTHER', total: 500, balance: '400' }] };
      returns += 1;
      throw new TransportError({ operation: 'DynamicProxyReturn', reqId: 'r', reason: 'timeout', detail: 'no answer' });
    },
  };
  const products = { facts: async () => ({ productNo: 'P', proxyType: 104, dynamic: true, byIpCount: false }) };
  const traffic = new Traffic({ client: client as never, products: products as never });
  await assert.rejects(traffic.returnTraffic({ account: 'shop', productNo: 'P', flowNum: 10 }), (e: unknown) => {
    assert.ok(e instanceof AccountsError && e.code === 'RETURN_OUTCOME_UNKNOWN', String(e));
    assert.match(e.message, /could not be compared \(unknown MB before, unknown now\)/);
    return true;
  });
  assert.equal(returns, 1, 'sent once');
});
