// Exits banned for a user by a request rule (src/proxy/request-rules.ts): while a ban stands, the router never
// hands that exit to that user (for the banned host only, when the rule said so), and a sticky session bound
// to it moves. Bounded per user and in all; expired bans go lazily and on listing. Listed and lifted by the
// admin API (GET /v1/bans, DELETE /v1/bans/:id). In memory: a restart lifts every ban.
import type { UpstreamNode } from '../pool/types.ts';

export interface Ban {
  /** Stable while the ban stands: `b<n>`. */
  id: string;
  user: string;
  /** the upstream node's id (protocol://user@host:port, never its password) */
  node: string;
  /** the address the connection left through (the node's host) */
  exit: string;
  /** the target host the ban is limited to; null = every host */
  host: string | null;
  /** the rule that banned it */
  rule: string;
  /** epoch ms */
  createdAt: number;
  /** epoch ms the ban ends */
  until: number;
}

export interface BanTableOptions {
  now?: () => number;
  /** Bans kept per user; the one ending soonest makes room. Default 1000. */
  maxPerUser?: number;
  /** Bans kept in all; a new one past it is dropped (logged by the caller). Default 100000. */
  maxTotal?: number;
}

export class BanTable {
  private readonly byUser = new Map<string, Map<string, Ban>>();
  private readonly byId = new Map<string, Ban>();
  private readonly now: () => number;
  private readonly maxPerUser: number;
  private readonly maxTotal: number;
  private serial = 0;

  constructor(options: BanTableOptions = {}) {
    this.now = options.now ?? Date.now;
    this.maxPerUser = Math.max(1, options.maxPerUser ?? 1000);
    this.maxTotal = Math.max(1, options.maxTotal ?? 100_000);
  }

  /** Bans standing (or expired, not yet swept). */
  get size(): number {
    return this.byId.size;
  }

  /**
   * Bans `node` for `user` (for `host` only when given) for `ms`; an existing ban of the same is extended. `exit`:
   * the address the connection left from as its record names it (the node's host when none is known).
   */
  add(user: string, node: UpstreamNode, host: string | null, ms: number, rule: string, exit?: string | null): Ban | undefined {
    const now = this.now();
    const key = host === null ? node.id : `${node.id}\u0000${host}`;
    let mine = this.byUser.get(user);
    const known = mine?.get(key);
    if (known) {
      known.until = Math.max(known.until, now + ms);
      known.rule = rule;
      if (exit) known.exit = exit;
      return known;
    }
    if (mine === undefined) {
      mine = new Map();
      this.byUser.set(user, mine);
    }
    this.sweep(user, mine, now);
    if (mine.size >= this.maxPerUser) {
      let soonest: [string, Ban] | undefined;
      for (const entry of mine) if (!soonest || entry[1].until < soonest[1].until) soonest = entry;
      if (soonest) this.remove(user, soonest[0], soonest[1]);
    }
    if (this.byId.size >= this.maxTotal) {
      this.sweepAll(now);
      if (this.byId.size >= this.maxTotal) return undefined;
    }
    const ban: Ban = { id: `b${++this.serial}`, user, node: node.id, exit: exit || node.host, host, rule, createdAt: now, until: now + ms };
    // The sweep may have dropped the user's (emptied) map: put it back.
    this.byUser.set(user, mine);
    mine.set(key, ban);
    this.byId.set(ban.id, ban);
    return ban;
  }

  /**
   * The node ids banned for `user` going to `host` now; undefined when none (one Map lookup when the user
   * has no ban, nothing at all when the table is empty).
   */
  excluded(user: string, host: string): ReadonlySet<string> | undefined {
    if (this.byId.size === 0) return undefined;
    const mine = this.byUser.get(user);
    if (mine === undefined) return undefined;
    const now = this.now();
    let out: Set<string> | undefined;
    for (const [key, ban] of mine) {
      if (ban.until <= now) {
        this.remove(user, key, ban);
        continue;
      }
      if (ban.host === null || ban.host === host) (out ??= new Set()).add(ban.node);
    }
    return out;
  }

  /** Every ban in force, soonest to end first. */
  list(): Ban[] {
    this.sweepAll(this.now());
    return [...this.byId.values()].sort((a, b) => a.until - b.until || (a.id < b.id ? -1 : 1)).map((b) => ({ ...b }));
  }

  get(id: string): Ban | undefined {
    const ban = this.byId.get(id);
    return ban && ban.until > this.now() ? { ...ban } : undefined;
  }

  /** Lifts a ban; false when there is none by that id (or it already ended). */
  lift(id: string): boolean {
    const ban = this.byId.get(id);
    if (!ban) return false;
    const standing = ban.until > this.now();
    const mine = this.byUser.get(ban.user);
    if (mine) for (const [key, b] of mine) if (b === ban) this.remove(ban.user, key, ban);
    return standing;
  }

  private remove(user: string, key: string, ban: Ban): void {
    const mine = this.byUser.get(user);
    mine?.delete(key);
    if (mine && mine.size === 0) this.byUser.delete(user);
    this.byId.delete(ban.id);
  }

  private sweep(user: string, mine: Map<string, Ban>, now: number): void {
    for (const [key, ban] of mine) if (ban.until <= now) this.remove(user, key, ban);
  }

  private sweepAll(now: number): void {
    for (const [user, mine] of [...this.byUser]) this.sweep(user, mine, now);
  }
}
