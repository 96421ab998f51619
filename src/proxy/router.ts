// The orchestration between a listener and the upstreams: who is this client and where may it go
// (authorize), and how to get a tunnel to its target (dial): sticky session or pool, dial with deadlines,
// on a failure before any byte reached the client mark the node, rotate the session and try another node.
import { InternalError } from '../errors/rotor-error.ts';
import { PoolChurnError } from '../pool/registry.ts';
import { StaticPool } from '../pool/static.ts';
import { PoolEmptyError, type FailureReason, type NodeSource, type PoolKey, type UpstreamNode } from '../pool/types.ts';
import { HedgeDelays } from './handshake-times.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { DialSignal } from './cancel.ts';
import type { DialTrace } from '../connlog/types.ts';
import type { Tunnel } from './dial-http.ts';
import { dialHttpConnect, dialSocks5 } from './upstream-dial.ts';
import type { UpstreamTlsPolicy } from './dial-tls.ts';
import { startRace } from './dial-race.ts';
import { DialJob, DialPromise, type DialMode, type DialOutcome, type DialSettings, type RaceWon, type UpstreamDialer } from './dial-job.ts';
import { descriptorGuard } from './accept-guard.ts';
import { GatewayError } from './errors.ts';
import { checkTarget } from './target.ts';
import type {
  InstanceDirectory,
  LocalUser,
  MeterProvider,
  PoolProvider,
  SessionStore,
  Target,
  UserDirectory,
  UserRights,
} from './types.ts';
import type { UsernameOptions } from './username.ts';
import { AUTH_FAILED, Authenticator, type Authenticated } from './auth-check.ts';
import { AUTH_DEFAULTS, sourceKey, type AuthGuard, type AuthSettings } from './auth-guard.ts';
import type { BanTable } from './request-bans.ts';
import { watchTunnelFirstByte } from './request-rules-tunnel.ts';
import { ExcludingSource, TraceFrom, type RequestRules, type RuleSet, type CompiledRule } from './request-rules.ts';
import type { DestinationPolicy } from './destination-rules.ts';

export interface Route {
  user: LocalUser;
  /** sticky session id; absent = rotating */
  sessionId?: string;
  /** a strict sticky session (`-strict-1`): fails with STRICT_SESSION_FAILED rather than move */
  strict?: boolean;
  /** minutes */
  sessTime: number;
  poolKey: PoolKey;
  instanceNo?: string;
}

export type RefusalKind = 'auth' | 'forbidden' | 'bad_request';
export interface Refusal {
  kind: RefusalKind;
  /** one line, safe to show the client */
  reason: string;
  /** The authenticated user a 'forbidden' refusal is about (for the connection record). */
  user?: string;
  /** What a 'forbidden' refusal counts as (rotor_proxy_connections_total result); default 'limited'. */
  result?: 'limited' | 'not_allowed';
}

export type Authorization = { ok: true; route: Route } | ({ ok: false } & Refusal);

export type { DialMode, Dialer } from './dial-job.ts';

export interface Dialed extends Tunnel {
  node: UpstreamNode;
  /** true when `socket` is a connection to an HTTP proxy node (mode 'forward'), not a tunnel to the target */
  viaProxy: boolean;
  /** Further nodes dialed because one failed (for the connection record). */
  retries: number;
  /** Nodes dialed in parallel because one was slow to answer (for the connection record). */
  hedges: number;
  /**
   * Call once when the client connection ends: hands the node back to its pool. Idempotent. `failure`: the
   * upstream died before sending a byte (a node that answers CONNECT and then resets), told to the pool so
   * the node cools like one that failed its dial instead of taking its share of every later connection.
   */
  release(failure?: FailureReason): void;
}

