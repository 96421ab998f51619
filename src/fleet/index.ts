// The fleet's shared parts on the store's fleet state (Backends.fleet): the allowance leaser (limits), shared
// sticky sessions and the lease keeper (one daemon per order). Built by the composition root when the
// backends have a fleet state (a store several daemons share); closed before the store.
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { UpstreamNode } from '../pool/types.ts';
import type { FleetState } from '../store/fleet-state.ts';
import type { Logger } from '../telemetry/logger.ts';
import { AllowanceLeaser } from './allowance.ts';
import { LeaseKeeper } from './lease.ts';
import type { SharedSessionStore } from '../store/fleet-state.ts';
import type { StoredUser } from '../store/types.ts';
import type { StickySession } from '../session/table.ts';

export { AllowanceLeaser, UserAllowance, type AllowanceOptions } from './allowance.ts';
export { LeaseKeeper, type LeaseKeeperOptions } from './lease.ts';
export { FleetSessions, type FleetSessionsOptions } from './gateway.ts';
export { checkPersistence, type Persistence } from './persistence.ts';

export interface FleetOptions {
  /** This daemon's identity; default hostname:pid:random. */
  instanceId?: string;
  sliceBytes: number;
  offlineBytes: number;
  /** Most a daemon spends per user on its own in one Redis outage (AllowanceOptions.outageMaxBytes). */
  outageMaxBytes?: number;
  aliveTtlMs: number;
  leaseTtlMs: number;
  logger?: Logger;
  /** The gateway's clock (session start and expiry stamps). */
  now?: () => number;
}

export interface Fleet {
  readonly instance: string;
  readonly allowance: AllowanceLeaser;
  readonly sessions: SharedSessionStore<UpstreamNode>;
  readonly leases: LeaseKeeper;
  /** Who to tell about each lease found lost (expired or taken over): whoever holds leases. */
  onLeaseLost(handler: (name: string) => void): void;
  /**
   * What this daemon holds that Redis must have: put back whenever Redis is found to have lost the fleet's
   * data (src/fleet/index.ts rebuild). The users directory's records and the sticky sessions' table.
   */
  holdUsers(source: () => StoredUser[]): void;
  holdSessions(source: () => StickySession[]): void;
  /** Gives allowance slices and leases back (best effort when Redis is down). Does not close the connection. */
  close(): Promise<void>;
}

export function defaultInstanceId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
}

export function startFleet(state: FleetState, options: FleetOptions): Fleet {
  const instance = options.instanceId || defaultInstanceId();
  const logger = options.logger;
  const allowance = new AllowanceLeaser(state.allowance(), {
    instance,
    sliceBytes: options.sliceBytes,
    offlineBytes: options.offlineBytes,
    ...(options.outageMaxBytes !== undefined ? { outageMaxBytes: options.outageMaxBytes } : {}),
    aliveTtlMs: options.aliveTtlMs,
    ...(logger ? { logger } : {}),
  });
  const sessions = state.sessions<UpstreamNode>(options.now);
  let lost: ((name: string) => void) | undefined;
  const leases = new LeaseKeeper(state.leases(instance, options.leaseTtlMs), {
    ...(logger ? { logger } : {}),
    onLost: (name) => lost?.(name),
  });
  const now = options.now ?? Date.now;
  const held: { users?: () => StoredUser[]; sessions?: () => StickySession[] } = {};
  allowance.onDataLost((epoch) => void rebuild(epoch));
  const rebuild = async (epoch: string): Promise<void> => {
    const users = held.users?.() ?? [];
    const live = held.sessions?.() ?? [];
    try {
      const [putUsers, putSessions] = await Promise.all([state.restoreUsers(users, now()), sessions.restore(live)]);
      logger?.warn(
        { epoch, users: users.length, usersPutBack: putUsers, sessions: live.length, sessionsPutBack: putSessions },
        'fleet data put back into redis from what this instance holds (usage and limits follow with the next sync of each user)',
      );
    } catch (err) {
      logger?.error({ err, epoch }, 'could not put the fleet data back into redis; another instance may have');
    }
  };
  return {
    instance,
    allowance,
    sessions,
    leases,
    onLeaseLost(handler) {
      lost = handler;
    },
    holdUsers(source) {
      held.users = source;
    },
    holdSessions(source) {
      held.sessions = source;
    },
    async close() {
      await Promise.allSettled([allowance.close(), leases.close()]);
    },
  };
}
