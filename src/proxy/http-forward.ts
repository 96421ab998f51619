// Plain-HTTP forwarding (absolute-URI requests) over kept-alive upstream connections.
//
// The forwarder keeps its upstream connections itself (not node:http's Agent, whose per-request work was a
// large share of a request's CPU: three copies of the request options, per-key arrays made and deleted,
// a new timer and two setsockopt calls per request, the response's header object built for a hint; see
// docs/benchmarks.md, M1). Each ClientRequest is handed its socket by HANDOUT, an agent in name only: a kept
// one at once, or a new dial's when it ends. Reuse is what keeps a plain-HTTP request from paying a new upstream
// connection. A new connection is Router.dial (mode 'forward': to an HTTP node the request goes in absolute
// form, through a SOCKS5 node a tunnel to the target carries it in origin form), kept under the route's key,
// so a connection is only reused where a fresh dial would have been allowed to land:
//   - a sticky session: its user, session and the node the session is bound to now (a rotation or expiry
//     changes the key, so the old node's connections are never picked again);
//   - an instance route: its user and instance;
//   - a rotating user: its user and this client connection only ("every new client connection may leave
//     through a different upstream"); those idle connections are closed with the client connection.
// Every key also holds the target (a SOCKS5 node's connection is a tunnel to one target).
// Idle connections are bounded per key (maxIdlePerKey), per client connection across all its keys
// (maxIdlePerClient: the ones it released last) and per user (maxIdlePerUser): past a bound the least recently
// released one closes, so a client walking many targets over one kept-alive connection holds a few upstream
// connections, not one per target.
// Timeouts are one sweep over the open upstream connections (no timer per request): an idle connection
// closes after idleMs (or the upstream's shorter Keep-Alive hint), a request whose upstream is silent for
// responseTimeoutMs fails (504).
import {
  request as httpRequest,
  type Agent,
  type ClientRequest,
  type ClientRequestArgs,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import type { Socket } from 'node:net';
import type { ByteCounters, ConnectionContext } from '../connlog/types.ts';
import { LiveList, type Listed } from '../connlog/live-list.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { DialCancel } from './cancel.ts';
import { basicAuth } from './dial-http.ts';
import { forwardHeaderObject, forwardHeaders, refuseResponse, type AbsoluteTarget } from './http-message.ts';
import type { Dialed, Route, Router } from './router.ts';
import { holdBody } from './request-rules-body.ts';
import type { CompiledRule, RuleSet } from './request-rules.ts';
import type { ResultCounter } from './metric-cells.ts';
import { recordCarrying, recordCloser, recordNode, type FailureRecorder } from './tunnel-record.ts';
import { MeteredStream, Valve } from './tunnel-stream.ts';

/** The kept connections of one key: the idle ones (newest last) and how many are open; it lives while any is. */
class KeySlot {
  readonly idle: Upstream[] = [];
  open = 0;
  /** a rotating route's key: one client connection's own (keyFor), never picked once that client closed */
  readonly rotating: boolean;

  constructor(
    readonly key: string,
    readonly user: string,
  ) {
    this.rotating = key.charCodeAt(0) === 0x63; // 'c|'
  }
}

/** Idle upstream connections, least recently released first: a client connection's (ClientState) or a user's. */
class IdleList {
  head: Upstream | null = null;
  tail: Upstream | null = null;
  size = 0;
}

/** One upstream connection: its dial, its metered stream, the request it carries now, its timeouts' state. */
class Upstream implements Listed<Upstream> {
  /** the client connection of the exchange under way (cut with the upstream when the limit is reached) */
  client: Socket | null = null;
  /** the request it carries (null while idle) */
  request: TaggedRequest | null = null;
  /** idle, in its slot (an 'end' then closes it: upstreamEnded) */
  free = false;
  /** the sweep's tick when it went idle, or when its bytes last moved while a request was due */
  tick = 0;
  /** stream.up + stream.down at `tick` */
  seen = 0;
  /** how long it may stay idle: the forwarder's, or the upstream's shorter Keep-Alive hint */
  idleMs = 0;
  /** the client connection whose request it carried last (carry); while idle it is in that client's list */
  owner: ClientState | null = null;
  /** while idle: the lists it is in (its owner's, its user's) and its neighbours there */
  byClient: ClientState | null = null;
  prevOfClient: Upstream | null = null;
  nextOfClient: Upstream | null = null;
  byUser: IdleList | null = null;
  prevOfUser: Upstream | null = null;
  nextOfUser: Upstream | null = null;
  prevLive: Upstream | null = null;
  nextLive: Upstream | null = null;

  constructor(
    readonly forwarder: Forwarder,
    readonly slot: KeySlot,
    readonly dialed: Dialed,
    /**
     * The connection's metered stream (tunnel-stream.ts: the user's meter and rate, rotor_proxy_bytes_total):
     * up = body chunks, then the rest of bytesWritten per exchange; down = every byte read.
     */
    readonly stream: MeteredStream,
    /** the node's Proxy-Authorization, built once per connection; undefined = none */
    readonly auth: string | undefined,
  ) {}
}

const UPSTREAM = Symbol('rotor.upstream');
type TaggedSocket = Socket & { [UPSTREAM]?: Upstream; _httpMessage?: ClientRequest | null };

/** The exchange a ClientRequest (or its response) belongs to, so one set of module-level listeners serves all. */
const EXCHANGE = Symbol('rotor.exchange');
type TaggedRequest = ClientRequest & { [EXCHANGE]: Exchange };
type TaggedAnswer = IncomingMessage & { [EXCHANGE]: Exchange };

/** Request options: node:http copies unknown fields through to its agent's addRequest. */
interface ForwardArgs extends ClientRequestArgs {
  /** the exchange the request is a try of */
  rotorExchange: Exchange;
}

/** Marks the key of a sticky session not bound to a node yet (its connection is used once). */
const UNBOUND = '|unbound';

/** Expect is answered by Rotor (after admission); Host is rewritten from the URI. */
const DROP = new Set(['expect', 'host']);

/** Node's agent's margin: an idle connection closes this long before the upstream's Keep-Alive hint says it will. */
const HINT_MARGIN_MS = 1000;

export interface ForwarderOptions {
  router: Router;
  /** Longest silence from the upstream while a response is due. */
  responseTimeoutMs: number;
  /** Idle kept-alive upstream connections close after this. Default 30000 ms. */
  idleMs?: number;
  /** Idle connections kept per key. Default 8. */
  maxIdlePerKey?: number;
  /** Idle connections one client connection keeps across all its keys (the ones it released last). Default 8. */
  maxIdlePerClient?: number;
  /** Idle connections one user keeps across all its client connections and keys. Default 256. */
  maxIdlePerUser?: number;
  metrics?: Metrics | undefined;
  /** Counts each exchange that reached an upstream (rotor_proxy_connections_total{result="ok"}). */
  counter: ResultCounter;
  /** Records a request that failed before its response head; the forwarder answers it (refuseResponse). */
  failures: FailureRecorder;
  /** The realm of a 407 answer. */
  realm: string;
}

/**
 * One client request across its tries. Its listeners are module-level functions that find it through the
 * request (EXCHANGE), and it is the record's byte counters and closer itself, so a request costs this object
 * and its ClientRequest, not a dozen closures and once() wrappers; its client connection's one 'close'
 * listener (clientClosed) stops it.
 */
class Exchange implements ByteCounters {
  /** the try under way (a stale try's late events are ignored) */
  request: ClientRequest | null = null;
  cancel: DialCancel | null = null;
  /** this try may be retried on a new connection (the first try only) */
  mayRetry = true;
  responded = false;
  /** a body byte went to an upstream: the request can no longer be tried again */
  bodyStarted = false;
  /** the client's Expect: 100-continue has been answered (or there was none) */
  continued: boolean;
  /** the kept upstream carrying it, and that upstream's counters when it started */
  upstream: Upstream | null = null;
  upBase = 0;
  downBase = 0;
  /** bytes of the tries dropped before this one (a rule's retry, a kept connection that failed): metered, billed */
  earlierUp = 0;
  earlierDown = 0;
  /** the kept connection this try was handed (null: a new dial) */
  kept: Upstream | null = null;
  // Request rules (src/proxy/request-rules.ts): set only when a rule applies to this request.
  rules: RuleSet | undefined = undefined;
  /** retries a rule made (another exit) */
  ruleRetries = 0;
  /** the request body kept for a rule's retry (bounded: REPLAY_MAX); null = too large to send again */
  replay: Buffer[] | null = null;
  replayBytes = 0;
  ruleTimer: NodeJS.Timeout | undefined = undefined;

  constructor(
    readonly forwarder: Forwarder,
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly client: Socket,
    /** what the forwarder keeps with the client connection */
    readonly state: ClientState,
    readonly route: Route,
    readonly target: AbsoluteTarget,
    public key: string,
    readonly headers: Record<string, string | string[]>,
    /** the request's connection record */
    readonly conn: ConnectionContext,
    expectContinue: boolean,
  ) {
    this.continued = !expectContinue;
  }

  /** Up bytes of this exchange so far, every try's (the record's live ByteCounters). */
  get up(): number {
    return this.upstream ? this.earlierUp + this.upstream.stream.up - this.upBase : this.earlierUp;
  }

  /** Down bytes of this exchange so far, every try's. */
  get down(): number {
    return this.upstream ? this.earlierDown + this.upstream.stream.down - this.downBase : this.earlierDown;
  }

  /**
   * The try under way is dropped (its upstream is destroyed in this turn) for another: what it wrote and read
   * crossed the platform and is in the user's meter, so it stays in the record. Its head and framing are
   * counted now (settle), so the record and the meter hold the same bytes.
   */
  dropTry(): void {
    const u = this.upstream;
    if (u === null) return;
    this.forwarder.settle(u.dialed.socket, u);
    this.earlierUp += u.stream.up - this.upBase;
    this.earlierDown += u.stream.down - this.downBase;
    this.upstream = null;
  }

  /**
   * The client left (its 'close'), or DELETE /v1/connections/:id (the record's closer): the dial under way
   * is cancelled and the upstream request dropped.
   */
  stop(): void {
    this.client.destroy();
    this.cancel?.abort();
    this.request?.destroy();
  }

  end(result: 'ok' | 'client_abort' | 'upstream_error', reason: string): void {
    const u = this.upstream;
    if (u) this.conn.end({ result, reason, up: this.up, down: this.down });
    else this.conn.end({ result, reason });
  }
}

/**
 * What the forwarder keeps with a client connection (on the socket, CLIENT): set at its first forwarded request.
 * It is the list of the idle upstream connections it released last (IdleList): bounded (maxIdlePerClient), and
 * its rotating routes' ones close with it.
 */
class ClientState extends IdleList {
  /** the exchange under way (stopped when the client leaves) */
  exchange: Exchange | null = null;
  /** the client connection closed: its rotating routes' connections are not kept any more */
  closed = false;
  /** the last rotating key made, with what it was made of */
  last: { key: string; user: string; productNo: string; region: string; host: string; port: number } | null = null;

  constructor(
    readonly forwarder: Forwarder,
    readonly id: number,
  ) {
    super();
  }
}

const CLIENT = Symbol('rotor.forwarded');
type ForwardedClient = Socket & { [CLIENT]?: ClientState };

export class Forwarder {
  /** The kept connections by key; a key's slot lives while any of its connections is open. */
  private readonly slots = new Map<string, KeySlot>();
  /** Every open upstream connection, for the timeouts' sweep and close(). */
  private readonly upstreams = new LiveList<Upstream>();
  private sweepTimer: NodeJS.Timeout | undefined;
  /** Sweeps so far: the clock of the timeouts (no clock read per request). */
  private ticks = 0;
  private readonly sweepMs: number;
  private readonly idleMs: number;
  private readonly maxIdle: number;
  private readonly maxIdlePerClient: number;
  private readonly maxIdlePerUser: number;
  /** Each user's idle connections (an entry while it has any; emptied ones are dropped by the sweep, not per request). */
  private readonly idleOfUser = new Map<string, IdleList>();
  private nextClientId = 1;

  constructor(private readonly options: ForwarderOptions) {
    this.idleMs = options.idleMs ?? 30_000;
    this.maxIdle = options.maxIdlePerKey ?? 8;
    this.maxIdlePerClient = Math.max(1, options.maxIdlePerClient ?? 8);
    this.maxIdlePerUser = Math.max(1, options.maxIdlePerUser ?? 256);
    // A timeout fires within one sweep after it is due.
    this.sweepMs = Math.max(5, Math.min(1000, Math.floor(Math.min(this.idleMs, options.responseTimeoutMs) / 4)));
  }

  /** Closes every upstream connection (listener shutdown). */
  close(): void {
    for (const u of this.upstreams) u.dialed.socket.destroy();
  }

  /**
   * Forwards `req` for `route` to `target` and streams the answer into `res`. The client's
   * `Expect: 100-continue` is answered once an upstream carries the request; `fail` answers a failure that
   * happened before the response head.
   */
  forward(
    req: IncomingMessage,
    res: ServerResponse,
    route: Route,
    target: AbsoluteTarget,
    expectContinue: boolean,
    conn: ConnectionContext,
  ): void {
    const client = req.socket as ForwardedClient;
    let state = client[CLIENT];
    if (state === undefined) {
      state = client[CLIENT] = new ClientState(this, this.nextClientId++);
      client.on('close', clientClosed);
    }
    const key = this.keyFor(route, target, state);
    const headers = forwardHeaderObject(req.rawHeaders, DROP, target.authority);
    const exchange = new Exchange(this, req, res, client, state, route, target, key, headers, conn, expectContinue);
    state.exchange = exchange;
    const rules = this.options.router.rulesFor(route, target.host);
    if (rules !== undefined) {
      exchange.rules = rules;
      if (rules.rules.some((r) => r.retries > 0 && r.mayRetry(req.method ?? 'GET'))) exchange.replay = [];
    }
    recordCloser(conn, exchange);
    this.attempt(exchange);
  }

  /** A request that failed before its response head: recorded, then answered here (a client that left: closed). */
  failed(err: unknown, res: ServerResponse, conn: ConnectionContext): void {
    const f = this.options.failures.failed(err, conn);
    if (f.result === 'client_abort') res.destroy();
    else refuseResponse(res, f, this.options.realm);
  }

  /**
   * One try of an exchange, on a kept connection of its key if one is idle, else on a new dial. A kept-alive
   * upstream may have closed just as it was picked (a server that closes after each response without saying
   * so, like tinyproxy): such a failure, before any response byte and before any body byte left, is tried
   * once more on a new connection (upFailed). attempt, carry and settle are public only for this module's
   * listeners below; the HTTP listener calls forward and close.
   */
  attempt(exchange: Exchange): void {
    exchange.cancel = null;
    const args: ForwardArgs = {
      agent: HANDOUT,
      method: exchange.req.method ?? 'GET',
      path: exchange.target.path,
      // node:http writes the head only at the first write, so the 'socket' handler can still choose the
      // request form and add the node's credentials once it knows which upstream carries the request.
      headers: exchange.headers,
      rotorExchange: exchange,
    };
    // HANDOUT.addRequest runs inside: the request is handed a kept connection or a dial is started (handOut).
    const up = httpRequest(args) as TaggedRequest;
    up[EXCHANGE] = exchange;
    exchange.request = up;
    exchange.responded = false;
    up.on('socket', upSocket);
    up.on('response', upResponse);
    up.on('close', upClosed);
    up.on('error', upFailed);
    if (exchange.rules !== undefined) {
      const rule = exchange.rules.firstByteRule();
      clearTimeout(exchange.ruleTimer);
      if (rule !== undefined) exchange.ruleTimer = setTimeout(ruleTimedOut, rule.timeoutMs, exchange, up, rule);
    }
  }

  /** A try's request gets its connection: a kept one of its key (node emits 'socket' in the next tick), or a dial's. */
  handOut(exchange: Exchange, up: ClientRequest): void {
    const kept = this.takeIdle(exchange);
    exchange.kept = kept;
    if (kept === null) {
      this.dialFor(exchange, up);
      return;
    }
    kept.request = up as TaggedRequest;
    up.onSocket(kept.dialed.socket);
  }

  /**
   * The newest idle connection of the exchange's key that is still open, taken out of its slot (null: none).
   * Each request is checked against the destination rules in force now, as a dial checks it (Router.startDial):
   * a rule set after the connection was made (the user's, or proxy.rules by a reload) refuses the request here,
   * and the dial it then goes to refuses it the dial's way (403, nothing sent); the kept connection stays idle.
   */
  private takeIdle(exchange: Exchange): Upstream | null {
    const slot = this.slots.get(exchange.key);
    if (slot === undefined || slot.idle.length === 0) return null;
    if (this.options.router.destinationRefusal(exchange.route, exchange.target) !== undefined) return null;
    const idle = slot.idle;
    while (idle.length > 0) {
      const u = idle.pop()!;
      u.free = false;
      this.unlist(u);
      const socket = u.dialed.socket;
      if (!socket.destroyed && !socket.readableEnded) return u;
    }
    return null;
  }

  /** A new connection for the try `up`: handed to the request when the dial ends (node then emits 'socket' or 'error'). */
  private dialFor(exchange: Exchange, up: ClientRequest): void {
    const cancel = new DialCancel();
    exchange.cancel = cancel;
    this.dial(exchange, cancel).then(
      (upstream) => {
        upstream.request = up as TaggedRequest;
        up.onSocket(upstream.dialed.socket);
      },
      // As node's agent fails a request whose connection could not be made: 'error', then 'close'.
      (err: Error) => (up as unknown as { onSocket(s: undefined, err: Error): void }).onSocket(undefined, err),
    );
  }

  /**
   * A request rule fired on this exchange (a response's status, or no response head within its timeoutMs):
   * the exit is banned or the record tagged (Router.ruleFired); then, when the rule retries, the method may
   * be sent again (idempotent, or listed by the rule), its body is whole in hand, and nothing has reached the
   * client, the request goes again through another exit. True when it did (the caller drops the old try).
   */
  ruleRetry(exchange: Exchange, rule: CompiledRule): boolean {
    const router = this.options.router;
    const route = exchange.route;
    const node = exchange.upstream?.dialed.node;
    if (node !== undefined) router.ruleFired(route, node, rule, exchange.target.host, exchange.conn);
    else exchange.conn.rule = rule.name;
    const method = exchange.req.method ?? 'GET';
    if (exchange.ruleRetries >= rule.retries || !rule.mayRetry(method) || route.strict || exchange.res.headersSent) return false;
    if (exchange.bodyStarted && (exchange.replay === null || !exchange.req.complete)) return false;
    exchange.ruleRetries++;
    exchange.conn.retries++;
    exchange.dropTry();
    // Kept connections of this route to the exit just judged must not carry the retry.
    const idle = node === undefined ? undefined : this.slots.get(exchange.key)?.idle;
    if (idle !== undefined) for (const u of [...idle]) if (u.dialed.node.id === node!.id) this.evict(u);
    // A sticky session the rule moved has a new key (no node bound yet).
    exchange.key = this.keyFor(route, exchange.target, exchange.state);
    exchange.mayRetry = false;
    this.attempt(exchange);
    return true;
  }

  /** The request has its upstream connection: the record learns it, the head is completed and sent. */
  carry(exchange: Exchange, up: ClientRequest, upstream: Upstream): void {
    const conn = exchange.conn;
    upstream.client = exchange.client;
    upstream.owner = exchange.state;
    // The response's silence is counted from here (sweep).
    upstream.tick = this.ticks;
    upstream.seen = upstream.stream.up + upstream.stream.down;
    exchange.upstream = upstream;
    exchange.upBase = upstream.stream.up;
    exchange.downBase = upstream.stream.down;
    recordNode(conn, upstream.dialed.node, upstream.dialed.exit);
    recordCarrying(conn, exchange, exchange);
    if (upstream.dialed.viaProxy) {
      up.path = exchange.target.absolute;
      if (upstream.auth !== undefined) up.setHeader('Proxy-Authorization', upstream.auth);
    }
    // A sticky session without a node yet: this dial binds one, and the connection must not be kept
    // under the unbound key, where the session's next start (after expiry) would find it.
    if (exchange.key.endsWith(UNBOUND)) up.shouldKeepAlive = false;
    this.options.counter.count('ok');
    if (!exchange.continued) {
      exchange.continued = true;
      exchange.res.writeContinue();
    }
    this.pumpBody(exchange.req, up, upstream, exchange);
  }

  /**
   * Client body → upstream, counted chunk by chunk into the user's meter, through the stream's valve: the
   * client's body is paused while the upstream is full or the user is over its rate (both must clear).
   */
  private pumpBody(req: IncomingMessage, up: ClientRequest, upstream: Upstream, exchange: Exchange): void {
    const stream = upstream.stream;
    if (exchange.ruleRetries > 0 && exchange.replay !== null && exchange.replayBytes > 0) {
      // A rule's retry: the body read for the first try goes again.
      for (const chunk of exchange.replay) up.write(chunk);
      up.end();
      return;
    }
    if (req.complete && req.readableLength === 0) {
      up.end();
      return;
    }
    const valve = stream.valve(req);
    req.on('data', (chunk: Buffer) => {
      exchange.bodyStarted = true;
      if (exchange.replay !== null) {
        exchange.replayBytes += chunk.length;
        if (exchange.replayBytes <= REPLAY_MAX) exchange.replay.push(chunk);
        else exchange.replay = null;
      }
      if (up !== exchange.request) return; // a rule retried the request: its body goes from the replay
      if (stream.sent(chunk.length)) {
        cut(upstream);
        return;
      }
      valve.passed(chunk.length, up.write(chunk));
    });
    up.on('drain', () => valve.drained());
    req.once('end', () => up.end());
  }

  /** End of an exchange: the head and framing bytes written count too; the byte counters move. */
  settle(socket: Socket, upstream: Upstream): void {
    const stream = upstream.stream;
    const written = socket.bytesWritten - stream.up;
    if (written > 0) stream.sent(written);
    upstream.client = null;
    stream.flush();
  }

  /**
   * A response ended and node:http let its connection go ('free'): kept idle in its slot, unless it cannot
   * carry another request (closing, the upstream said close or hinted a timeout too short), or the slot is full.
   */
  release(upstream: Upstream, socket: TaggedSocket): void {
    const req = socket._httpMessage;
    upstream.request = null;
    const slot = upstream.slot;
    // No request: one that left before it had the socket (node hands it back unused): closed, as node's agent does.
    const idleMs = !req || !req.shouldKeepAlive ? 0 : keepAliveMs(req, this.idleMs);
    const owner = upstream.owner;
    if (
      idleMs <= 0 ||
      !socket.writable ||
      socket.readableEnded ||
      slot.idle.length >= this.maxIdle ||
      // A rotating route's connection whose client connection closed can never be picked again.
      (slot.rotating && (owner === null || owner.closed))
    ) {
      socket.destroy();
      return;
    }
    // The request is done with the socket (node's agent lets go of it the same way).
    socket._httpMessage = null;
    upstream.free = true;
    upstream.idleMs = idleMs;
    upstream.tick = this.ticks;
    slot.idle.push(upstream);
    // Listed with its client connection and its user; past either bound, the least recently released closes.
    if (owner !== null && !owner.closed) {
      pushClient(owner, upstream);
      if (owner.size > this.maxIdlePerClient) this.evict(owner.head!);
    }
    let ofUser = this.idleOfUser.get(slot.user);
    if (ofUser === undefined) this.idleOfUser.set(slot.user, (ofUser = new IdleList()));
    pushUser(ofUser, upstream);
    if (ofUser.size > this.maxIdlePerUser) this.evict(ofUser.head!);
  }

  /** An idle connection taken out of its client's and user's lists (it was picked, or it closes). */
  private unlist(u: Upstream): void {
    if (u.byClient !== null) removeClient(u.byClient, u);
    if (u.byUser !== null) removeUser(u.byUser, u);
  }

  /** An idle connection closed to keep a bound: out of its slot and lists now (its 'close' comes later). */
  private evict(u: Upstream): void {
    if (u.free) {
      const idle = u.slot.idle;
      const i = idle.indexOf(u);
      if (i >= 0) idle.splice(i, 1);
      u.free = false;
      this.unlist(u);
    }
    u.dialed.socket.destroy();
  }

  /** An upstream connection closed: out of its slot (the slot too once it was the last) and out of the sweep. */
  closed(upstream: Upstream): void {
    const slot = upstream.slot;
    if (upstream.free) {
      const i = slot.idle.indexOf(upstream);
      if (i >= 0) slot.idle.splice(i, 1);
      upstream.free = false;
      this.unlist(upstream);
    }
    if (--slot.open === 0) this.slots.delete(slot.key);
    this.upstreams.remove(upstream);
    if (this.upstreams.size === 0) {
      clearInterval(this.sweepTimer);
      this.sweepTimer = undefined;
      // No connection open: every user's list is empty.
      this.idleOfUser.clear();
    }
  }

  /**
   * The timeouts, every sweepMs while any upstream connection is open: an idle one past its idle time is
   * closed; a request whose upstream moved no byte either way for responseTimeoutMs fails (upTimedOut).
   */
  sweep(): void {
    const tick = ++this.ticks;
    for (const [user, list] of this.idleOfUser) if (list.size === 0) this.idleOfUser.delete(user);
    const sweepMs = this.sweepMs;
    const responseTicks = this.options.responseTimeoutMs / sweepMs;
    for (const u of this.upstreams) {
      if (u.free) {
        if ((tick - u.tick) * sweepMs >= u.idleMs) u.dialed.socket.destroy();
        continue;
      }
      const request = u.request;
      if (request === null || u.client === null) continue;
      const moved = u.stream.up + u.stream.down;
      if (moved !== u.seen) {
        u.seen = moved;
        u.tick = tick;
      } else if (tick - u.tick >= responseTicks) upTimedOut.call(request);
    }
  }

  private keyFor(route: Route, target: AbsoluteTarget, routes: ClientState): string {
    const user = route.user.name;
    if (route.instanceNo !== undefined) return `i|${user}|${route.instanceNo}|${target.host}:${target.port}`;
    const { productNo, region } = route.poolKey;
    if (route.sessionId !== undefined) {
      const where = `${productNo}|${region}|${target.host}:${target.port}`;
      const bound = this.options.router.boundNodeId(route);
      return bound === undefined ? `s|${user}|${route.sessionId}|${where}${UNBOUND}` : `s|${user}|${route.sessionId}|${bound}|${where}`;
    }
    // A client connection mostly asks for one user's route to one target: the key it had last time.
    const last = routes.last;
    if (
      last !== null &&
      last.user === user &&
      last.productNo === productNo &&
      last.region === region &&
      last.host === target.host &&
      last.port === target.port
    ) {
      return last.key;
    }
    const key = `c|${routes.id}|${user}|${productNo}|${region}|${target.host}:${target.port}`;
    routes.last = { key, user, productNo, region, host: target.host, port: target.port };
    return key;
  }

  /**
   * A client connection closed: its rotating routes' idle upstreams can never be picked again (closed); the
   * shared ones it released (a sticky session's, an instance's) stay, bounded by their key and their user.
   */
  dropClient(state: ClientState): void {
    state.closed = true;
    let u = state.head;
    while (u !== null) {
      const next = u.nextOfClient;
      u.owner = null;
      if (u.slot.rotating) this.evict(u);
      else removeClient(state, u);
      u = next;
    }
  }

  /** A new upstream connection for the exchange's key: Router.dial, then metering attached for its whole life. */
  private async dial(exchange: Exchange, cancel: DialCancel): Promise<Upstream> {
    const router = this.options.router;
    const route = exchange.route;
    const user = route.user.name;
    const dialed = await router.dial(route, exchange.target, cancel, 'forward', exchange.conn);
    const socket = dialed.socket as TaggedSocket;
    const metrics = this.options.metrics;
    const meters = router.meters;
    const stream = new MeteredStream(meters.meter(user), meters.limiter?.(user), metrics ? { metrics, user } : undefined);
    stream.pace(socket);
    const key = exchange.key;
    let slot = this.slots.get(key);
    if (slot === undefined) {
      slot = new KeySlot(key, user);
      this.slots.set(key, slot);
    }
    slot.open++;
    const upstream = new Upstream(this, slot, dialed, stream, dialed.viaProxy ? basicAuth(dialed.node) : undefined);
    this.upstreams.add(upstream);
    if (this.sweepTimer === undefined) {
      this.sweepTimer = setInterval(sweepUpstreams, this.sweepMs, this);
      this.sweepTimer.unref();
    }
    socket[UPSTREAM] = upstream;
    // TCP keep-alive probes on a kept connection, set once (node's agent set them again at every free).
    socket.setKeepAlive(true, 1000);
    socket.on('data', upstreamData);
    socket.on('end', upstreamEnded);
    socket.on('free', upstreamFreed);
    socket.once('close', upstreamClosed);
    if (dialed.head) socket.unshift(dialed.head);
    // Dialers hand over paused sockets; the http client's own 'data' listener would not resume it.
    socket.resume();
    return upstream;
  }
}

function pushClient(list: ClientState, u: Upstream): void {
  u.byClient = list;
  u.prevOfClient = list.tail;
  u.nextOfClient = null;
  if (list.tail !== null) list.tail.nextOfClient = u;
  else list.head = u;
  list.tail = u;
  list.size++;
}

function removeClient(list: ClientState, u: Upstream): void {
  const { prevOfClient: prev, nextOfClient: next } = u;
  if (prev !== null) prev.nextOfClient = next;
  else list.head = next;
  if (next !== null) next.prevOfClient = prev;
  else list.tail = prev;
  u.byClient = u.prevOfClient = u.nextOfClient = null;
  list.size--;
}

function pushUser(list: IdleList, u: Upstream): void {
  u.byUser = list;
  u.prevOfUser = list.tail;
  u.nextOfUser = null;
  if (list.tail !== null) list.tail.nextOfUser = u;
  else list.head = u;
  list.tail = u;
  list.size++;
}

function removeUser(list: IdleList, u: Upstream): void {
  const { prevOfUser: prev, nextOfUser: next } = u;
  if (prev !== null) prev.nextOfUser = next;
  else list.head = next;
  if (next !== null) next.prevOfUser = prev;
  else list.tail = prev;
  u.byUser = u.prevOfUser = u.nextOfUser = null;
  list.size--;
}

/**
 * The agent every forwarded request names: node:http asks an agent for the request's socket (addRequest) and,
 * with keepAlive, says `Connection: keep-alive` and hands the socket back with 'free' after the response
 * (upstreamFreed); the forwarder does the keeping (handOut, release). Unlike createConnection, an agent costs
 * node:http no further copy of the options and no closure per request.
 */
const HANDOUT = {
  keepAlive: true,
  addRequest(req: ClientRequest, args: ForwardArgs): void {
    const exchange = args.rotorExchange;
    exchange.forwarder.handOut(exchange, req);
  },
} as unknown as Agent;

/** How long a connection whose response just ended may stay idle: the upstream's Keep-Alive hint may shorten it. */
function keepAliveMs(req: ClientRequest, idleMs: number): number {
  const raw = (req as ClientRequest & { res?: IncomingMessage | null }).res?.rawHeaders;
  if (raw === undefined) return idleMs;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.length !== 10 || raw[i]!.toLowerCase() !== 'keep-alive') continue;
    const hint = /^timeout=(\d+)/.exec(raw[i + 1]!)?.[1];
    if (hint !== undefined) return Math.min(idleMs, Number(hint) * 1000 - HINT_MARGIN_MS);
  }
  return idleMs;
}

