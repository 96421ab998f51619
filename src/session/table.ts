// Sticky sessions: (user, session id) → the node the session leaves through. A session keeps its node until
// sessTime minutes after it BEGAN (not sliding: traffic does not extend it) or until the node fails; then the
// gateway binds a new one. Held in an lru-cache bounded in size, with the entry's TTL = sessTime and the
// cache's clock injectable. Expired entries are found on lookup (no autopurge timers) and counted as
// rotations with reason 'expired'.
import { LRUCache } from 'lru-cache';
import type { UpstreamNode } from '../pool/types.ts';
import type { Metrics } from '../telemetry/metrics.ts';

export type RotationReason = 'expired' | 'failed' | 'manual';

export interface StickySession {
  user: string;
  sessionId: string;
  node: UpstreamNode;
  /** Epoch ms the session began (its node was bound). */
  startedAt: number;
  expiresAt: number;
  /** Adopted with a node another daemon of a fleet drew (not in this daemon's pools). */
  foreign: boolean;
}

export interface SessionView {
  user: string;
  sessionId: string;
  nodeId: string;
  startedAt: number;
  expiresAt: number;
}

export interface SessionTableOptions {
  /** Most sessions held; the least recently used go first. Default 100 000. */
  maxSessions?: number;
  /**
   * Most sessions one user holds (config proxy.maxSessionsPerUser); a new session id past it is refused
   * (admits) until older ones end, so one customer cannot push everyone else's out. Default 1000.
   */
  maxPerUser?: number;
  now?: () => number;
  metrics?: Metrics;
}

// \u0000 cannot appear in user names or session ids (both are [A-Za-z0-9_.]+), so keys never collide.
const key = (user: string, sessionId: string) => `${user}\u0000${sessionId}`;

export class SessionTable {
  private readonly cache: LRUCache<string, StickySession>;
  private readonly now: () => number;
  private readonly metrics: Metrics | undefined;
  /** user → its session ids held (kept in step with the cache by its dispose hook). */
  private readonly byUser = new Map<string, Set<string>>();
  readonly maxPerUser: number;

  constructor(options: SessionTableOptions = {}) {
    this.now = options.now ?? Date.now;
    this.metrics = options.metrics;
    this.maxPerUser = Math.max(1, options.maxPerUser ?? 1000);
    this.cache = new LRUCache<string, StickySession>({
      // Every way out of the cache (delete, eviction, expiry) but a replacement of the same key.
      dispose: (s, _k, reason) => {
        if (reason !== 'set') this.forget(s.user, s.sessionId);
      },
      // Bounded by count through maxSize (each entry sizes 1), not `max`: lru-cache preallocates seven
      // arrays of `max` slots (4.2 MiB at 100,000, resident from the start); these grow with the sessions.
      maxSize: Math.max(1, options.maxSessions ?? 100_000),
      sizeCalculation: () => 1,
      // TTL is given per entry at bind; the cache only needs TTL tracking on.
      ttl: 60_000,
      ttlAutopurge: false,
      noUpdateTTL: true,
      updateAgeOnGet: false,
      allowStale: false,
      ttlResolution: 0,
      perf: { now: this.now },
    });
    this.updateGauge();
  }

  /** The session's node while the session lasts; undefined when there is none or it just expired (counted). */
  get(user: string, sessionId: string): StickySession | undefined {
    const k = key(user, sessionId);
    // allowStale returns an expired entry once (and drops it), so expiry is seen and counted here.
    const s = this.cache.get(k, { allowStale: true });
    if (!s) return undefined;
    if (s.expiresAt <= this.now()) {
      this.cache.delete(k);
      this.metrics?.sessionRotations.inc({ reason: 'expired' });
      this.updateGauge();
      return undefined;
    }
    return s;
  }

  /**
   * Starts a session on `node` for sessTimeMinutes. Replaces any current binding (a new session begins).
   * sessTime ≤ 0 means "a new exit on every use": nothing is held and undefined is returned.
   */
  bind(user: string, sessionId: string, node: UpstreamNode, sessTimeMinutes: number): StickySession | undefined {
    const k = key(user, sessionId);
    if (!(sessTimeMinutes > 0)) {
      if (this.cache.delete(k)) this.updateGauge();
      return undefined;
    }
    const startedAt = this.now();
    const ttl = Math.round(sessTimeMinutes * 60_000);
    const s: StickySession = { user, sessionId, node, startedAt, expiresAt: startedAt + ttl, foreign: false };
    this.cache.set(k, s, { ttl, noUpdateTTL: false });
    this.remember(user, sessionId);
    this.updateGauge();
    return s;
  }

