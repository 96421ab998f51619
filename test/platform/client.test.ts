import { test, describe, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { PlatformClient, type PlatformClientOptions } from '../../src/platform/client.ts';
import { OPERATION_NAMES, operations, type OperationName } from '../../src/platform/operations.ts';
import { PLATFORM_CODES, CODE } from '../../src/platform/codes.ts';
import {
  DecryptReplyError,
  EmptyReplyError,
  PlatformClientError,
  PlatformError,
  RequestInvalidError,
  ResponseInvalidError,
  TransportError,
  UnknownOperationError,
} from '../../src/platform/errors.ts';
import { createMetrics } from '../../src/telemetry/metrics.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { FakePlatform } from './fake-platform.ts';
import { SAMPLES } from './samples.ts';

const SECRET = 'qwertyuiop123456';

describe('PlatformClient against a loopback platform', () => {
  let fake: FakePlatform;
  const clients: PlatformClient[] = [];
  const client = (over: Partial<PlatformClientOptions> = {}) => {
    const c = new PlatformClient({
      baseUrl: fake.baseUrl,
      appKey: fake.appKey,
      appSecret: SECRET,
      timeoutMs: 2_000,
      backoff: { baseMs: 1, maxMs: 5 },
      ...over,
    });
    clients.push(c);
    return c;
  };

  before(async () => {
    fake = await new FakePlatform({ appSecret: SECRET }).start();
  });
  after(async () => {
    for (const c of clients) c.close();
    await fake.close();
  });
  beforeEach(() => {
    fake.reset();
    fake.responder = (op) => (op ? SAMPLES[op].response : undefined);
  });

  test('every operation of the table is sent on its path and its answer decoded', async () => {
    assert.equal(OPERATION_NAMES.length, 29);
    const c = client();
    for (const name of OPERATION_NAMES) {
      const sample = SAMPLES[name];
      fake.reset();
      const result = await c.call(name, sample.request as never);
      assert.equal(fake.received.length, 1, name);
      const got = fake.received[0]!;
      assert.equal(got.path, operations[name].path, name);
      assert.equal(got.operation, name);
      assert.deepEqual(got.params, sample.wire ?? sample.request, `${name}: params on the wire`);
      assert.deepEqual(Object.keys(got.envelope), ['version', 'encrypt', 'appKey', 'reqId', 'params'], name);
      assert.equal(got.envelope.version, 'v2');
      assert.equal(got.envelope.encrypt, 'aes');
      assert.equal(got.envelope.appKey, fake.appKey);
      assert.match(got.reqId, /^[0-9a-f]{32}$/);
      if (operations[name].response === null) assert.equal(result, null, name);
      else assert.deepEqual(result, sample.response, `${name}: decoded answer`);
    }
  });

  test('keys are sent in the seed order and spelling, whatever order the caller used', async () => {
    await client().call('DrawByPwd', { productNo: 'P1', sessTime: '7', appUsername: 'alice' });
    const plain = JSON.stringify(fake.received[0]!.params);
    assert.equal(plain, '{"appUsername":"alice","sessTime":"7","productNo":"P1"}');
  });

  test('version 2.0 and encrypt AES are sent when configured; a caller reqId is kept', async () => {
    await client({ version: '2.0', encrypt: 'AES' }).call('GetAppInfo', {}, { reqId: 'my-req-1' });
    const env = fake.received[0]!.envelope;
    assert.equal(env.version, '2.0');
    assert.equal(env.encrypt, 'AES');
    assert.equal(env.reqId, 'my-req-1');
  });

  test('lenient answers: numeric strings become numbers, unknown fields are kept', async () => {
    fake.responder = () => ({ list: [{ used: '10.5', total: '1024', balance: '1013.5', productNo: 'P1', extra: 'kept' }] });
    const res = await client().call('ProxyInfo', { appUsername: 'shop1', proxyType: 104, productNo: 'P1' });
    assert.deepEqual(res.list?.[0], { used: 10.5, total: 1024, balance: 1013.5, productNo: 'P1', extra: 'kept' });
  });

  test('numbers written with an exponent (Go %v: "1e+06") are read; "" in an optional number is absent; no hex, Infinity or blank balance', async () => {
    const c = client();
    fake.responder = () => ({
      list: [
        { used: '', total: '1e+06', balance: '1e+06', productNo: 'P1' },
        { used: ' 1.048576e+06 ', total: '2E3', balance: '-.5', productNo: 'P2', ipUsed: '', ipTotal: '+10' },
      ],
    });
    const res = await c.call('ProxyInfo', { appUsername: 'shop1', proxyType: 104, productNo: 'P1' });
    assert.deepEqual(res.list?.[0], { used: undefined, total: 1_000_000, balance: 1_000_000, productNo: 'P1' });
    assert.deepEqual(res.list?.[1], { used: 1_048_576, total: 2000, balance: -0.5, productNo: 'P2', ipUsed: undefined, ipTotal: 10 });
    for (const balance of ['', '0x10', 'Infinity', '1e999', '1e', '1.2.3', '1,5']) {
      fake.responder = () => ({ list: [{ balance }] });
      await assert.rejects(
        c.call('ProxyInfo', { appUsername: 'shop1', proxyType: 104, productNo: 'P1' }),
        (e: unknown) => e instanceof ResponseInvalidError && e.field === 'list.0.balance',
        `balance ${JSON.stringify(balance)}`,
      );
    }
  });

  describe('part 8 limits: refused with the field named, nothing sent', () => {
    const long = (n: number) => 'x'.repeat(n);
    const ids = (n: number) => Array.from({ length: n }, (_, i) => `I${i}`);
    const cases: [OperationName, unknown, string][] = [
      ['InstanceOpen', { appOrderNo: long(33), params: [{ productNo: 'P' }] }, 'appOrderNo'],
      ['InstanceOpen', { appOrderNo: 'm1', params: Array.from({ length: 101 }, () => ({ productNo: 'P' })) }, 'params'],
      ['InstanceOpen', { appOrderNo: 'm1', params: [] }, 'params'],
      ['InstanceOpen', { appOrderNo: 'm1', params: [{ productNo: 'P', count: 101 }] }, 'params.0.count'],
      ['InstanceOpen', { appOrderNo: 'm1', params: [{ productNo: 'P', productno: 'typo' }] }, 'params.0'],
      ['ChangeProxy', { instanceNo: 'I1', appOrderNo: long(65) }, 'appOrderNo'],
      ['ChangeProxy', { instanceNo: 'I1', appOrderNo: 'c1', reason: long(65) }, 'reason'],
      ['ResetProxyPassword', { resetNo: long(33), instanceNoList: ['I1'] }, 'resetNo'],
      ['ResetProxyPassword', { resetNo: 'r1', instanceNoList: [] }, 'instanceNoList'],
      ['ResetProxyPassword', { resetNo: 'r1', instanceNoList: ['I1', 'I1'] }, 'instanceNoList.1'],
      ['InstanceRenew', { appOrderNo: 'm1', instances: [] }, 'instances'],
      ['InstanceRenew', { appOrderNo: 'm1', instances: ids(101).map((instanceNo) => ({ instanceNo })) }, 'instances'],
      ['InstanceRenew', { appOrderNo: 'm1', instances: [{ instanceNo: 'I1' }, { instanceNo: 'I1' }] }, 'instances.1'],
      ['InstanceRelease', { orderNo: 'm1', instances: ids(101) }, 'instances'],
      ['InstanceRelease', { orderNo: 'm1', instances: ['I1', 'I2', 'I1'] }, 'instances.2'],
      ['InstanceRelease', { orderNo: long(33), instances: ['I1'] }, 'orderNo'],
      ['SetProxyUserFlowLimit', { appUsername: 'a', productNo: 'P', limitFlow: 1_023_999 }, 'limitFlow'],
      ['SetProxyUserFlowLimit', { appUsername: 'a', productNo: 'P', limitFlow: 0 }, 'limitFlow'],
      ['SetProxyUserFlowLimit', { appUsername: 'a', productNo: 'P', limitFlow: -1, remark: long(256) }, 'remark'],
      ['CreateProxyUser', { appUsername: long(33), limitFlow: 1, appMainUsername: 'm', status: 1 }, 'appUsername'],
      ['CreateProxyUser', { limitFlow: 1, appMainUsername: 'm', status: 1, remark: long(256) }, 'remark'],
      ['DynamicProxyReturn', { appUsername: 'a', proxyType: 104, productNo: 'P', remark: long(251) }, 'remark'],
      ['GetOrder', { orderNo: 'O1', pageSize: 101 }, 'pageSize'],
      ['GetOrder', { appOrderNo: long(65) }, 'appOrderNo'],
      ['GetOrder', {}, 'orderNo'],
      ['ProxyFlowUseLog', { appUsername: 'a', productNo: 'P', pageSize: 101 }, 'pageSize'],
      ['ProxyFlowUseLog', { appUsername: 'a', productNo: 'P', startTime: '2026-07-01' }, 'startTime'],
      ['DrawByPwd', { appUsername: 'a', productNo: 'P', sessTime: 121 }, 'sessTime'],
      ['DrawByPwd', { appUsername: 'a', productNo: 'P', sessTime: -2 }, 'sessTime'],
      ['DrawByPwd', { appUsername: 'a', productNo: 'P', sessTime: 'soon' }, 'sessTime'],
      ['DrawByPwd', { productNo: 'P' }, 'appUsername'],
      ['ProxyInfo', { appUsername: 'a', proxyType: 101, productNo: 'P' }, 'proxyType'],
    ];
    for (const [name, params, field] of cases) {
      test(`${name}: ${field}`, async () => {
        await assert.rejects(client().callRaw(name, params), (e: unknown) => {
          assert.ok(e instanceof RequestInvalidError, String(e));
          assert.equal(e.code, 'REQUEST_INVALID');
          assert.equal(e.field, field);
          assert.ok(e.message.includes(field), e.message);
          return true;
        });
        assert.equal(fake.received.length, 0, 'nothing sent');
      });
    }

    test('boundaries inside the limits are sent (sessTime -1, 0, 90, 120; limitFlow -1 and 1024000; 32/64 chars)', async () => {
      const c = client();
      for (const sessTime of [-1, 0, 90, 120, '1']) await c.call('DrawByPwd', { appUsername: 'a', productNo: 'P', sessTime });
      for (const limitFlow of [-1, 1_024_000]) await c.call('SetProxyUserFlowLimit', { appUsername: 'a', productNo: 'P', limitFlow });
      await c.call('InstanceOpen', { appOrderNo: long(32), params: [{ productNo: 'P', count: 100 }] });
      await c.call('ChangeProxy', { instanceNo: 'I', appOrderNo: long(64), reason: long(64) });
      assert.equal(fake.received.length, 9);
      assert.deepEqual(
        fake.received.slice(0, 5).map((r) => (r.params as { sessTime: unknown }).sessTime),
        ['-1', '0', '90', '120', '1'],
      );
    });
  });

  test('every part 7 code surfaces as a PlatformError with code, meaning and msg; data is never parsed', async () => {
    const codes = Object.keys(PLATFORM_CODES)
      .map(Number)
      .filter((c) => c !== 200);
    assert.equal(codes.length, 22);
    const c = client({ retries: 0 });
    for (const code of codes) {
      fake.reset();
      // Garbage data on an error reply: parsing it would throw something else.
      fake.enqueue({ kind: 'reply', code, msg: `platform says ${code}`, rawData: '%%%not-ciphertext%%%' });
      await assert.rejects(c.call('GetOrder', { orderNo: 'O1' }), (e: unknown) => {
        assert.ok(e instanceof PlatformError, `${code}: ${String(e)}`);
        assert.ok(e instanceof PlatformClientError);
        assert.equal(e.code, 'PLATFORM_ERROR');
        assert.equal(e.platformCode, code);
        assert.equal(e.meaning, PLATFORM_CODES[code as keyof typeof PLATFORM_CODES]);
        assert.equal(e.platformMsg, `platform says ${code}`);
        assert.equal(e.operation, 'GetOrder');
        assert.equal(e.reqId, fake.received[0]!.reqId);
        assert.notEqual(e.condition, 'UNKNOWN');
        assert.equal(e.message, `platform error ${code}: platform says ${code}`);
        return true;
      });
    }
    fake.enqueue({ kind: 'reply', code: 10031, msg: 'order missing' });
    await assert.rejects(
      c.call('GetOrder', { orderNo: 'O1' }),
      (e: unknown) => e instanceof PlatformError && e.platformCode === 10031 && e.condition === 'ORDER_NOT_FOUND',
    );
    fake.enqueue({ kind: 'reply', code: 77777, msg: 'new code' });
    await assert.rejects(
      c.call('GetOrder', { orderNo: 'O1' }),
      (e: unknown) => e instanceof PlatformError && e.condition === 'UNKNOWN' && e.meaning === 'unknown code',
    );
  });

  test('a code that arrives as a string is read as a number', async () => {
    fake.enqueue({
      kind: 'http',
      status: 200,
      contentType: 'application/json',
      body: JSON.stringify({ reqId: 'x', code: '10052', msg: 'no user' }),
    });
    await assert.rejects(
      client().call('GetAppInfo', {}),
      (e: unknown) => e instanceof PlatformError && e.platformCode === CODE.USER_NOT_FOUND,
    );
  });

  test('a dropped reply is retried with the same reqId and the same ciphertext', async () => {
    fake.enqueue({ kind: 'drop' });
    const res = await client().call('GetAppInfo', {});
    assert.equal(res.appName, 'shop');
    assert.equal(fake.received.length, 2);
    assert.equal(fake.received[0]!.reqId, fake.received[1]!.reqId);
    assert.equal(fake.received[0]!.body, fake.received[1]!.body);
  });

  test('a reply cut off mid-body is retried with the same reqId', async () => {
    fake.enqueue({ kind: 'truncate' });
    await client().call('InstanceOpen', { appOrderNo: 'm-9', params: [{ productNo: 'P' }] });
    assert.equal(fake.received.length, 2);
    assert.equal(fake.received[0]!.body, fake.received[1]!.body);
    assert.equal((fake.received[1]!.params as { appOrderNo: string }).appOrderNo, 'm-9');
  });

  test('timeouts are retried with the same reqId, then surface as TransportError(timeout)', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    // A slow platform is the thing under test: the client gives up after 100 ms, not waiting the 400.
    fake.enqueue({ kind: 'delay', ms: 400 }, { kind: 'delay', ms: 400 });
    await assert.rejects(client({ timeoutMs: 100, retries: 1, metrics }).call('GetAppInfo', {}), (e: unknown) => {
      assert.ok(e instanceof TransportError);
      assert.equal(e.reason, 'timeout');
      assert.equal(e.code, 'TRANSPORT');
      return true;
    });
    assert.equal(fake.received.length, 2);
    assert.equal(fake.received[0]!.reqId, fake.received[1]!.reqId);
    const text = await metrics.registry.metrics();
    assert.match(text, /rotor_platform_requests_total\{operation="GetAppInfo",code="timeout"\} 2/);
  });

  test('HTTP 5xx and code 500 are retried; 10004 is not', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const c = client({ metrics });
    fake.enqueue({ kind: 'http', status: 502, body: '<html>bad gateway</html>' }, { kind: 'reply', code: 500, msg: 'system error' });
    const res = await c.call('GetAppInfo', {});
    assert.equal(res.appName, 'shop');
    assert.equal(fake.received.length, 3);
    assert.equal(new Set(fake.received.map((r) => r.reqId)).size, 1);

    fake.reset();
    fake.enqueue({ kind: 'reply', code: 10004, msg: 'bad params' });
    await assert.rejects(
      c.call('InstanceOpen', { appOrderNo: 'm1', params: [{ productNo: 'P' }] }),
      (e: unknown) => e instanceof PlatformError && e.platformCode === 10004,
    );
    assert.equal(fake.received.length, 1, 'no retry on 10004');

    fake.reset();
    fake.enqueue(...Array.from({ length: 4 }, () => ({ kind: 'reply' as const, code: 500, msg: 'down' })));
    await assert.rejects(c.call('GetAppInfo', {}), (e: unknown) => e instanceof PlatformError && e.platformCode === 500);
    assert.equal(fake.received.length, 4, 'first attempt plus 3 retries');

    const text = await metrics.registry.metrics();
    assert.match(text, /rotor_platform_requests_total\{operation="GetAppInfo",code="transport"\} 1/);
    assert.match(text, /rotor_platform_requests_total\{operation="GetAppInfo",code="500"\} 5/);
    assert.match(text, /rotor_platform_requests_total\{operation="GetAppInfo",code="200"\} 1/);
    assert.match(text, /rotor_platform_requests_total\{operation="InstanceOpen",code="10004"\} 1/);
    assert.match(text, /rotor_platform_request_seconds_count\{operation="GetAppInfo"\} 2/);
  });

  test("HTTP 429 (a platform's rate limit) is retried with the same reqId, and the caller is told of each retry", async () => {
    const c = client();
    fake.enqueue(
      { kind: 'http', status: 429, body: 'too many requests' },
      { kind: 'http', status: 429, body: '{"code":429,"msg":"slow down"}', contentType: 'application/json' },
    );
    const told: string[] = [];
    const res = await c.call('GetAppInfo', {}, { onRetry: (err) => told.push((err as TransportError).reason) });
    assert.equal(res.appName, 'shop');
    assert.equal(fake.received.length, 3);
    assert.equal(new Set(fake.received.map((r) => r.reqId)).size, 1);
    assert.deepEqual(told, ['http_status', 'http_status']);
  });

  test('HTTP 4xx with a non-envelope body is a TransportError, not retried', async () => {
    fake.enqueue({ kind: 'http', status: 404, body: 'not found' });
    await assert.rejects(
      client().call('GetAppInfo', {}),
      (e: unknown) => e instanceof TransportError && e.reason === 'http_status' && e.responseStatus === 404,
    );
    assert.equal(fake.received.length, 1);
  });

  test('HTTP 200 with a body that is not an envelope is a TransportError(bad_envelope)', async () => {
    fake.enqueue({ kind: 'http', status: 200, body: '<html>captive portal</html>' });
    await assert.rejects(client().call('GetAppInfo', {}), (e: unknown) => e instanceof TransportError && e.reason === 'bad_envelope');
  });

  test('DynamicProxyReturn (money, no merchant number) is not resent once it may have reached the platform; HTTP 429 is', async () => {
    const ret = { appUsername: 'shop1', proxyType: 104 as const, productNo: 'P', flowNum: 100 };
    const c = client({ retries: 3 });
    for (const b of [
      { kind: 'drop' },
      { kind: 'truncate' },
      { kind: 'http', status: 502, body: 'bad gateway' },
      { kind: 'reply', code: 500, msg: 'system error' },
    ] as const) {
      fake.reset();
      fake.enqueue(b);
      await assert.rejects(c.call('DynamicProxyReturn', ret), `${b.kind}: fails`);
      assert.equal(fake.received.length, 1, `${b.kind}: sent once, not resent`);
    }
    const timing = client({ retries: 3, timeoutMs: 100 });
    fake.reset();
    fake.enqueue({ kind: 'delay', ms: 400 });
    await assert.rejects(timing.call('DynamicProxyReturn', ret), (e: unknown) => e instanceof TransportError && e.reason === 'timeout');
    assert.equal(fake.received.length, 1, 'timeout: sent once');
    fake.reset();
    fake.enqueue({ kind: 'http', status: 429, body: 'too many requests' });
    await c.call('DynamicProxyReturn', ret);
    assert.equal(fake.received.length, 2, 'HTTP 429 (turned away unread): resent');
    assert.equal(fake.received[0]!.body, fake.received[1]!.body, 'the same reqId and ciphertext');
    // every other operation keeps its retries
    fake.reset();
    fake.enqueue({ kind: 'drop' });
    await c.call('ProxyInfo', { appUsername: 'shop1', proxyType: 104, productNo: 'P' });
    assert.equal(fake.received.length, 2);
  });

  test('DynamicProxyReturn is resent when the connection was refused (nothing reached the platform)', async () => {
    const srv = http.createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const port = (srv.address() as AddressInfo).port;
    await new Promise<void>((r) => srv.close(() => r()));
    const retried: string[] = [];
    await assert.rejects(
      client({ baseUrl: `http://127.0.0.1:${port}`, retries: 2 }).call(
        'DynamicProxyReturn',
        { appUsername: 'shop1', proxyType: 104, productNo: 'P', flowNum: 1 },
        { onRetry: (e) => retried.push((e as TransportError).reason) },
      ),
      (e: unknown) => e instanceof TransportError && e.reason === 'refused',
    );
    assert.deepEqual(retried, ['refused', 'refused']);
  });

  test('connection refused is retried, then a TransportError(refused)', async () => {
    const srv = http.createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const port = (srv.address() as AddressInfo).port;
    await new Promise<void>((r) => srv.close(() => r()));
    const started = Date.now();
    await assert.rejects(
      client({ baseUrl: `http://127.0.0.1:${port}`, retries: 2 }).call('GetAppInfo', {}),
      (e: unknown) => e instanceof TransportError && e.reason === 'refused',
    );
    assert.ok(Date.now() - started < 2_000);
  });

  test('200 without data: null for SetProxyUserFlowLimit, [] for list answers, EmptyReplyError for records', async () => {
    const c = client();
    fake.enqueue({ kind: 'reply', code: 200 });
    assert.equal(await c.call('SetProxyUserFlowLimit', { appUsername: 'a', productNo: 'P', limitFlow: -1 }), null);
    fake.enqueue({ kind: 'reply', code: 200, rawData: '' });
    assert.deepEqual(await c.call('GetCityList', {}), []);
    fake.enqueue({ kind: 'reply', code: 200, rawData: fake.encrypt('null') });
    assert.deepEqual(await c.call('GetArea', {}), []);
    fake.enqueue({ kind: 'reply', code: 200 });
    await assert.rejects(c.call('GetAppInfo', {}), (e: unknown) => e instanceof EmptyReplyError && e.code === 'EMPTY_REPLY');
    fake.enqueue({ kind: 'reply', code: 200 });
    assert.equal(await c.callRaw('GetAppInfo', {}), null);
  });

  test('an operation answering "without encrypted data" is not read: {} , a word, or garbage in `data` is a success', async () => {
    const c = client();
    for (const rawData of [{}, 'success', 'AAAA', [], 0, true]) {
      fake.enqueue({ kind: 'reply', code: 200, rawData });
      assert.equal(
        await c.call('SetProxyUserFlowLimit', { appUsername: 'a', productNo: 'P', limitFlow: -1 }),
        null,
        JSON.stringify(rawData),
      );
    }
    // A refusal is still a refusal, whatever its data.
    fake.enqueue({ kind: 'reply', code: CODE.INVALID_PARAMS, rawData: {} });
    await assert.rejects(c.call('SetProxyUserFlowLimit', { appUsername: 'a', productNo: 'P', limitFlow: -1 }), PlatformError);
  });

  test('a lookup answered HTTP 405 for a POST is sent at once as GET (envelope in the query), and as GET from then on; other operations are not', async () => {
    const c = client();
    fake.router = (op) =>
      (op === 'GetProductStock' || op === 'CreateUser') && fake.received.at(-1)?.method === 'POST'
        ? { kind: 'reply', code: 405, msg: 'method not allowed', httpStatus: 405 }
        : undefined;
    const list = await c.call('GetProductStock', { proxyType: [104], productNo: 'P-DYN-1' });
    assert.equal(list.length, 1);
    const [post, get] = fake.received;
    assert.deepEqual([post!.method, get!.method], ['POST', 'GET']);
    assert.equal(get!.reqId, post!.reqId, 'one request: same reqId');
    assert.deepEqual(get!.params, { proxyType: [104], productNo: 'P-DYN-1' });
    assert.deepEqual(Object.keys(get!.envelope).sort(), ['appKey', 'encrypt', 'params', 'reqId', 'version']);
    await c.call('GetProductStock', { proxyType: [105] });
    assert.deepEqual(
      fake.received.map((r) => r.method),
      ['POST', 'GET', 'GET'],
    );
    // Not a lookup: the seed says POST; a 405 is the platform's refusal, not a hint.
    await assert.rejects(
      c.call('CreateUser', { appUsername: 'shop1', status: 1 }),
      (e: unknown) => e instanceof PlatformError && e.platformCode === 405,
    );
    assert.deepEqual(
      fake.received.slice(3).map((r) => r.method),
      ['POST'],
    );
  });

  test('undecryptable or non-JSON data is a DecryptReplyError, not retried', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const c = client({ metrics });
    const other = new FakePlatform({ appSecret: 'another-secret-1' });
    const bad: [string, unknown][] = [
      ['garbage', 'this is not base64!!'],
      ['wrong key', other.encrypt('{"appName":"x"}')],
      ['not json', fake.encrypt('hello')],
      ['not a string', { appName: 'x' }],
      ['partial block', 'AAAA'],
    ];
    for (const [what, rawData] of bad) {
      fake.reset();
      fake.enqueue({ kind: 'reply', code: 200, rawData });
      await assert.rejects(c.call('GetAppInfo', {}), (e: unknown) => {
        assert.ok(e instanceof DecryptReplyError, `${what}: ${String(e)}`);
        assert.equal(e.code, 'DECRYPT_REPLY');
        assert.ok(!e.message.includes(SECRET));
        return true;
      });
      assert.equal(fake.received.length, 1, what);
    }
    assert.match(await metrics.registry.metrics(), /rotor_platform_requests_total\{operation="GetAppInfo",code="decrypt"\} 5/);
  });

  test('an answer that breaks the response schema names the field', async () => {
    fake.enqueue({ kind: 'reply', code: 200, data: { coin: '1', credit: '0' } });
    await assert.rejects(client().call('GetAppInfo', {}), (e: unknown) => e instanceof ResponseInvalidError && e.field === 'appName');
  });

  test('a wrong secret: the platform answers 10001, a typed error, no retry', async () => {
    await assert.rejects(client({ appSecret: 'ponmlkjihgfedcba' }).call('GetAppInfo', {}), (e: unknown) => {
      assert.ok(e instanceof PlatformError);
      assert.equal(e.platformCode, CODE.DECRYPT);
      assert.ok(!e.message.includes('ponmlkjihgfedcba'));
      return true;
    });
    assert.equal(fake.received.length, 1);
  });

  test('unknown operations and an aborted call are typed', async () => {
    await assert.rejects(client().callRaw('NoSuchOp', {}), UnknownOperationError);
    const ac = new AbortController();
    fake.enqueue({ kind: 'delay', ms: 300 });
    const p = client().call('GetAppInfo', {}, { signal: ac.signal });
    setTimeout(() => ac.abort(), 30);
    await assert.rejects(p, (e: unknown) => e instanceof TransportError && e.reason === 'aborted');
  });

  test('debug logs carry operation and reqId, never params, passwords or the secret', async () => {
    const lines: string[] = [];
    const logger = createLogger({ level: 'debug', pretty: false, destination: { write: (s: string) => void lines.push(s) } });
    let n = 0;
    const c = client({ logger, reqIdFactory: () => `rid-${++n}` });
    fake.enqueue({ kind: 'drop' });
    await c.call('CreateUser', { appUsername: 'shop1', password: 'pw-very-secret-9', status: 1 });
    assert.deepEqual(
      fake.received.map((r) => r.reqId),
      ['rid-1', 'rid-1'],
    );
    const text = lines.join('');
    assert.match(text, /"operation":"CreateUser"/);
    assert.match(text, /"reqId":"rid-1"/);
    assert.match(text, /retrying/);
    for (const secret of ['pw-very-secret-9', SECRET, fake.received[0]!.envelope.params as string])
      assert.ok(!text.includes(secret), secret);
  });

  test('bad construction is refused: secret length, base URL', () => {
    assert.throws(() => new PlatformClient({ baseUrl: fake.baseUrl, appKey: 'k', appSecret: 'short' }), /16, 24 or 32 bytes/);
    assert.throws(() => new PlatformClient({ baseUrl: 'ftp://x', appKey: 'k', appSecret: SECRET }), /baseUrl/);
    assert.throws(() => new PlatformClient({ baseUrl: 'not a url', appKey: 'k', appSecret: SECRET }), /baseUrl/);
  });

  test('a base URL with a path prefix and trailing slash is joined once', async () => {
    const c = client({ baseUrl: `${fake.baseUrl}/prefix/` });
    fake.enqueue({ kind: 'reply', code: 200, data: SAMPLES.GetAppInfo.response });
    await c.call('GetAppInfo', {});
    assert.equal(fake.received[0]!.path, '/prefix/api/open/app/info/v2');
  });
});