function sweepUpstreams(forwarder: Forwarder): void {
  forwarder.sweep();
}

// An upstream connection's listeners, one set for all (`this` is the socket).

function upstreamData(this: TaggedSocket, chunk: Buffer): void {
  const upstream = this[UPSTREAM]!;
  if (upstream.stream.received(chunk.length)) cut(upstream);
}

/** A client connection closed: its exchange under way is stopped, its rotating routes' idle upstreams closed. */
function clientClosed(this: ForwardedClient): void {
  const state = this[CLIENT]!;
  state.exchange?.stop();
  state.forwarder.dropClient(state);
}

/** An upstream connection's reading ended: an idle one is closed (it could carry no further response). */
function upstreamEnded(this: TaggedSocket): void {
  if (this[UPSTREAM]?.free) this.destroy();
}

/** node:http is done with the connection (its response ended, the request was written whole). */
function upstreamFreed(this: TaggedSocket): void {
  const upstream = this[UPSTREAM]!;
  upstream.forwarder.release(upstream, this);
}

function upstreamClosed(this: TaggedSocket): void {
  const upstream = this[UPSTREAM]!;
  const forwarder = upstream.forwarder;
  forwarder.settle(this, upstream);
  forwarder.closed(upstream);
  upstream.dialed.release(upstream.stream.down === 0 && this.errored ? 'reset' : undefined);
}

