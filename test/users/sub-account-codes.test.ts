// The seed names two codes for a missing sub account (10062 "sub account does not exist", 10092 "sub account
// username does not exist"); a platform may answer GetProxyUserInfo with either. Both mean "make it", so a
// heal or a resumed creation against such a platform creates the account instead of failing. The platform here
// is a recording stand-in: what is tested is SubAccounts' reading of its answers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SubAccounts } from '../../src/users/sub-account.ts';
import { ProductCatalog } from '../../src/accounting/products.ts';
import { PlatformError } from '../../src/platform/errors.ts';

function platform(missingCode: number) {
  const calls: string[] = [];
  const client = {
    call: async (op: string): Promise<never> => {
      calls.push(op);
      if (op === 'GetProductInfo') return { productNo: 'DYN', proxyType: 104, flowConversionBase: 1024, proxyUserFlowLimit: 0 } as never;
      if (op === 'GetProxyUserInfo')
        throw new PlatformError({ operation: op, reqId: undefined, platformCode: missingCode, platformMsg: '' });
      if (op === 'CreateProxyUser') return {} as never;
      throw new Error(`unexpected ${op}`);
    },
  };
  return { calls, client };
}

for (const code of [10062, 10092]) {
  test(`GetProxyUserInfo answered ${code}: the sub account is created`, async () => {
    const p = platform(code);
    const subs = new SubAccounts(p.client as never, new ProductCatalog({ client: p.client as never }));
    await subs.ensure({ name: 'ivan', mainAccount: 'shop1', product: 'DYN', quota: { bytes: 0, period: 'total' } as never });
    assert.deepEqual(p.calls, ['GetProductInfo', 'GetProxyUserInfo', 'CreateProxyUser']);
  });
}

test('another refusal of the read is not taken for a missing account', async () => {
  const p = platform(10001);
  const subs = new SubAccounts(p.client as never, new ProductCatalog({ client: p.client as never }));
  await assert.rejects(
    subs.ensure({ name: 'ivan', mainAccount: 'shop1', product: 'DYN', quota: { bytes: 0, period: 'total' } as never }),
    /10001/,
  );
  assert.deepEqual(p.calls, ['GetProductInfo', 'GetProxyUserInfo']);
});
