// flowLogAll (the platform's side of GET /v1/usage?compare=platform) reads every page of a window's flow-use log,
// past the 100 pages it used to stop at (10,000 entries: about a week of one entry a minute, while a usage window
// defaults to 30 days) — and a log longer than it reads at once is refused (FLOW_LOG_TOO_LONG, 422), never
// answered cut short as if it were the whole. A loopback stand-in for the platform's paging (ProxyFlowUseLog).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Traffic } from '../../src/accounts/traffic.ts';
import { AccountsError } from '../../src/accounts/errors.ts';

function trafficOver(total: number) {
  const asked: number[] = [];
  const client = {
    call: async (name: string, params: { page: number; pageSize: number }) => {
      assert.equal(name, 'ProxyFlowUseLog');
      asked.push(params.page);
      const from = (params.page - 1) * params.pageSize;
      const n = Math.max(0, Math.min(params.pageSize, total - from));
      return {
        total,
        curPage: params.page,
        list: Array.from({ length: n }, (_, i) => ({ used: 1, usedTime: 1_700_000_000 + from + i })),
      };
    },
  };
  const products = { facts: async () => ({ productNo: 'P', proxyType: 104, dynamic: true, flowLog: true }) };
  return { traffic: new Traffic({ client: client as never, products: products as never }), asked };
}

test('a month of one entry a minute (43,200 entries) is read whole, not the first 10,000', async () => {
  const { traffic, asked } = trafficOver(43_200);
  const all = await traffic.flowLogAll({ account: 'shop', productNo: 'P' });
  assert.equal(all.entries.length, 43_200);
  assert.equal(
    all.entries.reduce((s, e) => s + e.usedBytes, 0),
    43_200,
  );
  assert.equal(asked.length, 432);
});

test('a log longer than read at once is refused (422) before its pages are read', async () => {
  const { traffic, asked } = trafficOver(250);
  await assert.rejects(traffic.flowLogAll({ account: 'shop', productNo: 'P' }, 2), (e: unknown) => {
    assert.ok(e instanceof AccountsError);
    assert.equal(e.code, 'FLOW_LOG_TOO_LONG');
    assert.equal(e.httpStatus, 422);
    assert.match(e.message, /250 entries, more than the 200 read at once/);
    return true;
  });
  assert.deepEqual(asked, [1]);
  const ok = trafficOver(200);
  assert.equal((await ok.traffic.flowLogAll({ account: 'shop', productNo: 'P' }, 2)).entries.length, 200);
});
