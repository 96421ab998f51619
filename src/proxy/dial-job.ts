// One Router.dial's race spec (src/proxy/dial-race.ts calls it) and the upstream dial it runs: the dialers and
// the dial settings are data made once per Router and handed down, so the race's calls into its job run code
// that imports neither the race nor the router (docs/architecture.md "As it runs": no callback into an importer).
import type { FailureReason, NodeSource, PoolKey, UpstreamNode } from '../pool/types.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { DialTrace } from '../connlog/types.ts';
import { descriptorGuard } from './accept-guard.ts';
import type { DialSignal } from './cancel.ts';
import type { DialOptions, Tunnel } from './dial-http.ts';
import { dialHttpForward } from './upstream-dial.ts';
import type { UpstreamTlsPolicy } from './dial-tls.ts';
import type { UpstreamDialError } from './errors.ts';
import type { HandshakeTimes, HedgeDelays } from './handshake-times.ts';
import type { RuleSet } from './request-rules.ts';
import type { LocalUser, SessionStore, Target } from './types.ts';
import { dialUdpUpstream } from './udp-dial.ts';

/**
 * 'tunnel': a byte stream to the target (CONNECT, SOCKS5). 'forward': for plain-HTTP forwarding: an HTTP
 * node is only connected to (the request goes to it in absolute form), a SOCKS5 node tunnels to the target.
 */
export type DialMode = 'tunnel' | 'forward' | 'udp';

export type Dialer = (node: UpstreamNode, target: Target, options: DialOptions) => Promise<Tunnel>;

/**
 * A Dialer, or one that may answer through `options.answer` and return null (warm.ts: no promise for a request
 * on a ready connection); otherwise its promise settles the attempt.
 */
export type UpstreamDialer = (node: UpstreamNode, target: Target, options: DialOptions) => Promise<Tunnel> | null;

/** What every race of one Router shares: made once, read by each DialJob. */
export interface DialSettings {
  now: () => number;
  dialDeadlineMs: number;
  connectTimeoutMs: number;
  handshakeTimeoutMs: number;
  retries: number;
  maxHedges: number;
  hedgeDelays: HedgeDelays;
  sessions: SessionStore;
  logger: Logger | undefined;
  metrics: Metrics | undefined;
  /** The tunnel dialers (the daemon's warm connections, or tests'). */
  socks5: UpstreamDialer;
  http: UpstreamDialer;
  /** pool.tls (dial-tls.ts), for TLS nodes. */
  upstreamTls: UpstreamTlsPolicy | undefined;
  /** An upstream refused a user's account (no traffic, disabled): read that balance again (src/accounts/balances.ts). */
  onAccountRefused: ((user: LocalUser, productNo: string) => void) | undefined;
}

/** The part of a route a dial reads (Router's Route has it). */
export interface DialRoute {
  user: LocalUser;
  sessionId?: string;
  strict?: boolean;
  sessTime: number;
  poolKey: PoolKey;
  instanceNo?: string;
}

/** A race's winner: the tunnel and where it leads (dial-race.ts writes it into the dial's outcome). */
export interface RaceWon {
  tunnel: Tunnel;
  node: UpstreamNode;
  sticky: boolean;
  /** acquired from the source: release it when the connection ends */
  acquired: boolean;
  retries: number;
  hedges: number;
}

/**
 * Where a dial's race leaves its end: the winner or the error, then its resolve, which calls no code of the
 * layers waiting above it (DialPromise: their reaction runs in a tick of its own, a task boundary, not a call up).
 * One object per dial: the caller's (DialPromise, or a listener's object extending it).
 */
export interface DialOutcome {
  won: RaceWon | undefined;
  error: Error | undefined;
  /** Its reaction attaches the winner's reader in the turn that resolves it (DialAnswer.takesFlowing); absent: no. */
  readonly takesFlowing?: boolean;
  /** The dial's job, once it is made (Router.dialed() reads it). */
  job: DialJob | undefined;
  resolve(outcome: DialOutcome): void;
}

/**
 * A DialOutcome told to one reaction (whenEnded: a listener's, no promise per tunnel) or through a promise made
 * on demand (`promise`, for callers that await it), resolved with this object (never rejected). The reaction
 * runs by process.nextTick in the turn that ended the dial, as a promise's reaction would (before any I/O, so a
 * winner left flowing gets its reader before a read), without the dial's promise and its reaction's promise.
 */
export class DialPromise implements DialOutcome {
  won: RaceWon | undefined = undefined;
  error: Error | undefined = undefined;
  job: DialJob | undefined = undefined;
  private ended = false;
  private reaction: ((outcome: this) => void) | undefined = undefined;
  private made: Promise<this> | undefined = undefined;
  private settle: ((outcome: this) => void) | undefined = undefined;