// The ClientRequest's listeners, one set for all exchanges (`this` is the request).

function upTimedOut(this: TaggedRequest): void {
  this.destroy(Object.assign(new Error('upstream response timed out'), { code: 'ETIMEDOUT' }));
}

function upSocket(this: TaggedRequest, s: Socket): void {
  const upstream = (s as TaggedSocket)[UPSTREAM];
  const exchange = this[EXCHANGE];
  if (upstream && exchange.request === this) exchange.forwarder.carry(exchange, this, upstream);
}

function upResponse(this: TaggedRequest, answer: IncomingMessage): void {
  const exchange = this[EXCHANGE];
  if (exchange.rules !== undefined) {
    clearTimeout(exchange.ruleTimer);
    const verdict = exchange.rules.atHead(answer.statusCode ?? 0, answer.rawHeaders);
    if (typeof verdict === 'number') {
      // A body pattern may fire: the head and the first body bytes wait (request-rules-body.ts) while the
      // patterns run on their own thread (request-rules-matcher.ts).
      exchange.responded = true;
      const rules = exchange.rules;
      holdBody(
        answer,
        verdict,
        (held, done) => rules.judgeBody(answer.statusCode ?? 0, answer.rawHeaders, held, done),
        (held, ended, rule) => bodySeen(exchange, this, answer, held, ended, rule),
        () => bodyLost(exchange, this),
      );
      return;
    }
    if (verdict !== undefined && exchange.forwarder.ruleRetry(exchange, verdict)) {
      // This try's answer is dropped with its connection; the retry owns the exchange.
      answer.resume();
      this.destroy();
      return;
    }
  }
  passResponse(exchange, answer, undefined, false);
}

