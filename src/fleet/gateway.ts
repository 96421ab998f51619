// Sticky sessions across the fleet, through the gateway's SessionStore seam: the local SessionTable
// stays the cache the router reads synchronously, and before a sticky connection is dialed the local miss
// is settled against Redis (the fleet state's SharedSessionStore):
//   • the fleet has a live binding → it is adopted here with its own start and expiry;
//   • none → a node is taken from this daemon's pool and claimed (SET NX): the winner's node is adopted,
//     ours if we won, the other daemon's if it bound the session first;
//   • Redis unreachable → nothing: the router binds locally as a single daemon does.
// A node another daemon drew is not in this daemon's pool: the pool view below calls it usable while its
// own expiry lasts, so the router dials it directly (it carries host, port and credentials). When a sticky
// node fails here the router rotates the session: the shared binding is ended if it is still on that node,
// and the router's next bind (a node of our pool) is claimed again; a lost claim adopts the winner's node
// for the connections after this one.
import type { PoolKey, NodeSource, UpstreamNode } from '../pool/types.ts';
import type { PoolProvider, RotationReason, SessionStore } from '../proxy/types.ts';
import type { SessionTable, SessionView } from '../session/table.ts';
import type { Logger } from '../telemetry/logger.ts';
import { StoreError } from '../store/errors.ts';
import type { SharedSession, SharedSessionStore } from '../store/fleet-state.ts';

export interface FleetSessionsOptions {
  table: SessionTable;
  shared: SharedSessionStore<UpstreamNode>;
  /** This daemon's pools, unwrapped (a node is taken from here to claim a new session). */
  pools: PoolProvider;
  now?: () => number;
  logger?: Logger;
}

/** The router's SessionStore in fleet mode, with the async step the router awaits before a sticky dial (prepare). */
export class FleetSessions implements SessionStore {
  private readonly table: SessionTable;
  private readonly shared: SharedSessionStore<UpstreamNode>;
  private readonly pools: PoolProvider;
  private readonly now: () => number;
  private readonly logger: Logger | undefined;
  /** Nodes adopted from another daemon's binding (not acquired from our pool). */
  private readonly foreign = new WeakSet<UpstreamNode>();
  /** Shared operations per session, run in order (an end before the claim that follows it). */
  private readonly pending = new Map<string, Promise<unknown>>();
  private storeDown = false;

  constructor(options: FleetSessionsOptions) {
    this.table = options.table;
    this.shared = options.shared;
    this.pools = options.pools;
    this.now = options.now ?? Date.now;
    this.logger = options.logger;
  }

  /** The pool view the router must use: another daemon's node counts as usable while it lasts. */
  readonly poolProvider: PoolProvider = {
    pool: (key: PoolKey): NodeSource => this.view(this.pools.pool(key)),
  };

  get(user: string, sessionId: string): { node: UpstreamNode } | undefined {
    return this.table.get(user, sessionId);
  }

  /** The router bound a node of ours after a miss or a failure: claim it for the fleet (in the background). */
  bind(user: string, sessionId: string, node: UpstreamNode, sessTimeMinutes: number): unknown {
    const s = this.table.bind(user, sessionId, node, sessTimeMinutes);
    if (s) {
      this.queue(user, sessionId, async () => {
        const { session, won } = await this.shared.claim(user, sessionId, node, s.expiresAt - this.now());
        if (!won && this.table.peek(user, sessionId)?.node === node) this.adopt(user, sessionId, session);
      });
    }
    return s;
  }

  rotate(user: string, sessionId: string, reason: RotationReason): boolean {
    const held = this.table.peek(user, sessionId);
    const live = this.table.rotate(user, sessionId, reason);
    // A session past its own expiry ends in Redis by its TTL. One still running that moves off its node
    // (failed, node expired, manual) ends for the fleet now; the end compares the node, so it never drops a
    // binding another daemon made meanwhile.
    if (held && held.expiresAt > this.now()) {
      const nodeId = held.node.id;
      this.queue(user, sessionId, () => this.shared.end(user, sessionId, nodeId));
    }
    return live;
  }

