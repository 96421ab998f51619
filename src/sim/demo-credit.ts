// The embedded sandbox's demo credit: a new main account has no traffic, so a demo daemon would refuse every
// connection. Before the first balance poll, each (main account, product) with no balance buys
// `accounts.sandboxFlowMb` of traffic through the daemon's own platform client (the same path a merchant
// takes), and waits for that order to finish. The waiting is on the sandbox's clock, so a sped-up or
// test-driven clock finishes it as fast as the sandbox's orders do.
import { randomBytes } from 'node:crypto';
import type { PlatformClient } from '../platform/client.ts';
import { FINAL_ORDER_STATUS } from '../platform/order-status.ts';
import type { SimClock } from './platform/clock.ts';

/** What the credit needs of a configured user. */
export interface DemoAccount {
  mainAccount: string;
  product: string;
}

export interface DemoCreditOptions {
  client: Pick<PlatformClient, 'call'>;
  clock: Pick<SimClock, 'now' | 'schedule'>;
  flowMb: number;
  logger?: { info(obj: object, msg: string): void };
  /** How often the order is read while it runs, in sandbox ms; default 200. */
  pollMs?: number;
  /** How many reads before giving up waiting (the credit may still land later); default 100. */
  maxPolls?: number;
}

export async function creditDemoFlow(accounts: readonly DemoAccount[], options: DemoCreditOptions): Promise<void> {
  const { client, clock, flowMb } = options;
  const pollMs = options.pollMs ?? 200;
  const seen = new Set<string>();
  for (const u of accounts) {
    const key = `${u.mainAccount}/${u.product}`;
    if (seen.has(key) || u.product === '') continue;
    seen.add(key);
    const info = await client
      .call('ProxyInfo', { appUsername: u.mainAccount, proxyType: 104, productNo: u.product })
      .catch(() => undefined);
    const balance = Number(info?.list?.find((e) => e.productNo === u.product || e.productNo == null)?.balance ?? 0);
    if (balance > 0) continue;
    const appOrderNo = `demo${clock.now().toString(36)}${randomBytes(4).toString('hex')}`.slice(0, 32);
    await client.call('InstanceOpen', {
      appOrderNo,
      params: [{ productNo: u.product, appUsername: u.mainAccount, flow: flowMb, cycleTimes: 1 }],
    });
    // Orders are asynchronous: wait for the credit so the first balance poll sees it.
    for (let i = 0; i < (options.maxPolls ?? 100); i++) {
      const order = await client.call('GetOrder', { appOrderNo }).catch(() => undefined);
      if (order?.status != null && FINAL_ORDER_STATUS.has(order.status)) break;
      await new Promise<void>((resolve) => clock.schedule(pollMs, resolve));
    }
    options.logger?.info({ account: u.mainAccount, product: u.product, flowMb }, 'sandbox: credited demo traffic');
  }
}
