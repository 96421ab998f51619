// What the gateway needs from the rest of Rotor. Each seam is a small interface so the listeners can be
// tested with in-test implementations and the composition root (src/main.ts) can wire the real ones.
import type { NodeSource, PoolKey, UpstreamNode } from '../pool/types.ts';
import type { DestinationRules } from './destination-rules.ts';
import type { Admission, UserMeter } from '../accounting/accounting.ts';
import type { RotationReason } from '../session/table.ts';
import type { RelayAttachment, RelayLimiter } from '../admission/limiter.ts';
import type { RequestRule } from './request-rules.ts';

/** A local proxy user from the config (docs/reference.md, `users:`). */
export interface LocalUser {
  name: string;
  password: string;
  /** platform main account (appUsername) that holds the traffic */
  mainAccount: string;
  /** productNo drawn from by default */
  product: string;
  draw: 'pwd' | 'api';
  /** minutes a sticky session keeps its upstream */
  sessTime: number;
  /** bytes, both directions; -1 = unlimited */
  limitBytes: number;
  /** destination rules on top of proxy.rules (src/users/rules.ts DestinationRules) */
  rules?: DestinationRules | null | undefined;
  /** RFC 3339 or null: when the user expires (the user directory sets it; src/events/ announces it) */
  expiresAt?: string | null | undefined;
  /** a dedicated port served by src/users/ports.ts UserPorts */
  listen?: { port: number; allowIps: readonly string[] } | null | undefined;
  /** Price per GB for usage amounts (GET /v1/usage); null/absent = billing.defaultPricePerGb. */
  pricePerGb?: number | null | undefined;
  /** Request rules of this user, before proxy.requestRules (src/proxy/request-rules.ts). */
  requestRules?: readonly RequestRule[] | null | undefined;
  /** Static instances this user may name with `-instance-`; null/absent = every running instance of the merchant. */
  instances?: readonly string[] | null | undefined;
  /** Products this user may name with `-product-` besides `product` (always allowed); null/absent = every one. */
  products?: readonly string[] | null | undefined;
  /**
   * `instances` and `products` as sets, made once per record change by the users directory: they are asked on
   * every `-instance-` / `-product-` connection (a list of up to 1,000 was scanned). Absent (an in-memory
   * directory: tests, tools): the router makes them from the lists, once per user object.
   */
  rights?: UserRights | undefined;
}

/** A user's `instances` and `products` as sets (null: every one). */
export interface UserRights {
  readonly instances: ReadonlySet<string> | null;
  readonly products: ReadonlySet<string> | null;
}

/** Config-backed; a reload swaps the object (Router.setUsers) or its contents. */
export interface UserDirectory {
  get(name: string): LocalUser | undefined;
  /**
   * Optional: checks a password against the user's stored (hashed) one, off the event loop when it must hash
   * (src/users/directory.ts); `undefined` (an unknown name) costs the same work and answers false. Without it
   * the router compares with `password` as plain text (tests, tools).
   */
  verify?(user: LocalUser | undefined, password: string): boolean | Promise<boolean>;
}

// A user's meter and an admission answer are accounting's (defined there, below the gateway).
export type { Admission, UserMeter };

// A user's live limits as a relay consults them are admission's (defined there, below the gateway).
export type { RelayAttachment, RelayLimiter };

/** Implemented by the accounting component; test/support/meters.ts UnlimitedMeters in tests. */
export interface MeterProvider {
  /** May this user open a new connection now (limit not reached, account usable)? */
  admit(user: string): Admission;
  meter(user: string): UserMeter;
  /** Active-connection bookkeeping (GET /v1/users `activeConnections`). */
  connectionOpened(user: string): void;
  connectionClosed(user: string): void;
  /** Optional: the user's live limits for its relays (rate, stop on disable/delete); src/admission/users.ts. */
  limiter?(user: string): RelayLimiter | undefined;
}

/** Static instances Rotor knows about, as upstreams for `-instance-<instanceNo>`. */
export interface InstanceDirectory {
  get(instanceNo: string): UpstreamNode | undefined;
  allowed(user: string, instanceNo: string): boolean;
  /**
   * Optional: the instance as a NodeSource (src/pool/static.ts StaticPool) so its failures and connections
   * are recorded. Without it the gateway dials get(instanceNo) directly.
   */
  source?(instanceNo: string): NodeSource | undefined;
}

/** The registry of pools (src/pool/): the NodeSource serving one PoolKey, created on first use. */
export interface PoolProvider {
  pool(key: PoolKey): NodeSource;
}

// Why a session moved to another node: the session table's reasons (src/session/table.ts).
export type { RotationReason };

/** The sticky-session table (src/session/table.ts SessionTable fits it) as the gateway uses it. */
export interface SessionStore {
  /**
   * The session bound to (user, sessionId), while it lasts. `foreign`: its node was drawn by another daemon
   * of a fleet (not in this daemon's pools), usable while the node's own expiry lasts.
   */
  get(user: string, sessionId: string): { node: UpstreamNode; foreign?: boolean } | undefined;
  bind(user: string, sessionId: string, node: UpstreamNode, sessTimeMinutes: number): unknown;
  rotate(user: string, sessionId: string, reason: RotationReason): unknown;
  /** Optional: whether the user may use this session id now (its per-user bound); absent = always. */
  admits?(user: string, sessionId: string): boolean;
  /**
   * Optional: settles a sticky session before its dial (a fleet's shared binding, src/fleet/gateway.ts); never
   * rejects. Awaited only for a sticky route off the pools (not an instance's); absent = nothing to settle.
   */
  prepare?(user: string, sessionId: string, sessTimeMinutes: number, poolKey: PoolKey): Promise<void>;
}

/** Where a client asked to go. */
export interface Target {
  host: string;
  port: number;
}
