// POST /v1/accounts/:name/return (DynamicProxyReturn) has no merchant number, and the seed does not say a
// platform recognises a resent reqId. One return asked for whose first reply is lost is returned once, and
// answered 200 (confirmed from the balance), whether the platform answers a retried reqId with its first
// answer (the embedded sandbox by default) or processes every retry again (`replayReqIds: false`).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startGateway, type Gateway } from './harness.ts';

let gw: Gateway;
before(async () => {
  gw = await startGateway();
});
after(async () => {
  await gw?.close();
});

for (const replayReqIds of [true, false]) {
  test(`a traffic return whose reply was lost once is returned once, not twice (platform replays reqIds: ${replayReqIds})`, async (t) => {
    const sim = gw.daemon.sim!;
    const product = 'DYN-104-FLOW';
    const balance = () => sim.inspect.balance('shop1', product);
    const refunds = () => sim.inspect.charges().filter((c) => c.operation === 'DynamicProxyReturn');
    const before = balance()!.totalBytes;
    const refundsBefore = refunds().length;
    sim.faults.set({ replayReqIds });
    sim.faults.dropNext(1, 'DynamicProxyReturn');
    try {
      const r = await gw.admin<{ returnAmount?: number; confirmedBy?: string }>('/v1/accounts/shop1/return', {
        method: 'POST',
        body: { productNo: product, flowNum: 100 },
      });
      const story =
        `Rotor answered ${r.status} ${JSON.stringify(r.body)} for one return of 100 MB; the sandbox's totalBytes ${before} -> ` +
        `${balance()!.totalBytes}; refunds recorded: ${refunds().length - refundsBefore}`;
      t.diagnostic(story);
      assert.equal(r.status, 200, story);
      assert.equal(r.body.confirmedBy, 'balance', story);
      assert.equal(refunds().length - refundsBefore, 1, story);
      assert.equal(before - balance()!.totalBytes, 100 * 1_048_576, story);
    } finally {
      sim.faults.reset();
    }
  });
}
