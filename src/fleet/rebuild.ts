// Putting back what Redis lost (restarted without persistence, flushed) from what a daemon holds in memory,
// once the allowance finds the fleet's epoch changed (src/fleet/allowance.ts onDataLost): the user records
// (password hashes included: the others' followers and any daemon started later read them from Redis) and
// the sticky sessions. Usage and limits are put back by the allowance's own syncs. Every daemon does it at
// once and each write is "put back unless something as new is there" (one script per record, or SET NX),
// so doing it several times changes nothing.
//
// Not put back: orders, instances, the merchant-number journal, callbacks, the event outbox and kv entries
// (a daemon holds no copy of them); run Redis with persistence (the daemon warns at start when it has none).
import type { RedisConnection } from '../store/redis-connection.ts';
import { DEFAULT_REDIS_PREFIX, RedisKeys } from '../store/redis-keys.ts';
import { RESTORE_USER } from '../store/redis-scripts.ts';
import { defineScripts } from '../store/redis.ts';
import type { StoredUser } from '../store/types.ts';

const SCRIPTS = { rotorRestoreUser: { numberOfKeys: 4, lua: RESTORE_USER } };
/** Records per round trip. */
const BATCH = 500;

type Queued = Record<'rotorRestoreUser', (...args: (string | number)[]) => unknown>;

export class UserRestorer {
  private readonly keys: RedisKeys;
  private readonly now: () => number;

  constructor(
    private readonly connection: RedisConnection,
    options: { prefix?: string; now?: () => number } = {},
  ) {
    this.keys = new RedisKeys(options.prefix ?? DEFAULT_REDIS_PREFIX);
    this.now = options.now ?? Date.now;
    defineScripts(connection.client, SCRIPTS);
  }

  /** Puts back each record Redis lacks (or holds older); resolves to how many were put back. */
  async restore(users: readonly StoredUser[]): Promise<number> {
    const k = this.keys;
    let put = 0;
    for (let i = 0; i < users.length; i += BATCH) {
      const batch = users.slice(i, i + BATCH);
      const t = this.now();
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
            t,
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
}