export interface RouterOptions {
  users: UserDirectory;
  meters: MeterProvider;
  pools: PoolProvider;
  sessions: SessionStore;
  instances?: InstanceDirectory;
  metrics?: Metrics;
  logger?: Logger;
  /** Further nodes tried after the first fails (config proxy.retries). Default 3. */
  retries?: number;
  /** TCP connect to one upstream. Default 5000 ms. */
  connectTimeoutMs?: number;
  /** The upstream's answer to the tunnel request (config proxy.upstreamHandshakeTimeoutMs). Default 10000 ms. */
  handshakeTimeoutMs?: number;
  /** A node not through its handshake after this many ms gets a parallel dial to the next node; 0 = adaptive (src/health/handshake-times.ts). Default 0. */
  hedgeAfterMs?: number;
  /** Parallel dials per client connection. Default 2. */
  maxHedges?: number;
  /** Everything: pool waits and all attempts. Default 30000 ms. */
  dialDeadlineMs?: number;
  /** Override the dialers (tests). */
  dialers?: { socks5?: UpstreamDialer; http?: UpstreamDialer };
  now?: () => number;
  /** Destination rules (src/users/rules.ts), checked before anything is dialed; none = every target. */
  destinations?: DestinationPolicy;
  /**
   * Whether a `-region-` code is in the platform's dictionaries (src/orders/regions.ts); undefined = not
   * known yet (let through). An unknown code is refused (403) before any pool or draw exists for it. A string
   * is the dictionary's spelling of a known code: the pool is keyed, and the draw made, by it (one pool per code).
   */
  regionKnown?: (code: string) => boolean | string | undefined;
  /**
   * Whether a `-product-` productNo is in the merchant's catalogue (src/proxy/product-names.ts); undefined = no
   * listing loaded yet. A product other than the user's own that is not known is refused (403) before any pool
   * or platform call. Absent (tests, tools): every product is let through.
   */
  productKnown?: (productNo: string) => boolean | undefined;
  /** Request rules (src/proxy/request-rules.ts): proxy.requestRules and each user's; none = no cost. */
  requestRules?: RequestRules;
  /** Exits banned per user by request rules (src/proxy/request-bans.ts). */
  bans?: BanTable;
  /** How nodes whose line says https:// are checked (pool.tls); absent = verified with the system's CAs. */
  upstreamTls?: UpstreamTlsPolicy;
  /** An upstream refused a user's account (no traffic, disabled): read that balance again (src/accounts/balances.ts). */
  onAccountRefused?: (user: LocalUser, productNo: string) => void;
  /** The login's cache and back-off (config proxy.auth); absent: defaults with failures answered at once. */
  auth?: AuthSettings;
}

export { AUTH_FAILED };

export class Router {
  private users: UserDirectory;
  // The login (src/proxy/auth-check.ts): verified pairs answer at once, anything else is checked off the
  // event loop with back-off. Limits and instance rights are checked on every call (admit).
  private readonly auth: Authenticator;
  private readonly retries: number;
  private readonly connectTimeoutMs: number;
  private readonly handshakeTimeoutMs: number;
  /** Nodes whose last tunnel failed before carrying a byte (see Dialed.release). */
  private readonly suspect = new WeakSet<UpstreamNode>();
  private readonly dialDeadlineMs: number;
  private readonly hedgeDelays: HedgeDelays;
  private readonly maxHedges: number;
  private readonly statics = new Map<string, StaticPool>();
  private lastTarget: Target | undefined;
  private readonly now: () => number;
  private readonly settings: DialSettings;

  constructor(private readonly options: RouterOptions) {
    this.users = options.users;
    this.retries = Math.max(0, options.retries ?? 3);
    this.connectTimeoutMs = options.connectTimeoutMs ?? 5000;
    this.handshakeTimeoutMs = options.handshakeTimeoutMs ?? 10_000;
    this.dialDeadlineMs = options.dialDeadlineMs ?? 30_000;
    this.hedgeDelays = new HedgeDelays({ fixedMs: options.hedgeAfterMs ?? 0 });
    this.maxHedges = Math.max(0, options.maxHedges ?? 2);
    this.now = options.now ?? Date.now;
    // Without settings (tests, tools) failures are answered at once; the daemon passes proxy.auth.
    this.auth = new Authenticator(options.auth ?? { ...AUTH_DEFAULTS, failureDelayMs: 0 }, {
      metrics: options.metrics,
      logger: options.logger,
      now: this.now,
    });
    this.settings = {
      now: this.now,
      dialDeadlineMs: this.dialDeadlineMs,
      connectTimeoutMs: this.connectTimeoutMs,
      handshakeTimeoutMs: this.handshakeTimeoutMs,
      retries: this.retries,
      maxHedges: this.maxHedges,
      hedgeDelays: this.hedgeDelays,
      sessions: options.sessions,
      logger: options.logger,
      metrics: options.metrics,
      socks5: options.dialers?.socks5 ?? dialSocks5,
      http: options.dialers?.http ?? dialHttpConnect,
      upstreamTls: options.upstreamTls,
      onAccountRefused: options.onAccountRefused,
    };
  }

