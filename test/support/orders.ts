// Waiting on a platform order from a test that talks to the sandbox through the real client.
import type { PlatformClient } from '../../src/platform/client.ts';

/** Polls GetOrder until the order succeeds (status 3); throws when it fails (4, 5) or after `timeoutMs`. */
export async function orderSucceeded(client: PlatformClient, orderNo: string, timeoutMs = 10_000, everyMs = 10): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const o = await client.call('GetOrder', { orderNo });
    if (o.status === 3) return;
    if (o.status === 4 || o.status === 5 || Date.now() > until) throw new Error(`order ${orderNo} ended in status ${o.status}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
