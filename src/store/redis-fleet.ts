// The fleet's shared state on the store's Redis connection (FleetState, src/store/fleet-state.ts): the
// allowance's counters (redis-fleet-allowance.ts), order leases (redis-fleet-leases.ts), sticky sessions
// (redis-fleet-sessions.ts), putting users back after a loss, and the persistence check.
//
// Putting back what Redis lost (restarted without persistence, flushed) from what a daemon holds in memory,
// once the allowance finds the fleet's epoch changed (src/fleet/allowance.ts onDataLost): the user records
// (password hashes included: the others' followers and any daemon started later read them from Redis). Every
// daemon does it at once and each write is "put back unless something as new is there" (one script per
// record), so doing it several times changes nothing.
//
// Not put back: orders, instances, the merchant-number journal, callbacks, the event outbox and kv entries
// (a daemon holds no copy of them); run Redis with persistence (the daemon warns at start when it has none).
import type { FleetState, LeaseStore, Persistence, SharedSessionStore } from './fleet-state.ts';
import { RedisAllowance } from './redis-fleet-allowance.ts';
import { Leases } from './redis-fleet-leases.ts';
import { SharedSessions } from './redis-fleet-sessions.ts';
import type { RedisConnection } from './redis-connection.ts';
import { DEFAULT_REDIS_PREFIX, RedisKeys } from './redis-keys.ts';
import { RESTORE_USER, defineScripts } from './redis-scripts.ts';
import type { StoredUser } from './types.ts';

const SCRIPTS = { rotorRestoreUser: { numberOfKeys: 4, lua: RESTORE_USER } };
/** Records per round trip. */
const BATCH = 500;

type Queued = Record<'rotorRestoreUser', (...args: (string | number)[]) => unknown>;

export class RedisFleetState implements FleetState {
  private readonly keys: RedisKeys;

  constructor(
    private readonly connection: RedisConnection,
    private readonly prefix: string = DEFAULT_REDIS_PREFIX,
  ) {
    this.keys = new RedisKeys(prefix);
    defineScripts(connection.client, SCRIPTS);
  }

  allowance(): RedisAllowance {
    return new RedisAllowance(this.connection, this.prefix);
  }

  leases(owner: string, ttlMs: number): LeaseStore {
    return new Leases(this.connection, { owner, ttlMs, prefix: this.prefix });
  }

  sessions<N extends { id: string }>(now?: () => number): SharedSessionStore<N> {
    return new SharedSessions<N>(this.connection, { prefix: this.prefix, ...(now ? { now } : {}) });
  }

  async restoreUsers(users: readonly StoredUser[], now: number): Promise<number> {
    const k = this.keys;
    let put = 0;
    for (let i = 0; i < users.length; i += BATCH) {
      const batch = users.slice(i, i + BATCH);
      const results = await this.connection.run('users rebuild', async (c) => {
        const pipe = c.pipeline();
        for (const u of batch) {
          // A command defined with defineCommand is queued on a pipeline like any other.
          (pipe as unknown as Queued).rotorRestoreUser(
            k.user(u.name),
            k.usersLive,
            k.usersGone,
            k.usersVersion,
            u.name,
            JSON.stringify(u.data ?? null),
            u.passwordHash,
            u.state,
            u.version,
            now,
          );
        }
        return (await pipe.exec()) ?? [];
      });
      for (const [err, v] of results) {
        if (err) throw this.connection.toStoreError(err, 'users rebuild');
        if (Number(v) === 1) put++;
      }
    }
    return put;
  }

  /** Redis's `save` and `appendonly` (CONFIG GET); undefined when it refuses CONFIG (renamed, an ACL) or cannot be asked. */
  async persistence(): Promise<Persistence | undefined> {
    try {
      const [save, aof] = await this.connection.run('persistence check', (c) =>
        Promise.all([c.config('GET', 'save') as Promise<string[]>, c.config('GET', 'appendonly') as Promise<string[]>]),
      );
      return { snapshots: (save[1] ?? '').trim() !== '', appendOnly: (aof[1] ?? '').toLowerCase() === 'yes' };
    } catch {
      return undefined;
    }
  }
}