/**
 * A body rule's bytes are judged: the rule fires (and may retry elsewhere), or the response goes on. A body not
 * whole in hand was paused meanwhile (request-rules-body.ts): it flows again unless the client is full already.
 */
function bodySeen(
  exchange: Exchange,
  up: TaggedRequest,
  answer: IncomingMessage,
  held: Buffer,
  ended: boolean,
  rule: CompiledRule | undefined,
): void {
  if (exchange.request !== up || exchange.client.destroyed || exchange.res.headersSent) {
    // Nobody takes the rest (another try owns the exchange, the client left, or the upstream closed while the
    // bytes were judged and upClosed answered 502): read to nowhere, as before the hold.
    answer.resume();
    return;
  }
  if (rule !== undefined && exchange.forwarder.ruleRetry(exchange, rule)) {
    answer.resume();
    up.destroy();
    return;
  }
  passResponse(exchange, answer, held, ended);
  // No pipe: the answer could not be passed on (passResponse failed the exchange and let the answer flow).
  const pipe = (answer as Partial<Piped<IncomingMessage>>)[PIPE];
  if (!ended && pipe !== undefined && !pipe.held) answer.resume();
}

/** The upstream closed while a body rule's bytes were held: nothing reached the client yet, it gets a 502. */
function bodyLost(exchange: Exchange, up: TaggedRequest): void {
  if (exchange.request !== up || exchange.client.destroyed || exchange.res.headersSent) return;
  exchange.forwarder.failed(
    Object.assign(new Error('the upstream closed during the response'), { code: 'ECONNRESET' }),
    exchange.res,
    exchange.conn,
  );
}

