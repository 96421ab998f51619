// Where state lives: the backends named by store.path and, when they are shared (Redis), the fleet's parts
// on their shared state (limits, sticky sessions and order leases shared by several daemons).
import type { Config } from '../config/schema.ts';
import type { Fleet } from '../fleet/index.ts';
import { openBackends, type Backends } from '../store/backends.ts';
import { lockStore } from '../store/store-lock.ts';
import { clockOption, type AssemblyContext } from './lifecycle.ts';

export interface StatePart {
  backends: Backends;
  /** Several daemons on one Redis; undefined for a store of its own. */
  fleet: Fleet | undefined;
  /** The fleet's module, loaded only for a shared store (a daemon on SQLite never holds it). */
  fleetParts: typeof import('../fleet/index.ts') | undefined;
}

/**
 * The store to this daemon alone (a SQLite file; a Redis store is shared by design): taken before anything that
 * writes beside it, the embedded sandbox's state file included, and given back last.
 */
export function holdStore(config: Config, ctx: AssemblyContext): void {
  const lock = lockStore(config.store.path, 'rotor start');
  if (lock) ctx.stops.onStop('store lock', () => lock.release());
}

export async function assembleState(config: Config, ctx: AssemblyContext): Promise<StatePart> {
  const fleetConfig = config.fleet;
  const backends = await openBackends(config.store.path, {
    prefix: fleetConfig.prefix,
    aliveTtlMs: fleetConfig.aliveTtlMs,
    logger: ctx.logger.child({ component: 'store' }),
  });
  ctx.stops.onStop('store', () => backends.close());
  const shared = backends.fleet;
  if (shared === undefined) return { backends, fleet: undefined, fleetParts: undefined };
  const fleetParts = await import('../fleet/index.ts');
  const fleet = fleetParts.startFleet(shared, {
    ...(fleetConfig.instanceId ? { instanceId: fleetConfig.instanceId } : {}),
    sliceBytes: fleetConfig.sliceBytes,
    offlineBytes: fleetConfig.offlineBytes,
    ...(fleetConfig.outageMaxBytes > 0 ? { outageMaxBytes: fleetConfig.outageMaxBytes } : {}),
    aliveTtlMs: fleetConfig.aliveTtlMs,
    leaseTtlMs: fleetConfig.leaseTtlMs,
    logger: ctx.logger.child({ component: 'fleet' }),
    ...clockOption(ctx),
  });
  // After the accounting's last flush and the orders' stop (both registered later, so stopped earlier).
  ctx.stops.onStop('fleet', () => fleet.close());
  // One line at start when this Redis keeps nothing on disk (a restart would empty it).
  await fleetParts.checkPersistence(shared, ctx.logger.child({ component: 'fleet' }));
  ctx.logger.info(
    { instance: fleet.instance, sliceBytes: fleetConfig.sliceBytes, offlineBytes: fleetConfig.offlineBytes },
    'fleet mode: limits, sticky sessions and order tracking shared through redis',
  );
  return { backends, fleet, fleetParts };
}
