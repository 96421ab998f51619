// `npm start` (embedded sandbox) killed with SIGKILL right after an order was accepted. Rotor's store (SQLite,
// synchronous) has the accepted order; the sandbox's state file (written at most every second) does not. After
// the restart the sandbox has forgotten the order but never hands its number to another (its id ceiling is
// written ahead), and Rotor, which finds the order unknown by both numbers, sends it again with its merchant
// number: the record stays that order (its amount, its product), under a new platform number.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import {
  adminGet,
  adminSend,
  cleanup,
  rawConfig,
  spawnDaemon,
  startTarget,
  tempDir,
  waitFor,
  writeConfigFile,
  type BytesTarget,
} from './limits-harness.ts';

let target: BytesTarget;
before(async () => {
  target = await startTarget();
});
after(async () => {
  await target?.close();
  cleanup();
});

interface Order {
  appOrderNo: string;
  orderNo: string | null;
  status: number;
  amount: string | null;
  instances?: { instanceNo: string; productNo: string | null }[];
}

test('an order accepted just before a SIGKILL of the embedded daemon is not turned into another order after the restart', async (t) => {
  const dir = tempDir();
  const file = join(dir, 'rotor.yaml');
  writeConfigFile(file, rawConfig(dir, [{ name: 'ivy', password: 'ivy-pw', mainAccount: 'shop1' }]));
  let d = await spawnDaemon(file, join(dir, 'rotor.log'));
  const first = await adminSend<Order>(d.ports.admin, 'POST', '/v1/orders/open', {
    productNo: 'STC-101-USA-SOCKS',
    count: 1,
    cycleTimes: 1,
  });
  d.signal('SIGKILL');
  await d.exited;
  assert.equal(first.status, 202, JSON.stringify(first.body));
  d = await spawnDaemon(file, join(dir, 'rotor2.log'));
  try {
    const second = await adminSend<Order>(d.ports.admin, 'POST', '/v1/orders/open', {
      productNo: 'STC-101-USA-SOCKS',
      count: 1,
      cycleTimes: 1,
    });
    assert.equal(second.status, 202, JSON.stringify(second.body));
    await waitFor(
      'second order final',
      async () => {
        const o = await adminGet<Order>(d.ports.admin, `/v1/orders/${second.body.appOrderNo}`);
        return o.status >= 3 ? o : undefined;
      },
      30_000,
    );
    const a = await waitFor(
      'the first order sent again and final',
      async () => {
        const o = await adminGet<Order>(d.ports.admin, `/v1/orders/${first.body.appOrderNo}`);
        return o.status >= 3 && o.orderNo !== first.body.orderNo ? o : undefined;
      },
      60_000,
    );
    const b = await adminGet<Order>(d.ports.admin, `/v1/orders/${second.body.appOrderNo}`);
    const story = `first (before the kill) ${JSON.stringify(first.body)} now ${JSON.stringify(a)}; second ${JSON.stringify(b)}`;
    t.diagnostic(story);
    assert.notEqual(a.orderNo, b.orderNo, story);
    // whatever became of it, Rotor's record of the first order is still that order: its amount, its product
    assert.equal(a.amount, first.body.amount, story);
    assert.equal(a.status, 3, story);
    assert.ok((a.instances ?? []).length > 0, story);
    for (const i of a.instances ?? []) assert.equal(i.productNo, 'STC-101-USA-SOCKS', story);
  } finally {
    await d.stop();
  }
});