/** An answer from the upstream that cannot be passed on (tunnel-record.ts maps an HPE_ code to 502 http_protocol_error). */
const MALFORMED_ANSWER = Object.assign(new Error('the upstream answered with a status line that cannot be passed on'), {
  code: 'HPE_INVALID_STATUS',
});

/**
 * The response goes to the client: its head, then `held` (body bytes a rule's body pattern looked at) and the
 * rest as it comes; `ended` = the held bytes are the whole body.
 */
function passResponse(exchange: Exchange, answer: IncomingMessage, held: Buffer | undefined, ended: boolean): void {
  exchange.responded = true;
  // node:http's client takes status lines its server will not write (a status under 100, a control byte in the
  // reason phrase): writeHead throws, on the upstream socket's data path. Such an answer fails the exchange (502,
  // http_protocol_error) before any byte of it reached the client, and its connection is not kept.
  try {
    exchange.res.writeHead(answer.statusCode ?? 0, answer.statusMessage, forwardHeaders(answer.rawHeaders));
  } catch {
    // writeHead kept the refused reason phrase, and the 502's writeHead would keep it too: cleared.
    exchange.res.statusMessage = '';
    answer.resume();
    exchange.request?.destroy();
    exchange.forwarder.failed(MALFORMED_ANSWER, exchange.res, exchange.conn);
    return;
  }
  (answer as TaggedAnswer)[EXCHANGE] = exchange;
  if (ended) {
    exchange.upstream?.stream.charge(held?.length ?? 0);
    exchange.res.end(held);
    answerEnded.call(answer as TaggedAnswer);
    return;
  }
  // The response's end is the pipe's (pipeEnded), then the exchange's: one 'end' listener for both.
  const pipe = streamResponse(answer, exchange.res, exchange.upstream?.stream);
  if (held !== undefined && held.length > 0) pipe.data(held);
}

