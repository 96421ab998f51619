// One product read on every reading of GetProductInfo (seed 4.2: request and answer "not shown"): one record,
// an array of it (the product query's shape), a refusal, an unknown path (HTTP 404/405/501), a reply that is no
// product — the last three fall back to the product query {proxyType: every type, productNo}, which the seed
// specifies. Against a loopback platform with the real client and envelope.
import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { PlatformClient } from '../../src/platform/client.ts';
import { CODE } from '../../src/platform/codes.ts';
import { PlatformError, ResponseInvalidError, TransportError } from '../../src/platform/errors.ts';
import { EVERY_PROXY_TYPE, ProductNotListedError, ProductReader } from '../../src/platform/product-reader.ts';
import { FakePlatform, type Behaviour } from './fake-platform.ts';

const SECRET = 'qwertyuiop123456';
const record = (productNo: string) => ({ productNo, proxyType: 104, protocol: '1', flowConversionBase: 1024, enable: 1 });

describe('ProductReader: one product on every reading of GetProductInfo', () => {
  let fake: FakePlatform;
  let client: PlatformClient;
  const ops = () => fake.received.map((r) => r.operation);
  /** GetProductInfo behaves as `info`; the product query lists `listed`. */
  const platform = (info: Behaviour | ((productNo: string) => unknown), listed: string[]) => {
    fake.router = (op, params) => {
      const p = params as { productNo: string };
      if (op === 'GetProductInfo') return typeof info === 'function' ? { kind: 'reply', code: 200, data: info(p.productNo) } : info;
      if (op === 'GetProductStock') return { kind: 'reply', code: 200, data: listed.filter((n) => n === p.productNo).map(record) };
      return undefined;
    };
  };

  before(async () => {
    fake = await new FakePlatform({ appSecret: SECRET }).start();
    client = new PlatformClient({
      baseUrl: fake.baseUrl,
      appKey: fake.appKey,
      appSecret: SECRET,
      retries: 1,
      backoff: { baseMs: 1, maxMs: 2 },
    });
  });
  after(async () => {
    client.close();
    await fake.close();
  });
  beforeEach(() => fake.reset());

  test('one record (the SDK) and an array of it (the product query) are both read, with one call', async () => {
    platform(record, []);
    assert.equal((await new ProductReader(client).read('P1')).productNo, 'P1');
    platform((n) => [record('OTHER'), record(n)], []);
    assert.equal((await new ProductReader(client).read('P2')).productNo, 'P2');
    assert.deepEqual(ops(), ['GetProductInfo', 'GetProductInfo']);
  });

  test('an array without the product, a refusal (10004), a reply that is no product: the product query answers', async () => {
    for (const info of [
      () => [],
      { kind: 'reply', code: CODE.INVALID_PARAMS, msg: 'unknown interface' } as Behaviour,
      () => ({ name: 'not a product' }),
    ]) {
      fake.reset();
      platform(info, ['P1']);
      const p = await new ProductReader(client).read('P1');
      assert.equal(p.productNo, 'P1');
      assert.deepEqual(ops(), ['GetProductInfo', 'GetProductStock']);
      assert.deepEqual(fake.received[1]!.params, { proxyType: EVERY_PROXY_TYPE, productNo: 'P1' });
    }
  });

  test('GetProductInfo unknown to the platform (HTTP 404, 405, 501): the product query, and later reads go straight to it', async () => {
    for (const status of [404, 405, 501]) {
      fake.reset();
      platform({ kind: 'http', status, body: '404 page not found' }, ['P1', 'P2']);
      const reader = new ProductReader(client);
      assert.equal((await reader.read('P1')).productNo, 'P1');
      assert.equal((await reader.read('P2')).productNo, 'P2');
      // A 405 is first taken as "this lookup is served on GET" (client.ts): the GET is answered 405 too.
      const info = status === 405 ? ['GetProductInfo', 'GetProductInfo'] : ['GetProductInfo'];
      assert.deepEqual(ops(), [...info, 'GetProductStock', 'GetProductStock'], `HTTP ${status}`);
    }
  });

  test('not listed either: the refusal itself (10004), or ProductNotListedError when GetProductInfo is unknown', async () => {
    platform({ kind: 'reply', code: CODE.INVALID_PARAMS, msg: 'product not authorized' }, []);
    await assert.rejects(
      new ProductReader(client).read('P9'),
      (e: unknown) => e instanceof PlatformError && e.platformCode === CODE.INVALID_PARAMS,
    );
    platform({ kind: 'http', status: 404, body: 'not found' }, []);
    await assert.rejects(
      new ProductReader(client).read('P9'),
      (e: unknown) => e instanceof ProductNotListedError && e.code === 'PRODUCT_NOT_LISTED',
    );
  });

  test('a system error (500 after the retries) or an unreachable platform is not answered by the query: it is thrown', async () => {
    platform({ kind: 'reply', code: CODE.SYSTEM, msg: 'busy' }, ['P1']);
    await assert.rejects(
      new ProductReader(client).read('P1'),
      (e: unknown) => e instanceof PlatformError && e.platformCode === CODE.SYSTEM,
    );
    platform({ kind: 'http', status: 503, body: 'busy' }, ['P1']);
    await assert.rejects(new ProductReader(client).read('P1'), (e: unknown) => e instanceof TransportError && e.responseStatus === 503);
    assert.ok(!ops().includes('GetProductStock'));
  });

  test('an answer that is not the expected shape names the answer, not the request', async () => {
    fake.enqueue({ kind: 'reply', code: 200, data: 'a word' });
    await assert.rejects(client.call('GetAppInfo', {}), (e: unknown) => {
      assert.ok(e instanceof ResponseInvalidError);
      assert.match(e.message, /unexpected reply: \(answer\): /);
      return true;
    });
  });
});
