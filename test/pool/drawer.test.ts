import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApiDrawer, DrawUnparsableError, PwdDrawer, drawApiFromClient, type DrawApi, type PlatformCaller } from '../../src/pool/drawer.ts';
import { ExtractionError } from '../../src/pool/extraction.ts';
import type { OpRequest, OpResponse } from '../../src/platform/operations.ts';
import { PlatformError } from '../../src/platform/errors.ts';
import { createMetrics } from '../../src/telemetry/metrics.ts';

/** A DrawApi that records requests and answers what the test set. */
function stubApi(answers: { pwd?: () => OpResponse<'DrawByPwd'>; api?: () => OpResponse<'DrawByApi'> }) {
  const pwdCalls: OpRequest<'DrawByPwd'>[] = [];
  const apiCalls: OpRequest<'DrawByApi'>[] = [];
  const api: DrawApi = {
    async drawByPwd(req) {
      pwdCalls.push(req);
      if (!answers.pwd) throw new Error('unexpected DrawByPwd');
      return answers.pwd();
    },
    async drawByApi(req) {
      apiCalls.push(req);
      if (!answers.api) throw new Error('unexpected DrawByApi');
      return answers.api();
    },
  };
  return { api, pwdCalls, apiCalls };
}

async function drawCount(metrics: ReturnType<typeof createMetrics>, method: string, result: string): Promise<number> {
  const m = await metrics.draws.get();
  return m.values.find((v) => v.labels.method === method && v.labels.result === result)?.value ?? 0;
}