  get meters(): MeterProvider {
    return this.options.meters;
  }

  /** Config reload: later authorizations see the new users; running connections keep their route. */
  setUsers(users: UserDirectory): void {
    this.users = users;
    this.auth.clear();
  }

  /**
   * Who the client is and what it may do: synchronous for a pair verified before, else a Promise (the
   * password checked on the thread pool, a failure answered late). `source` is the client's address
   * (back-off per address).
   */
  authenticate(username: string, password: string, source?: string): Authorization | Promise<Authorization> {
    const a = this.auth.check(this.users, username, password, sourceKey(source));
    return a instanceof Promise ? a.then((x) => this.afterCheck(x)) : this.afterCheck(a);
  }

  /** authenticate() for directories that answer at once (plain-text users: tests and tools). */
  authorize(username: string, password: string, source?: string): Authorization {
    const a = this.authenticate(username, password, source);
    if (a instanceof Promise)
      throw new InternalError('Router.authorize: this directory checks passwords asynchronously; use authenticate()');
    return a;
  }

  /** The back-off's state (tests, the bench). */
  get authGuard(): AuthGuard {
    return this.auth.guard;
  }

  private afterCheck(a: Authenticated): Authorization {
    if (!a.ok) return { ok: false, kind: 'auth', reason: a.reason };
    return this.admit(a.user, a.options);
  }

  /**
   * A client admitted as `name` without credentials (a user's own port, its address in `listen.allowIps`:
   * src/users/ports.ts): the same admission as after a password matched, with the user's defaults.
   */
  authorizeUser(name: string, options: UsernameOptions = {}): Authorization {
    const user = this.users.get(name);
    if (!user) return { ok: false, kind: 'auth', reason: 'unknown user' };
    return this.admit(user, options);
  }

  /** What follows a known user: instance rights, limits, the route. */
  private admit(user: LocalUser, o: UsernameOptions): Authorization {
    if (o.instance !== undefined) {
      const instances = this.options.instances;
      if (!instances || !instances.get(o.instance))
        return { ok: false, kind: 'forbidden', reason: `unknown instance '${o.instance}'`, user: user.name, result: 'not_allowed' };
      if (!instances.allowed(user.name, o.instance))
        return {
          ok: false,
          kind: 'forbidden',
          reason: `user may not use instance '${o.instance}'`,
          user: user.name,
          result: 'not_allowed',
        };
    }
    let region = o.region;
    if (region !== undefined) {
      const known = this.options.regionKnown?.(region);
      if (known === false) return { ok: false, kind: 'forbidden', reason: `unknown region '${region}'` };
      if (typeof known === 'string') region = known;
    }
    // A product other than the user's default must be one of its `products` (a set: no scan per connection),
    // then one the catalogue already loaded knows: a forged or unsold name costs nothing, no platform call.
    if (o.product !== undefined && o.product !== user.product) {
      const products = rightsOf(user).products;
      if (products !== null && !products.has(o.product))
        return {
          ok: false,
          kind: 'forbidden',
          reason: `user may not use product '${shown(o.product)}'`,
          user: user.name,
          result: 'not_allowed',
        };
    }
    if (o.product !== undefined && o.product !== user.product && this.options.productKnown !== undefined) {
      const known = this.options.productKnown(o.product);
      if (known !== true)
        return {
          ok: false,
          kind: 'forbidden',
          reason:
            known === false
              ? `unknown product '${shown(o.product)}'`
              : `product '${shown(o.product)}' not known yet (the product list is loading); try again shortly`,
          user: user.name,
          result: 'not_allowed',
        };
    }
    // A new sticky session past the user's bound (proxy.maxSessionsPerUser) is refused before it takes a slot.
    if (o.sessionId !== undefined && this.options.sessions.admits?.(user.name, o.sessionId) === false) {
      return {
        ok: false,
        kind: 'forbidden',
        reason: `user ${user.name} holds too many sticky sessions (proxy.maxSessionsPerUser); a new session id is refused until older ones end`,
        user: user.name,
        result: 'limited',
      };
    }
    const admission = this.options.meters.admit(user.name);
    if (!admission.ok) return { ok: false, kind: 'forbidden', reason: admission.reason, user: user.name, result: 'limited' };

    const route: Route = {
      user,
      sessTime: o.sessTime ?? user.sessTime,
      poolKey: { user: user.name, productNo: o.product ?? user.product, region: region ?? '' },
    };
    if (o.sessionId !== undefined) route.sessionId = o.sessionId;
    if (o.strict) route.strict = true;
    if (o.instance !== undefined) route.instanceNo = o.instance;
    return { ok: true, route };
  }

