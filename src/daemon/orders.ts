// Static orders (placer, tracker, callbacks, expiry watch) and the instances they produced, as the gateway's
// `-instance-` routes read them.
import type { Config } from '../config/schema.ts';
import { orderFinalWriter } from '../events/index.ts';
import type { Fleet } from '../fleet/index.ts';
import { InstanceDirectoryCache, type InstanceRights } from '../orders/instance-directory.ts';
import { Orders, orderLeaseName } from '../orders/index.ts';
import type { PlatformClient } from '../platform/client.ts';
import type { Backends } from '../store/backends.ts';
import type { OrderRecord } from '../store/types.ts';
import type { EventsPart } from './events.ts';
import { clockOption, type AssemblyContext } from './lifecycle.ts';

export interface OrdersPart {
  orders: Orders;
  instances: InstanceDirectoryCache;
}

interface Needs {
  client: PlatformClient;
  backends: Pick<Backends, 'orders'>;
  fleet: Fleet | undefined;
  events: EventsPart;
  /** An order stored as final: its dynamic balances are read at once (src/accounts/balances.ts orderFinal). */
  onOrderFinal?: (request: unknown) => void;
  /** A user's `instances` (the users directory): which static instances `-instance-` may name for them. */
  rights?: InstanceRights;
}

export async function assembleOrders(config: Config, needs: Needs, ctx: AssemblyContext): Promise<OrdersPart> {
  const { client, fleet } = needs;
  const store = needs.backends.orders;
  const o = config.orders;
  const orders = new Orders({
    client,
    store,
    metrics: ctx.metrics,
    logger: ctx.logger.child({ component: 'orders' }),
    tracking: {
      pollInitialMs: o.pollInitialMs,
      pollMaxMs: o.pollMaxMs,
      sweepMs: o.sweepMs,
      expiryWarnHours: o.expiryWarnHours,
      ...(o.autoRenew.enabled ? { autoRenew: o.autoRenew } : {}),
    },
    ...(fleet ? { claims: fleet.leases } : {}),
    storeFinalOrder: finalWithHook(orderFinalWriter(needs.events.outbox, store), needs.onOrderFinal),
  });
  // Another daemon took an order's lease: this one stops following it.
  fleet?.onLeaseLost((name) => {
    if (name.startsWith(orderLeaseName(''))) orders.tracker.drop(name.slice(orderLeaseName('').length));
  });
  await orders.start();
  ctx.stops.onStop('orders', () => orders.stop());
  const instances = new InstanceDirectoryCache(store, { logger: ctx.logger, ...clockOption(ctx) });
  if (needs.rights) instances.useRights(needs.rights);
  await instances.start();
  ctx.stops.onStop('instance directory', () => instances.stop());
  return { orders, instances };
}

function finalWithHook(
  write: (order: OrderRecord) => Promise<void>,
  hook: ((request: unknown) => void) | undefined,
): (order: OrderRecord) => Promise<void> {
  if (!hook) return write;
  return async (order) => {
    await write(order);
    hook(order.request);
  };
}
