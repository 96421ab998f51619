// Sticky sessions shared by the fleet: (user, session id) -> the node the session leaves through, kept in
// Redis with the session's TTL so the same session id leaves through the same exit whichever daemon the
// client reaches. The first daemon to bind wins (SET NX PX); the others follow what it stored. Like the
// local SessionTable the expiry is fixed when the session begins (traffic does not extend it). Ending a
// session compares the node first (Lua), so a daemon rotating away from a failed node never deletes the
// newer binding another daemon made meanwhile.
//
// The node is stored as the gateway hands it over (a password included, when it has one): Redis holds the
// same secrets as the SQLite file and must be as private.
import { StoreError } from './errors.ts';
import type { SharedSession, SharedSessionStore } from './fleet-state.ts';
import type { RedisConnection } from './redis-connection.ts';
import { DEFAULT_REDIS_PREFIX, RedisKeys } from './redis-keys.ts';
import { callScript, defineScripts } from './redis-scripts.ts';

const END_IF_NODE = `
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local ok, s = pcall(cjson.decode, v)
if ok and s.node and s.node.id == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;
/** Sessions put back per round trip (restore). */
const RESTORE_PAGE = 500;

const SCRIPTS = { rotorSessionEnd: { numberOfKeys: 1, lua: END_IF_NODE } };

export interface SharedSessionsOptions {
  prefix?: string;
  now?: () => number;
}

/** Every method fails with StoreUnavailableError when Redis cannot be reached: the caller then stays local. */
export class SharedSessions<N extends { id: string }> implements SharedSessionStore<N> {
  private readonly keys: RedisKeys;
  private readonly now: () => number;

  constructor(
    private readonly connection: RedisConnection,
    options: SharedSessionsOptions = {},
  ) {
    this.keys = new RedisKeys(options.prefix ?? DEFAULT_REDIS_PREFIX);
    this.now = options.now ?? Date.now;
    defineScripts(connection.client, SCRIPTS);
  }

  /** The fleet's session, if one is live. */
  async get(user: string, sessionId: string): Promise<SharedSession<N> | undefined> {
    const v = await this.connection.run(`session of ${user}`, (c) => c.get(this.keys.session(user, sessionId)));
    if (v === null) return undefined;
    const s = JSON.parse(v) as SharedSession<N>;
    return s.expiresAt > this.now() ? s : undefined;
  }

  /**
   * Binds the session to `node` for ttlMs unless another daemon already bound it: returns the session in
   * force (ours, or the winner's) and whether ours won.
   */
  async claim(user: string, sessionId: string, node: N, ttlMs: number): Promise<{ session: SharedSession<N>; won: boolean }> {
    const ttl = Math.max(1, Math.round(ttlMs));
    const startedAt = this.now();
    const mine: SharedSession<N> = { node, startedAt, expiresAt: startedAt + ttl };
    const key = this.keys.session(user, sessionId);
    return this.connection.run(`session of ${user}`, async (c) => {
      // A loop because the winner's entry may expire between our SET NX and our GET.
      for (let i = 0; i < 3; i++) {
        if ((await c.set(key, JSON.stringify(mine), 'PX', ttl, 'NX')) === 'OK') return { session: mine, won: true };
        const v = await c.get(key);
        if (v !== null) return { session: JSON.parse(v) as SharedSession<N>, won: false };
      }
      throw new StoreError('STORE_FAILED', `session of ${user}: the binding kept changing`);
    });
  }

  /**
   * Puts back sessions Redis lost (src/fleet/index.ts rebuild): each one unless a binding is there already (SET NX,
   * its own remaining TTL), so several daemons doing it at once keep the first. Resolves to how many were put.
   */
  async restore(sessions: readonly ({ user: string; sessionId: string } & SharedSession<N>)[]): Promise<number> {
    const now = this.now();
    const live = sessions.filter((s) => s.expiresAt - now >= 1);
    if (live.length === 0) return 0;
    // A page per round trip: each command's timeout runs from when it is sent, and a fleet may hold 100,000.
    let put = 0;
    for (let from = 0; from < live.length; from += RESTORE_PAGE) {
      const page = live.slice(from, from + RESTORE_PAGE);
      const results = await this.connection.run('sessions rebuild', (c) => {
        const pipe = c.pipeline();
        const at = this.now();
        for (const s of page) {
          const value: SharedSession<N> = { node: s.node, startedAt: s.startedAt, expiresAt: s.expiresAt };
          pipe.set(this.keys.session(s.user, s.sessionId), JSON.stringify(value), 'PX', Math.max(1, Math.round(s.expiresAt - at)), 'NX');
        }
        return pipe.exec();
      });
      for (const [err, v] of results ?? []) if (!err && v === 'OK') put++;
    }
    return put;
  }

  /** Ends the session if it is still on `nodeId` (a failed node); true when it ended it. */
  async end(user: string, sessionId: string, nodeId: string): Promise<boolean> {
    return this.connection.run(
      `session of ${user}`,
      async (c) => (await callScript(c, 'rotorSessionEnd', [this.keys.session(user, sessionId), nodeId])) === 1,
    );
  }
}