  /**
   * A tunnel to `target` for `route`. Rejects with GatewayError (NO_UPSTREAM, UPSTREAM_TIMEOUT,
   * UPSTREAM_FAILED, LIMITED, DIAL_ABORTED). The caller must call `release()` when the connection ends.
   */
  async dial(route: Route, requested: Target, signal?: DialSignal, mode: DialMode = 'tunnel', trace?: DialTrace): Promise<Dialed> {
    const outcome = new DialPromise();
    this.startDial(route, requested, signal, mode, trace, outcome);
    return this.dialed(await outcome.promise);
  }

  /**
   * dial() in two halves, for a caller that keeps one object per dial and pays one promise: the checks, the pick
   * and the race's start run now (a refusal throws GatewayError here); the race's end is left in `outcome`
   * and told by its resolve (a ready node on a ready warm connection: when the upstream answers the request).
   * Then dialed(outcome) gives the tunnel or throws the failure.
   */
  startDial(
    route: Route,
    requested: Target,
    signal: DialSignal | undefined,
    mode: DialMode,
    trace: DialTrace | undefined,
    outcome: DialOutcome,
  ): void {
    // Before any pool is asked: a malformed target is the client's fault and must never be charged to a node.
    // 'udp' (udp-associate.ts): `requested` is the client's own UDP address; each datagram's target is checked.
    const target = mode === 'udp' ? requested : checkTarget(requested);
    if (this.options.meters.meter(route.user.name).exhausted) throw new GatewayError('LIMITED', 'traffic limit reached');
    if (mode !== 'udp') this.checkDestination(route, target);
    const sessions = this.options.sessions;
    // A sticky route in a fleet: its shared binding is settled first (a rotating route waits for nothing here).
    if (route.sessionId !== undefined && route.instanceNo === undefined && sessions.prepare !== undefined) {
      sessions.prepare(route.user.name, route.sessionId, route.sessTime, route.poolKey).then(
        () => {
          try {
            this.race(route, target, signal, mode, trace, outcome);
          } catch (err) {
            failOutcome(outcome, err);
          }
        },
        (err: unknown) => failOutcome(outcome, err),
      );
      return;
    }
    this.race(route, target, signal, mode, trace, outcome);
  }