  // ── abuse bounds: per-user session bound, a deleted or disabled user's sessions ended fleet-wide ──
  admits(user: string, sessionId: string): boolean {
    return this.table.admits(user, sessionId);
  }

  dropUser(user: string): number {
    const now = this.now();
    for (const s of this.table.sessionsOf(user)) {
      if (s.expiresAt > now) this.queue(user, s.sessionId, () => this.shared.end(user, s.sessionId, s.node.id));
    }
    return this.table.dropUser(user);
  }

  /** GET /v1/sessions: the sessions this daemon holds (its own and adopted ones). */
  list(): SessionView[] {
    return this.table.list();
  }

  /**
   * Before a sticky dial: settle a local miss against the fleet. Never rejects: with Redis away, or no node
   * to claim with, the router goes on as a single daemon would.
   */
  async prepare(user: string, sessionId: string, sessTimeMinutes: number, poolKey: PoolKey): Promise<void> {
    if (!(sessTimeMinutes > 0) || this.table.get(user, sessionId)) return;
    try {
      await this.pending.get(pendingKey(user, sessionId));
      const found = await this.shared.get(user, sessionId);
      if (found) {
        this.adopt(user, sessionId, found);
      } else {
        const pool = this.pools.pool(poolKey);
        let node: UpstreamNode;
        try {
          node = await pool.acquire();
        } catch {
          return; // the router asks the pool again and answers the client
        }
        try {
          const { session, won } = await this.shared.claim(user, sessionId, node, Math.round(sessTimeMinutes * 60_000));
          this.adopt(user, sessionId, session, won);
        } finally {
          // The router treats the adopted session as a sticky hit (neither acquired nor released).
          pool.release(node);
        }
      }
      this.storeUp();
    } catch (err) {
      this.storeFailed(err);
    }
  }

  /** `ours`: the node is our pool's own object (a claim we won), judged by our pool alone. */
  private adopt(user: string, sessionId: string, s: SharedSession<UpstreamNode>, ours = false): void {
    if (!ours) this.foreign.add(s.node);
    this.table.adopt(user, sessionId, s.node, s.startedAt, s.expiresAt);
  }

  private view(inner: NodeSource): NodeSource {
    let v = this.views.get(inner);
    if (v === undefined) {
      const foreign = this.foreign;
      const now = this.now;
      v = {
        acquire: (exclude, options) => inner.acquire(exclude, options),
        release: (node) => inner.release(node),
        reportFailure: (node, reason) => inner.reportFailure(node, reason),
        reportSuccess: (node) => inner.reportSuccess(node),
        isUsable: (node) => inner.isUsable(node) || (foreign.has(node) && (node.expiresAt === undefined || node.expiresAt > now())),
      };
      this.views.set(inner, v);
    }
    return v;
  }
  private readonly views = new WeakMap<NodeSource, NodeSource>();

  private queue(user: string, sessionId: string, op: () => Promise<unknown>): void {
    const k = pendingKey(user, sessionId);
    const run = (this.pending.get(k) ?? Promise.resolve())
      .then(op)
      .then(
        () => this.storeUp(),
        (err: unknown) => this.storeFailed(err),
      )
      .finally(() => {
        if (this.pending.get(k) === run) this.pending.delete(k);
      });
    this.pending.set(k, run);
  }

  private storeUp(): void {
    if (!this.storeDown) return;
    this.storeDown = false;
    this.logger?.info('shared sessions: redis reachable again; sticky sessions are shared by the fleet again');
  }

  private storeFailed(err: unknown): void {
    if (err instanceof StoreError && err.code === 'STORE_UNAVAILABLE') {
      if (!this.storeDown)
        this.logger?.warn('shared sessions: redis unreachable; sticky sessions are local to this instance until it returns');
      this.storeDown = true;
      return;
    }
    this.logger?.warn({ err }, 'shared session operation failed; staying local');
  }
}

const pendingKey = (user: string, sessionId: string): string => `${user}\u0000${sessionId}`;
