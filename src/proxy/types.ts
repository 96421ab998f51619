// What the gateway needs from the rest of Rotor. Each seam is a small interface so the listeners can be
// tested with in-test implementations and the composition root (src/main.ts) can wire the real ones.
import type { NodeSource, PoolKey, UpstreamNode } from '../pool/types.ts';
import type { DestinationRules } from '../users/rules.ts';

/** A local proxy user from the config (interface.md, `users:`). */
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
}

/** Config-backed; a reload swaps the object (Router.setUsers) or its contents. */
export interface UserDirectory {
  get(name: string): LocalUser | undefined;
}

/** One user's byte counter as the data path sees it: an add and a flag, nothing slower. */
export interface UserMeter {
  /** Set once the user's limit is reached; running connections close on their next chunk. */
  readonly exhausted: boolean;
  add(up: number, down: number): void;
}

export type Admission = { ok: true } | { ok: false; reason: string };

/** Implemented by the accounting component; UnlimitedMeters (src/proxy/meters.ts) until then. */
export interface MeterProvider {
  /** May this user open a new connection now (limit not reached, account usable)? */
  admit(user: string): Admission;
  meter(user: string): UserMeter;
  /** Active-connection bookkeeping (GET /v1/users `activeConnections`). */
  connectionOpened(user: string): void;
  connectionClosed(user: string): void;
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

export type RotationReason = 'expired' | 'failed' | 'manual';

/** The sticky-session table (src/session/table.ts SessionTable fits it) as the gateway uses it. */
export interface SessionStore {
  /** The session bound to (user, sessionId), while it lasts. */
  get(user: string, sessionId: string): { node: UpstreamNode } | undefined;
  bind(user: string, sessionId: string, node: UpstreamNode, sessTimeMinutes: number): unknown;
  rotate(user: string, sessionId: string, reason: RotationReason): unknown;
}

/** Where a client asked to go. */
export interface Target {
  host: string;
  port: number;
}