  /** The source, the sticky node and the rules of a checked dial, and its race started. */
  private race(
    route: Route,
    target: Target,
    signal: DialSignal | undefined,
    mode: DialMode,
    trace: DialTrace | undefined,
    outcome: DialOutcome,
  ): void {
    const sessions = this.options.sessions;
    let source: NodeSource;
    try {
      source = this.sourceFor(route);
    } catch (err) {
      // The registry refuses a new pool past the user's replacements (pool.replacePerMinute): the client's doing.
      if (err instanceof PoolChurnError) throw new GatewayError('LIMITED', err.message);
      // The registry refuses a new pool when all of the user's pools are busy (pool.maxPerUser).
      if (err instanceof PoolEmptyError)
        throw new GatewayError('NO_UPSTREAM', 'no upstream available: too many regions or products in use');
      throw err;
    }
    const user = route.user.name;
    // Exits a request rule banned for this user (and host): never handed out while the ban stands.
    const banned = this.options.bans?.excluded(user, target.host);
    if (banned !== undefined) source = new ExcludingSource(source, banned);
    let sticky: UpstreamNode | undefined;
    if (route.sessionId !== undefined) {
      const found = sessions.get(user, route.sessionId);
      const bound = found?.node;
      if (bound && banned?.has(bound.id)) {
        if (route.strict) throw strictFailure();
        sessions.rotate(user, route.sessionId, 'failed');
      } else if (bound && (source.isUsable(bound) || (found!.foreign === true && stillValid(bound, this.now())))) sticky = bound;
      else if (bound) {
        const expired = bound.expiresAt !== undefined && bound.expiresAt <= this.now();
        // A strict session keeps its binding and fails while its exit is out of service (not when it expired).
        if (route.strict && !expired) throw strictFailure();
        sessions.rotate(user, route.sessionId, expired ? 'expired' : 'failed');
      }
    }
    // The race counts this dial's retries and hedges; a record that already has some (a rule's retry) adds.
    const job = new DialJob(
      this.settings,
      route,
      target,
      mode,
      source,
      sticky,
      signal,
      trace && (trace.retries > 0 || trace.hedges > 0) ? new TraceFrom(trace) : trace,
      outcome,
    );
    // A tunnel's rules see its dial's outcome; a plain-HTTP request's are the forwarder's (http-forward.ts).
    const rules = mode === 'tunnel' ? this.options.requestRules?.forRequest(route.user, target.host) : undefined;
    if (rules !== undefined) job.rules = rules;
    outcome.job = job;
    startRace(job);
  }

  /**
   * The second half of a dial (startDial): the race's winner as the caller's tunnel (the node's success told, a
   * sticky session bound), or its failure thrown (a strict session's own exit failing as STRICT_SESSION_FAILED).
   */
  dialed(outcome: DialOutcome): Dialed {
    const job = outcome.job;
    const won = outcome.won;
    if (won === undefined || job === undefined) {
      const err = outcome.error ?? new InternalError('Router.dialed: the dial has not ended');
      if (job !== undefined) this.raceFailed(job, err);
      throw err;
    }
    const { route, target, mode, source } = job;
    const sessions = this.options.sessions;
    const node = won.node;
    if (mode !== 'udp') this.lastTarget = target;
    // A node whose last tunnel died before its first byte is told "success" only once a tunnel through it
    // ends well (release): otherwise each CONNECT it answers would wipe its failures and it never cools.
    if (!this.suspect.has(node)) source.reportSuccess(node);
    if (route.sessionId !== undefined && !won.sticky) sessions.bind(route.user.name, route.sessionId, node, route.sessTime);
    if (job.rules !== undefined) this.watchFirstByte(route, target, job.rules, won, job.trace);
    return new DialedTunnel(
      won,
      mode === 'forward' && node.protocol === 'http',
      source,
      route,
      sessions,
      this.suspect,
      this.options.metrics,
    );
  }

  /** A race that failed: its request rules see it; a strict session's own exit failing throws STRICT_SESSION_FAILED. */
  private raceFailed(job: DialJob, err: Error): void {
    const route = job.route;
    const rules = job.rules;
    if (rules !== undefined && err instanceof GatewayError && job.failedNodes !== undefined)
      this.dialFailureRules(route, job.target, rules, err, job.failedNodes, job.trace);
    // The strict session's own exit failed (not the target): the connection fails, the session stays put.
    if (
      job.strictSticky &&
      err instanceof GatewayError &&
      (err.code === 'UPSTREAM_FAILED' || err.code === 'UPSTREAM_TIMEOUT') &&
      err.upstreamReason !== 'target_refused'
    ) {
      throw strictFailure(err.upstreamReason);
    }
  }

