// Shapes shared by the pool (src/pool/), the session table (src/session/) and the gateway (src/proxy/).
import { RotorError } from '../errors/rotor-error.ts';

export type UpstreamProtocol = 'socks5' | 'http';

/** One upstream proxy Rotor can leave through. */
export interface UpstreamNode {
  /** Stable identity: protocol://username@host:port (never the password). */
  readonly id: string;
  readonly protocol: UpstreamProtocol;
  readonly host: string;
  readonly port: number;
  readonly username?: string;
  readonly password?: string;
  /** Where it came from. */
  readonly source: 'pwd' | 'api' | 'instance';
  /** The line said `https://`: dialed over TLS (src/proxy/dial-tls.ts); `protocol` is then 'http'. */
  readonly tls?: boolean;
  /** Epoch ms after which the node is not handed out (from sessTime at draw); undefined: no expiry. */
  readonly expiresAt?: number;
}

/** What the gateway asks for: which pool serves a connection. */
export interface PoolKey {
  user: string;
  productNo: string;
  /** addressCode; '' = any */
  region: string;
}

export function poolKeyId(key: PoolKey): string {
  return `${key.user}/${key.productNo}/${key.region}`;
}

/** 'stalled': accepted but did not finish its handshake within the hedge delay (a hedge won, or the client left). */
export type FailureReason = 'connect_timeout' | 'refused' | 'reset' | 'handshake' | 'auth' | 'target_refused' | 'stalled' | 'other';

export interface AcquireOptions {
  /**
   * Only a node ready now: no wait for a draw, no cooling last resort (a hedge: a parallel dial is worth a
   * ready node, not a draw, which on a product sold by IP count spends an IP).
   */
  readyOnly?: boolean;
}

/** A pool as the gateway uses it. Selection never waits on the platform while a ready node exists. */
export interface NodeSource {
  /** A ready node not in `exclude`; waits (bounded) for a draw only when nothing is ready. Rejects with PoolEmptyError. */
  acquire(exclude?: ReadonlySet<string>, options?: AcquireOptions): Promise<UpstreamNode>;
  /**
   * acquire()'s answer when it needs no wait: the node, or undefined when only a draw could give one (then
   * call acquire). Throws PoolEmptyError where acquire rejects at once. Optional: the dial race uses it so a
   * ready node is dialed in the same turn, without a promise and a microtask per dial.
   */
  acquireNow?(exclude?: ReadonlySet<string>, options?: AcquireOptions): UpstreamNode | undefined;
  /** The connection through `node` ended (least-connections bookkeeping). */
  release(node: UpstreamNode): void;
  reportFailure(node: UpstreamNode, reason: FailureReason): void;
  reportSuccess(node: UpstreamNode): void;
  /** Is this node still usable (in the pool, not cooling, not expired)? For sticky sessions. */
  isUsable(node: UpstreamNode): boolean;
}

export class PoolEmptyError extends RotorError {
  constructor(
    readonly pool: string,
    readonly reason: string,
  ) {
    super('POOL_EMPTY', `no upstream available in pool ${pool}: ${reason}`, { httpStatus: 503 });
  }
}