function answerEnded(this: TaggedAnswer): void {
  const exchange = this[EXCHANGE];
  const upstream = exchange.upstream;
  if (upstream) exchange.forwarder.settle(upstream.dialed.socket, upstream);
  exchange.end('ok', 'closed');
}

function upClosed(this: TaggedRequest): void {
  const exchange = this[EXCHANGE];
  // A try that failed and was tried again: the next try owns the exchange now.
  if (exchange.request !== this) return;
  // Only a request with a rule has a timer (a clearTimeout call per request otherwise).
  if (exchange.ruleTimer !== undefined) clearTimeout(exchange.ruleTimer);
  const state = exchange.state;
  if (state.exchange === exchange) state.exchange = null;
  // Whatever ended the exchange without an answer or a failure said: the limit or the client leaving.
  if (exchange.upstream?.stream.exhausted) exchange.end('ok', 'limit');
  else if (exchange.client.destroyed) exchange.end('client_abort', 'the client went away');
  else if (!exchange.res.writableEnded) {
    // Not answered yet, and node:http said no 'error': the upstream closed during the response body (node
    // destroys the response quietly), or it answered a plain request with 101 (node, with no 'upgrade'
    // listener, destroys the socket). A response whose body was read whole ends by its own 'end' (answerEnded).
    const answer = (this as ClientRequest & { res?: IncomingMessage | null }).res;
    if (answer && (answer.statusCode === 101 || !answer.complete)) answerLost(exchange, answer.statusCode === 101);
  }
}