  /** The rules a plain-HTTP request to `host` is held to (http-forward.ts); undefined = none (no cost). */
  rulesFor(route: Route, host: string): RuleSet | undefined {
    return this.options.requestRules?.forRequest(route.user, host);
  }

  /**
   * A request rule fired on an exchange through `node`: the record is tagged; a ban action bans the exit for
   * the user (for `host` only when the rule says so); a ban or retry moves a soft sticky session bound to it.
   */
  ruleFired(route: Route, node: UpstreamNode, rule: CompiledRule, host: string, trace: DialTrace | undefined): void {
    if (trace) trace.rule = rule.name;
    const user = route.user.name;
    if (rule.banMs > 0) {
      // The exit the connection's record names (a ConnectionContext's; a bare DialTrace has none: the node's host).
      const exit = (trace as { exit?: string | null } | undefined)?.exit;
      const ban = this.options.bans?.add(user, node, rule.banHost ? host : null, rule.banMs, rule.name, exit);
      if (ban === undefined) this.options.logger?.warn({ user, rule: rule.name }, 'ban table full: exit not banned');
    }
    if (
      rule.action !== 'tag' &&
      route.sessionId !== undefined &&
      !route.strict &&
      this.options.sessions.get(user, route.sessionId)?.node.id === node.id
    ) {
      this.options.sessions.rotate(user, route.sessionId, 'failed');
    }
  }

  /** A tunnel's dial failed: the first rule a 502 (504 when it timed out) fires bans the nodes that failed. */
  private dialFailureRules(
    route: Route,
    target: Target,
    rules: RuleSet,
    err: GatewayError,
    failed: readonly UpstreamNode[],
    trace: DialTrace | undefined,
  ): void {
    if (err.code !== 'UPSTREAM_FAILED' && err.code !== 'UPSTREAM_TIMEOUT') return;
    const rule = rules.onDialFailure(err.code === 'UPSTREAM_TIMEOUT');
    if (rule === undefined) return;
    for (const node of failed) this.ruleFired(route, node, rule, target.host, trace);
  }

  /** A tunnel's time to first byte: the shortest timeoutMs of its rules (request-rules-tunnel.ts) bans or tags. */
  private watchFirstByte(route: Route, target: Target, rules: RuleSet, won: RaceWon, trace: DialTrace | undefined): void {
    const rule = rules.firstByteRule();
    if (rule === undefined || won.tunnel.head !== null) return;
    watchTunnelFirstByte(won.tunnel.socket, rule.timeoutMs!, () => this.ruleFired(route, won.node, rule, target.host, trace));
  }

  /**
   * The id of the node a sticky route is bound to now, if any. Plain-HTTP forwarding keys its idle upstream
   * connections by it, so a rotated or expired session never reuses a connection to its old node.
   */
  boundNodeId(route: Route): string | undefined {
    return route.sessionId === undefined ? undefined : this.options.sessions.get(route.user.name, route.sessionId)?.node.id;
  }

  /** The destination rules' refusal of `target` for `route` (a UDP datagram's target), undefined = allowed. */
  destinationRefusal(route: Route, target: Target): string | undefined {
    return this.options.destinations?.check(route.user, target);
  }

  /** Destination rules, before any pool is asked for a node: a refused target costs no draw and no dial. */
  private checkDestination(route: Route, target: Target): void {
    const refusal = this.options.destinations?.check(route.user, target);
    if (refusal !== undefined) throw new GatewayError('NOT_ALLOWED', refusal);
  }

