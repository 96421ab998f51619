// Seed 4.4 [GetOrder]: one order with its instances paged (`page`, `pageSize`). A platform may page by fewer than
// asked (its own cap) and echo the size asked or none. An order of 5 instances on a platform paging by 2: every
// instance is known to Rotor (not only the first page's), read page by page. Callbacks off: the order query is the
// only way Rotor learns the instances.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { eventually } from '../support/wait.ts';
import { startVariantRig, type VariantRig } from '../support/platform-variants.ts';

describe('an order of 5 instances on a platform paging its instances by 2 (whatever size is asked)', () => {
  let rig: VariantRig;
  before(async () => {
    rig = await startVariantRig({
      callbacks: false,
      hooks: {
        request: (op, params) => (op === 'GetOrder' ? { ...params, pageSize: 2 } : undefined),
        // It echoes the size asked, not the size it paged by.
        data: (op, data, params) => (op === 'GetOrder' ? { ...(data as object), pageSize: params.pageSize } : data),
      },
    });
  });
  after(async () => rig?.close());

  test('every instance of the order is known', async () => {
    const opened = await rig.gw.admin<{ appOrderNo: string }>('/v1/orders/open', {
      body: { productNo: 'STC-101-USA-SOCKS', count: 5, cycleTimes: 1 },
    });
    assert.equal(opened.status, 202, JSON.stringify(opened.body));
    let order: { status?: number; instances?: unknown[] } = {};
    const done = await eventually(
      async () => {
        order = (await rig.gw.admin<typeof order>(`/v1/orders/${opened.body.appOrderNo}`)).body;
        return order.status === 3 && (order.instances?.length ?? 0) === 5;
      },
      10_000,
      250,
    );
    assert.ok(done, `the order as Rotor holds it: status ${order.status}, ${order.instances?.length} instances`);
  });
});