/** An upgrade answer to a request that asked for none (tunnel-record.ts maps an HPE_ code to 502 http_protocol_error). */
const UNASKED_UPGRADE = Object.assign(new Error('the upstream switched protocols on a plain request'), { code: 'HPE_UNEXPECTED_UPGRADE' });
const CLOSED_DURING_RESPONSE = Object.assign(new Error('the upstream closed during the response'), { code: 'ECONNRESET' });

/**
 * The upstream's answer was lost after its head came: a client that has the head loses its connection (so it
 * knows the body is short) and the record ends as the upstream's failure; one that has nothing yet gets a 502.
 */
function answerLost(exchange: Exchange, upgrade: boolean): void {
  if (exchange.res.headersSent) {
    exchange.client.destroy();
    exchange.end('upstream_error', 'the upstream closed during the response');
  } else {
    exchange.forwarder.failed(upgrade ? UNASKED_UPGRADE : CLOSED_DURING_RESPONSE, exchange.res, exchange.conn);
  }
}

function upFailed(this: TaggedRequest, err: Error): void {
  const exchange = this[EXCHANGE];
  if (exchange.request !== this || exchange.client.destroyed) return;
  if (exchange.mayRetry && exchange.kept !== null && !exchange.responded && !exchange.bodyStarted) {
    exchange.mayRetry = false;
    exchange.dropTry();
    exchange.forwarder.attempt(exchange);
    return;
  }
  if (exchange.res.headersSent) {
    exchange.client.destroy();
    exchange.end('upstream_error', 'the upstream failed during the response');
  } else {
    exchange.forwarder.failed(err, exchange.res, exchange.conn);
  }
}