  private sourceFor(route: Route): NodeSource {
    if (route.instanceNo === undefined) return this.options.pools.pool(route.poolKey);
    const instances = this.options.instances;
    const source = instances?.source?.(route.instanceNo);
    if (source) return source;
    const node = instances?.get(route.instanceNo);
    if (!node) throw new GatewayError('NO_UPSTREAM', `unknown instance '${route.instanceNo}'`);
    // The instance's own StaticPool, kept so its failures are recorded like any pool's (and follow a
    // change of address or credentials).
    let pool = this.statics.get(route.instanceNo);
    if (!pool) {
      pool = new StaticPool(`instance/${route.instanceNo}`, node, this.now);
      this.statics.set(route.instanceNo, pool);
    } else if (pool.current !== node) pool.setNode(node);
    return pool;
  }

  /** The last target a tunnel reached: health probes without a URL dial it (src/health/probe.ts). */
  recentTarget(): Target | undefined {
    return this.lastTarget;
  }

  /** The static instances dialed so far, with their failures (admin view). */
  staticPools(): StaticPool[] {
    return [...this.statics.values()];
  }
}

/** What Router.dial hands a listener: the tunnel, where it leads, and its release (one object, no closures). */
class DialedTunnel implements Dialed {
  readonly socket: Tunnel['socket'];
  readonly head: Buffer | null;
  readonly exit: string | undefined;
  readonly node: UpstreamNode;
  readonly retries: number;
  readonly hedges: number;
  private released = false;

  constructor(
    private readonly won: RaceWon,
    readonly viaProxy: boolean,
    private readonly source: NodeSource,
    private readonly route: Route,
    private readonly sessions: SessionStore,
    private readonly suspect: WeakSet<UpstreamNode>,
    private readonly metrics: Metrics | undefined,
  ) {
    this.socket = won.tunnel.socket;
    this.head = won.tunnel.head;
    this.exit = won.tunnel.exit;
    this.node = won.node;
    this.retries = won.retries;
    this.hedges = won.hedges;
  }

  release(failure?: FailureReason): void {
    if (this.released) return;
    this.released = true;
    const { node, source, route } = this;
    if (failure && descriptorGuard.exhausted) {
      // Out of descriptors: not the node's failure (as in onNodeFailed).
    } else if (failure) {
      this.suspect.add(node);
      this.metrics?.upstreamFailures.inc({ reason: failure });
      source.reportFailure(node, failure);
      if (route.sessionId !== undefined && !route.strict && this.sessions.get(route.user.name, route.sessionId)?.node === node) {
        this.sessions.rotate(route.user.name, route.sessionId, 'failed');
      }
    } else if (this.suspect.delete(node)) {
      source.reportSuccess(node);
    }
    // Sticky hits were not acquired, so they are not released either.
    if (this.won.acquired) source.release(node);
  }
}

/** A dial that failed before its race could settle it (a fleet's prepare, a check after it). */
function failOutcome(outcome: DialOutcome, err: unknown): void {
  outcome.error = err instanceof Error ? err : new InternalError(String(err));
  outcome.resolve(outcome);
}

/** A client's value in a one-line reason: at most 40 characters. */
/** Rights made from the lists of a user object that came without them (an in-memory directory), once per object. */
const madeRights = new WeakMap<LocalUser, UserRights>();
const setOf = (list: readonly string[] | null | undefined): ReadonlySet<string> | null => (list == null ? null : new Set(list));

/** The user's `instances` and `products` as sets: the directory's (made per record change), else made once here. */
function rightsOf(user: LocalUser): UserRights {
  if (user.rights !== undefined) return user.rights;
  let made = madeRights.get(user);
  if (made === undefined) {
    made = { instances: setOf(user.instances), products: setOf(user.products) };
    madeRights.set(user, made);
  }
  return made;
}

function shown(value: string): string {
  return value.length > 40 ? `${value.slice(0, 40)}...` : value;
}

/** A node another daemon of a fleet drew (not in this daemon's pools) serves its session while it lasts. */
function stillValid(node: UpstreamNode, now: number): boolean {
  return node.expiresAt === undefined || node.expiresAt > now;
}

/** A strict session whose exit is out of service or failed its dial. */
function strictFailure(reason?: FailureReason): GatewayError {
  return new GatewayError('STRICT_SESSION_FAILED', "the strict session's exit failed; the session does not move to another exit", reason);
}