  /**
   * Whether `user` may use `sessionId` now: a session it holds, or a new one while it holds fewer than
   * maxPerUser (its ended sessions are dropped first, only when the bound is reached).
   */
  admits(user: string, sessionId: string): boolean {
    const ids = this.byUser.get(user);
    if (ids === undefined || ids.size < this.maxPerUser || ids.has(sessionId)) return true;
    const now = this.now();
    for (const id of [...ids]) {
      const held = this.cache.peek(key(user, id), { allowStale: true });
      if (held === undefined || held.expiresAt <= now) this.cache.delete(key(user, id));
    }
    if (ids.size < this.maxPerUser) this.updateGauge();
    return ids.size < this.maxPerUser;
  }

  /** Sessions `user` holds now (ended-but-unswept ones included). */
  countOf(user: string): number {
    return this.byUser.get(user)?.size ?? 0;
  }

  /** The sessions `user` holds (ended-but-unswept ones included). */
  sessionsOf(user: string): StickySession[] {
    const out: StickySession[] = [];
    for (const id of this.byUser.get(user) ?? []) {
      const s = this.cache.peek(key(user, id), { allowStale: true });
      if (s) out.push(s);
    }
    return out;
  }

  /** Ends every session of `user` at once (deleted or disabled): none is counted as a rotation. */
  dropUser(user: string): number {
    const ids = this.byUser.get(user);
    if (ids === undefined) return 0;
    const n = ids.size;
    for (const id of [...ids]) this.cache.delete(key(user, id));
    this.byUser.delete(user);
    this.updateGauge();
    return n;
  }

  private remember(user: string, sessionId: string): void {
    let ids = this.byUser.get(user);
    if (ids === undefined) this.byUser.set(user, (ids = new Set()));
    ids.add(sessionId);
  }

  private forget(user: string, sessionId: string): void {
    const ids = this.byUser.get(user);
    if (ids === undefined) return;
    ids.delete(sessionId);
    if (ids.size === 0) this.byUser.delete(user);
  }

  /**
   * Holds a session that began elsewhere (another daemon of a fleet bound it) with its own start and
   * expiry, so it ends here when it ends there. Replaces any current binding; nothing when already over.
   */
  adopt(
    user: string,
    sessionId: string,
    node: UpstreamNode,
    startedAt: number,
    expiresAt: number,
    foreign = false,
  ): StickySession | undefined {
    const ttl = expiresAt - this.now();
    if (!(ttl > 0)) return undefined;
    const s: StickySession = { user, sessionId, node, startedAt, expiresAt, foreign };
    this.cache.set(key(user, sessionId), s, { ttl, noUpdateTTL: false });
    this.remember(user, sessionId);
    this.updateGauge();
    return s;
  }

  /** The session as held, expired or not, without counting anything (for callers that act on its node). */
  peek(user: string, sessionId: string): StickySession | undefined {
    return this.cache.peek(key(user, sessionId), { allowStale: true });
  }

  /** Ends a session so the next connection gets a new node. Returns whether a live session was there. */
  rotate(user: string, sessionId: string, reason: RotationReason): boolean {
    const k = key(user, sessionId);
    const s = this.cache.get(k, { allowStale: true });
    if (!s) return false;
    this.cache.delete(k);
    // A session that already ran out is counted as expired whatever the caller's reason.
    this.metrics?.sessionRotations.inc({ reason: s.expiresAt <= this.now() ? 'expired' : reason });
    this.updateGauge();
    return s.expiresAt > this.now();
  }

  /** Every live session with its node (a fleet puts them back into a Redis that lost them). */
  held(): StickySession[] {
    const now = this.now();
    const out: StickySession[] = [];
    for (const s of this.cache.values()) if (s.expiresAt > now) out.push(s);
    return out;
  }

  /** Live sessions for the admin API (expired ones are dropped without counting a rotation). */
  list(): SessionView[] {
    this.sweep();
    const out: SessionView[] = [];
    for (const s of this.cache.values())
      out.push({ user: s.user, sessionId: s.sessionId, nodeId: s.node.id, startedAt: s.startedAt, expiresAt: s.expiresAt });
    return out;
  }

  /** Drops expired entries nobody asked for again; no rotation is counted (no connection moved). */
  sweep(): number {
    const before = this.cache.size;
    this.cache.purgeStale();
    // lru-cache calls an entry stale only after its TTL has fully passed; Rotor's expiry includes the boundary.
    const now = this.now();
    const ended: string[] = [];
    for (const [k, s] of this.cache.entries()) if (s.expiresAt <= now) ended.push(k);
    for (const k of ended) this.cache.delete(k);
    const removed = before - this.cache.size;
    if (removed > 0) this.updateGauge();
    return removed;
  }

  /** Sessions held, expired-but-not-yet-swept ones included; call sweep() first for an exact count. */
  get size(): number {
    return this.cache.size;
  }

  clear(): void {
    this.cache.clear();
    this.byUser.clear();
    this.updateGauge();
  }

  private updateGauge(): void {
    this.metrics?.sessionsActive.set(this.cache.size);
  }
}
