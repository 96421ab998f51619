// Waiting on a platform order from a test that talks to the sandbox through the real client.
import type { PlatformClient } from '../../src/platform/client.ts';
import { FINAL_ORDER_STATUS, ORDER_STATUS } from '../../src/platform/order-status.ts';
import { poll } from './wait.ts';

/** Polls GetOrder until the order succeeds (status 3); throws when it fails (4, 5) or after `timeoutMs`. */
export async function orderSucceeded(client: PlatformClient, orderNo: string, timeoutMs = 10_000, everyMs = 10): Promise<void> {
  const o = await poll(
    async () => {
      const order = await client.call('GetOrder', { orderNo });
      return order.status != null && FINAL_ORDER_STATUS.has(order.status) && order;
    },
    { what: `order ${orderNo} to end`, timeoutMs, everyMs },
  );
  if (o.status !== ORDER_STATUS.succeeded) throw new Error(`order ${orderNo} ended in status ${o.status}`);
}
