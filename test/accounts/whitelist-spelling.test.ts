// The whitelist read (ProxyInfo `ipWhiteList`, seed 4.17: plain strings) on a platform that writes its addresses
// its own way (`127.0.0.1/32`) and refuses a duplicate add (10004). Rotor compared strings: it added the address
// again once per process and pair, and on a refusing platform every ensure (every API draw's first) failed
// (review15's unproved lead, whitelist.ts:205). The real client on the sandbox behind test/support/platform-variants.ts.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ProductCatalog } from '../../src/accounting/products.ts';
import { sameAddress, Whitelist } from '../../src/accounts/whitelist.ts';
import { CODE } from '../../src/platform/codes.ts';
import { PlatformClient } from '../../src/platform/client.ts';
import { SIM_PRODUCTS } from '../../src/sim/index.ts';
import { startVariantPlatform, type VariantPlatform } from '../support/platform-variants.ts';

const FLOW = SIM_PRODUCTS.dynamicTraffic;
const MAIN = 'wlshop';

test('sameAddress: /32 and /128, IPv6 spellings; a wider prefix or another address is not the address', () => {
  assert.equal(sameAddress('127.0.0.1/32', '127.0.0.1'), true);
  assert.equal(sameAddress('::1/128', '::1'), true);
  assert.equal(sameAddress('0:0:0:0:0:0:0:1', '::1'), true);
  assert.equal(sameAddress('[::1]', '::1'), true);
  assert.equal(sameAddress('127.0.0.0/24', '127.0.0.1'), false);
  assert.equal(sameAddress('127.0.0.2', '127.0.0.1'), false);
  assert.equal(sameAddress('nonsense', '127.0.0.1'), false);
});

describe('a platform that lists 127.0.0.1 as 127.0.0.1/32 and refuses a duplicate add with 10004', () => {
  let platform: VariantPlatform;
  let client: PlatformClient;
  before(async () => {
    platform = await startVariantPlatform({
      data: (op, data) => {
        if (op !== 'ProxyInfo') return data;
        const d = data as { list: Array<{ ipWhiteList?: string[] }> };
        return { list: d.list.map((e) => ({ ...e, ipWhiteList: (e.ipWhiteList ?? []).map((ip) => `${ip}/32`) })) };
      },
      reply: (op, _params, up) =>
        op === 'AddIpWhiteList' && (platform.calls.get('AddIpWhiteList') ?? 0) > 1
          ? { status: 200, body: JSON.stringify({ reqId: up.reqId, code: CODE.INVALID_PARAMS, msg: 'ip already exists' }) }
          : undefined,
    });
    client = new PlatformClient({ baseUrl: platform.url, appKey: platform.appKey, appSecret: platform.appSecret, retries: 0 });
    await client.call('CreateUser', { appUsername: MAIN, status: 1 });
  });
  after(async () => {
    client?.close();
    await platform?.close();
  });

  test('the address is added once; a later process finds it listed and adds nothing', async () => {
    const kv = new Map<string, unknown>();
    const store = {
      kvGet: <T>(k: string) => Promise.resolve(kv.get(k) as T | undefined),
      kvSet: (k: string, v: unknown) => Promise.resolve(void kv.set(k, v)),
    };
    const make = () => new Whitelist({ client, products: new ProductCatalog({ client }), store, egressIp: '127.0.0.1' });
    await make().ensure(MAIN, FLOW);
    assert.equal(platform.calls.get('AddIpWhiteList'), 1);
    // A restart (a new Whitelist): the listed '127.0.0.1/32' is its address.
    await make().ensure(MAIN, FLOW);
    assert.equal(platform.calls.get('AddIpWhiteList'), 1, 'not added again');
  });
});