let server: Server;
let base: string;
const bodies = new Map<string, string>();
before(async () => {
  server = createServer((req, res) => {
    const b = bodies.get(new URL(req.url ?? '/', 'http://x').pathname);
    res.writeHead(b === undefined ? 404 : 200, { 'content-type': 'text/plain' });
    res.end(b ?? 'no such link');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe('PwdDrawer', () => {
  test('sends the sub account, product, region, sessTime as a string and num; parses list[].list and list[].proxyUrl', async () => {
    const { api, pwdCalls } = stubApi({
      pwd: () => ({
        list: [
          { list: ['127.0.0.1:1080:alice-s1:pw1', 'socks5://alice-s2:pw2@127.0.0.1:1080'] },
          { proxyUrl: 'alice-s3:pw3@127.0.0.2:1081', list: null },
          { list: ['127.0.0.1:1080:alice-s1:pw1'] },
        ],
      }),
    });
    const metrics = createMetrics({ defaultMetrics: false });
    const now = 1_000_000;
    const d = new PwdDrawer({
      api,
      subAccount: 'alice',
      productNo: 'P1',
      region: 'USA',
      sessTime: 10,
      protocol: 'http',
      proxyType: 104,
      now: () => now,
      metrics,
    });
    const nodes = await d.draw(3);
    assert.deepEqual(pwdCalls, [{ appUsername: 'alice', productNo: 'P1', num: 3, addressCode: 'USA', sessTime: '10', proxyType: 104 }]);
    assert.deepEqual(
      nodes.map((n) => [n.id, n.protocol, n.password, n.source, n.expiresAt]),
      [
        ['http://alice-s1@127.0.0.1:1080', 'http', 'pw1', 'pwd', now + 600_000],
        ['socks5://alice-s2@127.0.0.1:1080', 'socks5', 'pw2', 'pwd', now + 600_000],
        ['http://alice-s3@127.0.0.2:1081', 'http', 'pw3', 'pwd', now + 600_000],
      ],
    );
    assert.equal(await drawCount(metrics, 'pwd', 'ok'), 1);
  });

  test('no region and sessTime 0: no addressCode, nodes without expiry', async () => {
    const { api, pwdCalls } = stubApi({ pwd: () => ({ list: [{ list: ['127.0.0.1:1080:bob:pw'] }] }) });
    const nodes = await new PwdDrawer({ api, subAccount: 'bob', productNo: 'P2', region: '', sessTime: 0 }).draw(1);
    assert.deepEqual(pwdCalls, [{ appUsername: 'bob', productNo: 'P2', num: 1, sessTime: '0' }]);
    assert.equal(nodes.length, 1);
    assert.equal(nodes[0]!.expiresAt, undefined);
    assert.equal(nodes[0]!.protocol, 'socks5');
  });

  test('a proxyUrl that is an extraction link is fetched', async () => {
    bodies.set('/pwd-link', '127.0.0.5:2000:u:p\r\n127.0.0.6:2001:u:p');
    const { api } = stubApi({ pwd: () => ({ list: [{ proxyUrl: `${base}/pwd-link?token=t` }] }) });
    const nodes = await new PwdDrawer({ api, subAccount: 'a', productNo: 'P' }).draw(2);
    assert.deepEqual(
      nodes.map((n) => n.id),
      ['socks5://u@127.0.0.5:2000', 'socks5://u@127.0.0.6:2001'],
    );
  });

  test('the platform error is rethrown as is and counted', async () => {
    const perr = new PlatformError({ operation: 'DrawByPwd', reqId: 'r1', platformCode: 10092, platformMsg: 'sub account does not exist' });
    const api: DrawApi = {
      drawByPwd: async () => {
        throw perr;
      },
      drawByApi: async () => {
        throw new Error('unused');
      },
    };
    const metrics = createMetrics({ defaultMetrics: false });
    await assert.rejects(new PwdDrawer({ api, subAccount: 'a', productNo: 'P', metrics }).draw(1), (err: unknown) => err === perr);
    assert.equal(await drawCount(metrics, 'pwd', 'platform_error'), 1);
  });

  test('strings that are all unparsable → DrawUnparsableError; empty list → [] counted as empty', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const bad = stubApi({ pwd: () => ({ list: [{ list: ['nonsense', 'also:bad:x'] }] }) });
    await assert.rejects(
      new PwdDrawer({ api: bad.api, subAccount: 'a', productNo: 'P', metrics }).draw(2),
      (err: unknown) => err instanceof DrawUnparsableError && err.rejected === 2,
    );
    const empty = stubApi({ pwd: () => ({ list: [] }) });
    assert.deepEqual(await new PwdDrawer({ api: empty.api, subAccount: 'a', productNo: 'P', metrics }).draw(2), []);
    assert.equal(await drawCount(metrics, 'pwd', 'unparsable'), 1);
    assert.equal(await drawCount(metrics, 'pwd', 'empty'), 1);
  });
});

describe('ApiDrawer', () => {
  test('draws for the main account, fetches every link, parses json and txt', async () => {
    bodies.set(
      '/api-1',
      JSON.stringify({
        data: [
          { ip: '127.0.0.1', port: 3001 },
          { ip: '127.0.0.1', port: 3002 },
        ],
      }),
    );
    bodies.set('/api-2', '127.0.0.1:3003/br127.0.0.1:3004');
    const { api, apiCalls } = stubApi({ api: () => ({ list: [{ proxyUrl: `${base}/api-1` }, { proxyUrl: `${base}/api-2` }] }) });
    const metrics = createMetrics({ defaultMetrics: false });
    const d = new ApiDrawer({
      api,
      mainAccount: 'shop1',
      productNo: 'P9',
      proxyType: 105,
      region: 'CHN',
      protocol: 'http',
      returnType: 'json',
      metrics,
      ttlMinutes: 2,
      now: () => 5000,
    });
    const nodes = await d.draw(4);
    assert.deepEqual(apiCalls, [
      { appUsername: 'shop1', proxyType: 105, productNo: 'P9', num: 4, protocol: 'http', addressCode: 'CHN', returnType: 'json' },
    ]);
    assert.deepEqual(
      nodes.map((n) => n.id),
      ['http://127.0.0.1:3001', 'http://127.0.0.1:3002', 'http://127.0.0.1:3003', 'http://127.0.0.1:3004'],
    );
    assert.ok(nodes.every((n) => n.source === 'api' && n.expiresAt === 5000 + 120_000));
    assert.equal(await drawCount(metrics, 'api', 'ok'), 1);
  });

  test('one dead link among good ones is tolerated; all dead → the extraction error', async () => {
    bodies.set('/api-ok', '127.0.0.1:3005');
    const mixed = stubApi({ api: () => ({ list: [{ proxyUrl: `${base}/missing` }, { proxyUrl: `${base}/api-ok` }] }) });
    const nodes = await new ApiDrawer({ api: mixed.api, mainAccount: 'm', productNo: 'P', proxyType: 104 }).draw(1);
    assert.deepEqual(
      nodes.map((n) => n.id),
      ['socks5://127.0.0.1:3005'],
    );

    bodies.set('/api-refused', '{"code":403,"msg":"ip not in whitelist"}');
    const dead = stubApi({ api: () => ({ list: [{ proxyUrl: `${base}/api-refused` }] }) });
    const metrics = createMetrics({ defaultMetrics: false });
    await assert.rejects(
      new ApiDrawer({ api: dead.api, mainAccount: 'm', productNo: 'P', proxyType: 104, metrics }).draw(1),
      (err: unknown) => err instanceof ExtractionError && /whitelist/.test(err.message),
    );
    assert.equal(await drawCount(metrics, 'api', 'extraction_error'), 1);
  });
});

describe('drawApiFromClient', () => {
  test('maps to call(name, params)', async () => {
    const seen: [string, unknown][] = [];
    const client = {
      async call(name: string, params: unknown) {
        seen.push([name, params]);
        return name === 'DrawByPwd' ? { list: [{ list: ['127.0.0.1:1'] }] } : { list: [] };
      },
    } as unknown as PlatformCaller;
    const api = drawApiFromClient(client);
    assert.deepEqual(await api.drawByPwd({ appUsername: 'a', productNo: 'P' }), { list: [{ list: ['127.0.0.1:1'] }] });
    assert.deepEqual(await api.drawByApi({ appUsername: 'm', productNo: 'P', proxyType: 104 }), { list: [] });
    assert.deepEqual(
      seen.map((s) => s[0]),
      ['DrawByPwd', 'DrawByApi'],
    );
  });
});