  resolve(_outcome: DialOutcome): void {
    if (this.ended) return;
    this.ended = true;
    const reaction = this.reaction;
    if (reaction !== undefined) {
      this.reaction = undefined;
      process.nextTick(reaction, this);
    }
    this.settle?.(this);
  }

  /** `reaction(this)` once the dial ended, in a tick of its own (at most one reaction per dial). */
  whenEnded(reaction: (outcome: this) => void): void {
    if (this.ended) process.nextTick(reaction, this);
    else this.reaction = reaction;
  }

  /** A promise of the dial's end (made on the first read). */
  get promise(): Promise<this> {
    if (this.made === undefined) {
      if (this.ended) this.made = Promise.resolve(this);
      else this.made = new Promise<this>((resolve) => (this.settle = resolve));
    }
    return this.made;
  }
}

/** One upstream dial of a race. */
export function dialNode(
  s: DialSettings,
  node: UpstreamNode,
  target: Target,
  mode: DialMode,
  options: DialOptions,
): Promise<Tunnel> | null {
  if (mode === 'udp') return dialUdpUpstream(node, options);
  if (node.protocol === 'socks5') return s.socks5(node, target, options);
  if (mode === 'forward') return dialHttpForward(node, options);
  return s.http(node, target, options);
}

/**
 * One Router.dial's race spec with its callbacks as methods: one object per dial instead of a spec literal
 * and three closures over the dial's locals (the race calls them as methods of its spec).
 */
export class DialJob {
  readonly deadline: number;
  readonly now: () => number;
  readonly connectTimeoutMs: number;
  readonly handshakeTimeoutMs: number;
  readonly retries: number;
  readonly maxHedges: number;
  readonly hedgeDelayMs: number;
  readonly times: HandshakeTimes;
  readonly metrics: Metrics | undefined;
  readonly strictSticky: boolean;
  /** this tunnel's request rules, when it has any: the nodes that failed are kept for them */
  rules: RuleSet | undefined;
  failedNodes: UpstreamNode[] | undefined;

  constructor(
    private readonly settings: DialSettings,
    readonly route: DialRoute,
    readonly target: Target,
    readonly mode: DialMode,
    readonly source: NodeSource,
    readonly sticky: UpstreamNode | undefined,
    readonly signal: DialSignal | undefined,
    readonly trace: DialTrace | undefined,
    /** Where the race leaves its end. */
    readonly outcome: DialOutcome,
  ) {
    const s = settings;
    this.now = s.now;
    this.deadline = s.now() + s.dialDeadlineMs;
    this.connectTimeoutMs = s.connectTimeoutMs;
    this.handshakeTimeoutMs = s.handshakeTimeoutMs;
    // A strict session's exit is the only node it may use: no retry and no hedge on another node.
    this.strictSticky = route.strict === true && sticky !== undefined;
    this.retries = this.strictSticky ? 0 : s.retries;
    this.maxHedges = this.strictSticky ? 0 : s.maxHedges;
    this.times = s.hedgeDelays.for(source);
    this.hedgeDelayMs = this.times.hedgeDelayMs();
    this.metrics = s.metrics;
  }

  dial(node: UpstreamNode, options: DialOptions): Promise<Tunnel> | null {
    // A TLS node: its certificate check follows the route's product (pool.tls.insecureProducts).
    const tls = node.tls === true ? this.settings.upstreamTls?.forDial(node, this.route.poolKey.productNo) : undefined;
    return dialNode(this.settings, node, this.target, this.mode, tls ? { ...options, tls } : options);
  }

  onNodeFailed(node: UpstreamNode, reason: FailureReason, wasSticky: boolean): void {
    // Out of descriptors, a failure says nothing of the node (the embedded sandbox's proxies share them).
    if (descriptorGuard.exhausted) return;
    this.source.reportFailure(node, reason);
    if (this.rules !== undefined) (this.failedNodes ??= []).push(node);
    const route = this.route;
    const s = this.settings;
    if (wasSticky && route.sessionId !== undefined && !route.strict) s.sessions.rotate(route.user.name, route.sessionId, 'failed');
    s.logger?.debug({ conn: this.trace?.id, node: node.id, reason }, 'upstream dial failed');
  }

  onNodeAnswered(node: UpstreamNode): void {
    this.source.reportSuccess(node);
  }

  onAccountRefused(): void {
    this.settings.onAccountRefused?.(this.route.user, this.route.poolKey.productNo);
  }

  clientMessage(err: UpstreamDialError): string {
    return clientMessage(err);
  }
}

/** What the client is told about the last upstream failure: the kind, never the node's address or account. */
function clientMessage(err: UpstreamDialError): string {
  switch (err.reason) {
    case 'target_refused':
      return err.timedOut ? 'the upstream could not reach the target in time' : 'the target could not be reached through the upstream';
    case 'connect_timeout':
      return 'no upstream answered in time';
    case 'auth':
      return 'the upstream refused the connection';
    default:
      return 'the upstream failed';
  }
}