/** The longest request body kept so that a rule may send it again. */
const REPLAY_MAX = 64 * 1024;

/** No response head within a rule's timeoutMs: the rule fires; without a retry the try ends as timed out (504). */
function ruleTimedOut(exchange: Exchange, up: TaggedRequest, rule: CompiledRule): void {
  if (exchange.request !== up || exchange.responded || exchange.client.destroyed) return;
  if (exchange.forwarder.ruleRetry(exchange, rule)) {
    up.destroy();
    return;
  }
  up.destroy(Object.assign(new Error("no response within the rule's timeout"), { code: 'ETIMEDOUT' }));
}

/**
 * A response body on its way to the client through the upstream stream's valve (tunnel-stream.ts): while the
 * client's socket is full (its write buffer past its high-water mark) or the user is over its rate, the
 * response and the upstream socket under it are paused, so Rotor reads at most one more socket read (up to
 * 64 KiB, one paced piece for a rate-limited user) beyond what the client has taken: a client that stops
 * reading stops the upstream. Found by its listeners through PIPE (one set for all responses); per chunk a
 * write and the valve's take() and flag operations.
 */
class ResponsePipe extends Valve {
  /** The upstream socket under the response (node clears source.socket once the response is done). */
  private readonly socket: Socket;

  constructor(
    readonly answer: IncomingMessage,
    readonly sink: ServerResponse,
    stream: MeteredStream | undefined,
  ) {
    super(undefined, stream?.limiter, 0, answer.socket);
    this.socket = answer.socket;
  }

  data(chunk: Buffer): void {
    this.passed(chunk.length, this.sink.write(chunk));
  }

  protected override stopSource(): void {
    this.answer.pause();
    // The socket too: the response's own buffer would otherwise take another read or more before node stops.
    this.socket.pause();
  }

  /**
   * The body is all read: the kept-alive socket is the forwarder's again and must flow for the next response on it.
   * A drain of the client still due would not come (node emits none for a finished response), so the socket a
   * full client paused is resumed here, not there.
   */
  released(): void {
    this.close();
    if (this.socket.isPaused()) this.socket.resume();
  }

  protected override startSource(): void {
    if (this.answer.readableEnded) {
      // The body is all delivered (a wake after its end): the kept-alive socket is the forwarder's again and flows.
      if (this.socket.isPaused()) this.socket.resume();
      return;
    }
    this.socket.resume();
    this.answer.resume();
  }
}

const PIPE = Symbol('rotor.pipe');
type Piped<T> = T & { [PIPE]: ResponsePipe };

/** Response body → client (ResponsePipe); the listeners are module-level (one set for all responses). */
function streamResponse(answer: IncomingMessage, res: ServerResponse, stream: MeteredStream | undefined): ResponsePipe {
  const pipe = new ResponsePipe(answer, res, stream);
  (answer as Piped<IncomingMessage>)[PIPE] = pipe;
  (res as Piped<ServerResponse>)[PIPE] = pipe;
  answer.on('data', pipeData);
  res.on('drain', pipeDrained);
  answer.on('end', pipeEnded);
  return pipe;
}

function pipeData(this: Piped<IncomingMessage>, chunk: Buffer): void {
  this[PIPE].data(chunk);
}

function pipeDrained(this: Piped<ServerResponse>): void {
  this[PIPE].drained();
}

function pipeEnded(this: Piped<IncomingMessage>): void {
  const pipe = this[PIPE];
  pipe.sink.end();
  pipe.released();
  answerEnded.call(this as unknown as TaggedAnswer);
}

/**
 * The limit is reached: the client first, so that node:http's error answer for a response still due never
 * reaches a client being cut off, then the upstream.
 */
function cut(upstream: Upstream): void {
  upstream.client?.destroy();
  upstream.dialed.socket.destroy();
}
