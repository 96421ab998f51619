// Waiting on a platform order from a test that talks to the sandbox through the real client, and buying
// traffic for a main account (a new sandbox account has none, so a daemon would refuse its users).
import { randomBytes } from 'node:crypto';
import type { PlatformClient } from '../../src/platform/client.ts';
import { FINAL_ORDER_STATUS, ORDER_STATUS } from '../../src/platform/order-status.ts';
import { poll } from './wait.ts';

type OrderCaller = Pick<PlatformClient, 'call'>;
/** The platform's order number, or the merchant's own (`appOrderNo`). */
export type OrderRef = string | { appOrderNo: string };

/** Polls GetOrder (100 instances a page) until the order is final (3, 4 or 5) and resolves with it. */
export function orderFinal(client: OrderCaller, order: OrderRef, timeoutMs = 10_000, everyMs = 10) {
  const ref = typeof order === 'string' ? { orderNo: order } : order;
  return poll(
    async () => {
      const o = await client.call('GetOrder', { ...ref, pageSize: 100 });
      return o.status != null && FINAL_ORDER_STATUS.has(o.status) && o;
    },
    { what: `order ${typeof order === 'string' ? order : order.appOrderNo} to end`, timeoutMs, everyMs },
  );
}

/** Polls GetOrder until the order succeeds (status 3); throws when it fails (4, 5) or after `timeoutMs`. */
export async function orderSucceeded(client: OrderCaller, order: OrderRef, timeoutMs = 10_000, everyMs = 10): Promise<void> {
  const o = await orderFinal(client, order, timeoutMs, everyMs);
  if (o.status !== ORDER_STATUS.succeeded)
    throw new Error(`order ${typeof order === 'string' ? order : order.appOrderNo} ended in status ${o.status}`);
}

/**
 * Buys `flow` MB of a traffic product for `account` (InstanceOpen, one cycle) and waits until the order has
 * succeeded; resolves with the platform's order number.
 */
export async function buyTraffic(
  client: OrderCaller,
  account: string,
  productNo: string,
  flow: number,
  appOrderNo = `buy${randomBytes(8).toString('hex')}`,
): Promise<string> {
  const o = await client.call('InstanceOpen', { appOrderNo, params: [{ productNo, appUsername: account, flow, cycleTimes: 1 }] });
  await orderSucceeded(client, o.orderNo);
  return o.orderNo;
}
