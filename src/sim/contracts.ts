// The seam between the simulator's platform side (state, operations, orders: src/sim/platform/) and its
// upstream proxies (src/sim/upstreams/). The platform side decides who may relay and charges the bytes;
// the upstreams only move bytes and ask.

/** A running allowance: bytes relayed are added as they pass. */
export interface Meter {
  /** Adds relayed bytes; returns false once the allowance is exhausted (the relay then closes). */
  add(bytes: number): boolean;
}

/**
 * Why an authority said no, so an HTTP upstream can answer 407 ('credentials') or 403 with the reason
 * ('forbidden': balance, disabled, not whitelisted). SOCKS5 cannot tell them apart: a refusal at RFC 1929 time is
 * a failed auth status, a refusal on a whitelist port is reply 'not allowed'. When absent, password-checked ports
 * treat it as 'credentials', whitelist ports as 'forbidden'.
 */
export type Refusal = 'credentials' | 'forbidden';

export type Grant = { ok: true; meter: Meter } | { ok: false; reason: string; refusal?: Refusal };

/** What a DrawByPwd credential carries; encoded into the drawn user name by the upstreams module. */
export interface DrawnCredential {
  /** sub account (appUsername) the traffic is charged to */
  account: string;
  productNo: string;
  /** sticky session key chosen at draw time */
  sessionId: string;
  /** minutes the session keeps its exit; 0 or -1: a new exit on every connection */
  sessTime: number;
  /** addressCode asked at draw time, if any */
  addressCode?: string;
}

export interface UpstreamAuthority {
  /** Password gateway: a credential from DrawByPwd and its password. */
  authorizePassword(credential: DrawnCredential, password: string): Grant;
  /** Whitelist port from a DrawByApi link: the connecting address must be on the account's whitelist. */
  authorizeWhitelist(account: string, productNo: string, clientIp: string): Grant;
  /** Static instance endpoint: the instance's current credentials (they change on change-proxy and reset). */
  authorizeInstance(instanceNo: string, username: string, password: string): Grant;
}

export type FaultMode = 'refuse' | 'stall' | 'reset';
export interface Fault {
  mode: FaultMode;
  /** for 'reset': bytes relayed before the connection is reset (default 0) */
  afterBytes?: number;
}

/** The upstreams as the platform side sees them. */
export interface Upstreams {
  host: string;
  /** Password-gateway ports; each speaks SOCKS5 and HTTP CONNECT on the same port (first byte decides). */
  readonly gatewayPorts: readonly number[];
  /** Encodes a drawn credential into a gateway user name (inverse of what the gateway parses). */
  encodeUsername(credential: DrawnCredential): string;
  /** A port that admits whitelisted clients for (account, productNo), opened on first use and kept. */
  whitelistPort(account: string, productNo: string): Promise<number>;
  /**
   * A port for one static instance, opened on first use; closed by closeInstance (on release). `preferred`:
   * the port it had before a restart, taken again when it is free (a real platform keeps an instance's address).
   */
  instancePort(instanceNo: string, preferred?: number): Promise<number>;
  closeInstance(instanceNo: string): Promise<void>;
  /** Fault knobs by port (any kind of upstream port), or every upstream port with '*'. */
  setFault(port: number | '*', fault: Fault | null): void;
  /** UDP ASSOCIATE on every SOCKS5 upstream port open now (default on); off: answered 0x07. */
  setUdp(enabled: boolean): void;
  /** Loopback source addresses the exits bind to (127.0.0.x), so a target can tell which exit carried it. */
  readonly exitAddresses: readonly string[];
  close(): Promise<void>;
}
