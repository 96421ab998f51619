// Plain-HTTP forwarding (absolute-URI requests) over kept-alive upstream connections.
//
// node:http's Agent does the keeping: which connection is free, whether a response left it reusable, the
// idle timeout (the upstream's Keep-Alive hint honoured), bounded free connections per key; reuse is what
// keeps a plain-HTTP request from paying a new upstream connection (docs/benchmarks.md, M1). The agent never
// resolves or connects by itself: a new connection is
// Router.dial (mode 'forward': to an HTTP node the request goes in absolute form, through a SOCKS5 node a
// tunnel to the target carries it in origin form), and the agent's key is the route's, so a connection is
// only reused where a fresh dial would have been allowed to land:
//   - a sticky session: its user, session and the node the session is bound to now (a rotation or expiry
//     changes the key, so the old node's connections are never picked again);
//   - an instance route: its user and instance;
//   - a rotating user: its user and this client connection only ("every new client connection may leave
//     through a different upstream"); those idle connections are closed with the client connection.
// Every key also holds the target (a SOCKS5 node's connection is a tunnel to one target).
import {
  Agent,
  request as httpRequest,
  type ClientRequest,
  type ClientRequestArgs,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { ByteCounters, ConnectionContext } from '../connlog/types.ts';
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

/** What each kept upstream connection carries: its dial, its metered stream, the client it serves now. */
interface Upstream {
  dialed: Dialed;
  /**
   * The connection's metered stream (tunnel-stream.ts: the user's meter and rate, rotor_proxy_bytes_total):
   * up = body chunks, then the rest of bytesWritten per exchange; down = every byte read.
   */
  stream: MeteredStream;
  /** the node's Proxy-Authorization, built once per connection; undefined = none */
  auth: string | undefined;
  /** the client connection of the exchange under way (cut with the upstream when the limit is reached) */
  client: Socket | null;
  /** kept by the agent between exchanges (an 'end' then closes it: see RouteAgent.keepSocketAlive) */
  free: boolean;
}

const UPSTREAM = Symbol('rotor.upstream');
type TaggedSocket = Socket & { [UPSTREAM]?: Upstream };

/** The exchange a ClientRequest (or its response) belongs to, so one set of module-level listeners serves all. */
const EXCHANGE = Symbol('rotor.exchange');
type TaggedRequest = ClientRequest & { [EXCHANGE]: Exchange };
type TaggedAnswer = IncomingMessage & { [EXCHANGE]: Exchange };

/** Request options as the agent sees them: node:http copies unknown fields through to getName/createConnection. */
interface ForwardArgs extends ClientRequestArgs {
  /** the exchange: its agent key, route, target, connection record and the cancel of the try under way */
  rotorExchange: Exchange;
}

/** Marks the key of a sticky session not bound to a node yet (its connection is used once). */
const UNBOUND = '|unbound';

/** Expect is answered by Rotor (after admission); Host is rewritten from the URI. */
const DROP = new Set(['expect', 'host']);

export interface ForwarderOptions {
  router: Router;
  /** Longest silence from the upstream while a response is due. */
  responseTimeoutMs: number;
  /** Idle kept-alive upstream connections close after this. Default 30000 ms. */
  idleMs?: number;
  /** Idle connections kept per key. Default 8. */
  maxIdlePerKey?: number;
  metrics?: Metrics | undefined;
  /** Counts each exchange that reached an upstream (rotor_proxy_connections_total{result="ok"}). */
  counter: ResultCounter;
  /** Records a request that failed before its response head; the forwarder answers it (refuseResponse). */
  failures: FailureRecorder;
  /** The realm of a 407 answer. */
  realm: string;
}

class RouteAgent extends Agent {
  constructor(
    private readonly open: (args: ForwardArgs) => Promise<Socket>,
    idleMs: number,
    maxIdle: number,
  ) {
    super({ keepAlive: true, maxFreeSockets: maxIdle, timeout: idleMs, scheduling: 'lifo' });
  }

  override getName(options?: ClientRequestArgs): string {
    return (options as ForwardArgs).rotorExchange.key;
  }

  /**
   * Upstream sockets are dialed allowHalfOpen (tunnels need half-close), so a server that closes after each
   * response without saying so (tinyproxy does) leaves a free socket whose reading has ended but which is
   * still writable: the next request was written into it and waited out its response timeout (3 s a request
   * in test/proxy/http-forwarding) before the retry. A free socket that ends is closed at once (the 'end'
   * listener every upstream socket has from its dial, upstreamEnded), which takes it out of the pool; one
   * that ended before it was freed is not kept.
   */
  override keepSocketAlive(socket: Socket): boolean {
    // Node's Agent reads this method's return value (a falsy one destroys the socket); @types/node says void.
    if (socket.readableEnded || !(super.keepSocketAlive(socket) as unknown as boolean)) return false;
    const upstream = (socket as TaggedSocket)[UPSTREAM];
    if (upstream) upstream.free = true;
    return true;
  }

  override reuseSocket(socket: Socket, req: ClientRequest): void {
    const upstream = (socket as TaggedSocket)[UPSTREAM];
    if (upstream) upstream.free = false;
    super.reuseSocket(socket, req);
  }

  override createConnection(options: ClientRequestArgs, callback?: (err: Error | null, stream: Duplex) => void): Duplex | null | undefined {
    this.open(options as ForwardArgs).then(
      (socket) => callback?.(null, socket),
      (err: Error) => callback?.(err, undefined as unknown as Duplex),
    );
    return undefined;
  }
}

/**
 * One client request across its tries. Its listeners are module-level functions that find it through the
 * request (EXCHANGE), and it is the record's byte counters itself, so a request costs this object, its
 * ClientRequest and one closure (`stop`), not a dozen closures and once() wrappers.
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

  /** Up bytes of this exchange so far (the record's live ByteCounters). */
  get up(): number {
    return this.upstream ? this.upstream.stream.up - this.upBase : 0;
  }

  /** Down bytes of this exchange so far. */
  get down(): number {
    return this.upstream ? this.upstream.stream.down - this.downBase : 0;
  }

  /**
   * The client left (its 'close'), or DELETE /v1/connections/:id (the record's closer): the dial under way
   * is cancelled and the upstream request dropped.
   */
  readonly stop = (): void => {
    this.client.destroy();
    this.cancel?.abort();
    this.request?.destroy();
  };

  end(result: 'ok' | 'client_abort' | 'upstream_error', reason: string): void {
    const u = this.upstream;
    if (u) this.conn.end({ result, reason, up: u.stream.up - this.upBase, down: u.stream.down - this.downBase });
    else this.conn.end({ result, reason });
  }
}

/** A client connection's rotating-route keys (see Forwarder.keyFor). */
class ClientRoutes {
  readonly keys = new Set<string>();
  /** the last key made, with what it was made of */
  last: { key: string; user: string; productNo: string; region: string; host: string; port: number } | null = null;

  constructor(readonly id: number) {}
}

export class Forwarder {
  private readonly agent: RouteAgent;
  /** Per client connection: its rotating routes' keys (their idle upstreams close with it), the last key. */
  private readonly clients = new WeakMap<Socket, ClientRoutes>();
  private nextClientId = 1;

  constructor(private readonly options: ForwarderOptions) {
    this.agent = new RouteAgent((args) => this.dial(args), options.idleMs ?? 30_000, options.maxIdlePerKey ?? 8);
  }

  /** Closes every idle upstream connection (listener shutdown). */
  close(): void {
    this.agent.destroy();
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
    const client = req.socket;
    const key = this.keyFor(route, target, client);
    const headers = forwardHeaderObject(req.rawHeaders, DROP, target.authority);
    const exchange = new Exchange(this, req, res, client, route, target, key, headers, conn, expectContinue);
    const rules = this.options.router.rulesFor(route, target.host);
    if (rules !== undefined) {
      exchange.rules = rules;
      if (rules.rules.some((r) => r.retries > 0 && r.mayRetry(req.method ?? 'GET'))) exchange.replay = [];
    }
    recordCloser(conn, exchange.stop);
    client.on('close', exchange.stop);
    this.attempt(exchange);
  }

  /** A request that failed before its response head: recorded, then answered here (a client that left: closed). */
  failed(err: unknown, res: ServerResponse, conn: ConnectionContext): void {
    const f = this.options.failures.failed(err, conn);
    if (f.result === 'client_abort') res.destroy();
    else refuseResponse(res, f, this.options.realm);
  }

  /**
   * One try of an exchange. A kept-alive upstream may have closed just as it was picked (a server that
   * closes after each response without saying so, like tinyproxy): such a failure, before any response
   * byte and before any body byte left, is tried once more on a new connection (upFailed). attempt, carry
   * and settle are public only for this module's listeners below; the HTTP listener calls forward and close.
   */
  attempt(exchange: Exchange): void {
    const target = exchange.target;
    const cancel = new DialCancel();
    exchange.cancel = cancel;
    const args: ForwardArgs = {
      agent: this.agent,
      method: exchange.req.method ?? 'GET',
      host: target.host,
      port: target.port,
      path: target.path,
      // node:http writes the head only at the first write, so the 'socket' handler can still choose the
      // request form and add the node's credentials once it knows which upstream carries the request.
      headers: exchange.headers,
      // The longest silence while the response is due: node arms it on the upstream socket when the request
      // gets it (and the agent's idle timeout again when the socket is freed); 'timeout' ends the request.
      timeout: this.options.responseTimeoutMs,
      rotorExchange: exchange,
    };
    const up = httpRequest(args) as TaggedRequest;
    up[EXCHANGE] = exchange;
    exchange.request = up;
    exchange.responded = false;
    up.on('timeout', upTimedOut);
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
    // Kept connections of this route to the exit just judged must not carry the retry.
    if (node !== undefined)
      for (const s of this.agent.freeSockets[exchange.key] ?? [])
        if ((s as TaggedSocket)[UPSTREAM]?.dialed.node.id === node.id) s.destroy();
    // A sticky session the rule moved has a new key (no node bound yet).
    exchange.key = this.keyFor(route, exchange.target, exchange.client);
    exchange.mayRetry = false;
    this.attempt(exchange);
    return true;
  }

  /** The request has its upstream connection: the record learns it, the head is completed and sent. */
  carry(exchange: Exchange, up: ClientRequest, upstream: Upstream): void {
    const conn = exchange.conn;
    upstream.client = exchange.client;
    exchange.upstream = upstream;
    exchange.upBase = upstream.stream.up;
    exchange.downBase = upstream.stream.down;
    recordNode(conn, upstream.dialed.node, upstream.dialed.exit);
    recordCarrying(conn, exchange, exchange.stop);
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

  private keyFor(route: Route, target: AbsoluteTarget, client: Socket): string {
    const user = route.user.name;
    if (route.instanceNo !== undefined) return `i|${user}|${route.instanceNo}|${target.host}:${target.port}`;
    const { productNo, region } = route.poolKey;
    if (route.sessionId !== undefined) {
      const where = `${productNo}|${region}|${target.host}:${target.port}`;
      const bound = this.options.router.boundNodeId(route);
      return bound === undefined ? `s|${user}|${route.sessionId}|${where}${UNBOUND}` : `s|${user}|${route.sessionId}|${bound}|${where}`;
    }
    let routes = this.clients.get(client);
    if (routes === undefined) {
      routes = new ClientRoutes(this.nextClientId++);
      this.clients.set(client, routes);
      client.once('close', () => this.dropClient(client));
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
    routes.keys.add(key);
    routes.last = { key, user, productNo, region, host: target.host, port: target.port };
    return key;
  }

  /** A client connection closed: its rotating routes' idle upstreams can never be picked again. */
  private dropClient(client: Socket): void {
    const routes = this.clients.get(client);
    if (!routes) return;
    for (const key of routes.keys) for (const s of this.agent.freeSockets[key] ?? []) s.destroy();
  }

  /** A new upstream connection for the agent: Router.dial, then metering attached for its whole life. */
  private async dial(args: ForwardArgs): Promise<Socket> {
    const router = this.options.router;
    const exchange = args.rotorExchange;
    const route = exchange.route;
    const user = route.user.name;
    // The agent asks for a connection inside httpRequest(), so exchange.cancel is the try's under way.
    const dialed = await router.dial(route, exchange.target, exchange.cancel!, 'forward', exchange.conn);
    const socket = dialed.socket as TaggedSocket;
    const metrics = this.options.metrics;
    const meters = router.meters;
    const stream = new MeteredStream(meters.meter(user), meters.limiter?.(user), metrics ? { metrics, user } : undefined);
    stream.pace(socket);
    const upstream: Upstream = {
      dialed,
      stream,
      auth: dialed.viaProxy ? basicAuth(dialed.node) : undefined,
      client: null,
      free: false,
    };
    socket[UPSTREAM] = upstream;
    socket.on('data', (chunk: Buffer) => {
      if (stream.received(chunk.length)) cut(upstream);
    });
    socket.on('end', upstreamEnded);
    socket.once('close', () => {
      this.settle(socket, upstream);
      dialed.release(stream.down === 0 && socket.errored ? 'reset' : undefined);
    });
    if (dialed.head) socket.unshift(dialed.head);
    // Dialers hand over paused sockets; the http client's own 'data' listener would not resume it.
    socket.resume();
    return socket;
  }
}

/** An upstream connection's reading ended: one the agent keeps idle is closed (RouteAgent.keepSocketAlive). */
function upstreamEnded(this: TaggedSocket): void {
  if (this[UPSTREAM]?.free) this.destroy();
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
      // A body pattern may fire: the head and the first body bytes wait (request-rules-body.ts).
      exchange.responded = true;
      holdBody(
        answer,
        verdict,
        (held, ended) => bodySeen(exchange, this, answer, held, ended),
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

/** A body rule's bytes are in hand: the rule fires (and may retry elsewhere), or the response goes on. */
function bodySeen(exchange: Exchange, up: TaggedRequest, answer: IncomingMessage, held: Buffer, ended: boolean): void {
  if (exchange.request !== up || exchange.client.destroyed) return;
  const rule = exchange.rules!.afterBody(answer.statusCode ?? 0, answer.rawHeaders, held);
  if (rule !== undefined && exchange.forwarder.ruleRetry(exchange, rule)) {
    answer.resume();
    up.destroy();
    return;
  }
  passResponse(exchange, answer, held, ended);
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

/**
 * The response goes to the client: its head, then `held` (body bytes a rule's body pattern looked at) and the
 * rest as it comes; `ended` = the held bytes are the whole body.
 */
function passResponse(exchange: Exchange, answer: IncomingMessage, held: Buffer | undefined, ended: boolean): void {
  exchange.responded = true;
  exchange.res.writeHead(answer.statusCode ?? 502, answer.statusMessage, forwardHeaders(answer.rawHeaders));
  (answer as TaggedAnswer)[EXCHANGE] = exchange;
  if (ended) {
    exchange.upstream?.stream.charge(held?.length ?? 0);
    exchange.res.end(held);
    answerEnded.call(answer as TaggedAnswer);
    return;
  }
  const pipe = streamResponse(answer, exchange.res, exchange.upstream?.stream);
  if (held !== undefined && held.length > 0) pipe.data(held);
  answer.on('end', answerEnded);
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
  clearTimeout(exchange.ruleTimer);
  exchange.client.off('close', exchange.stop);
  // Whatever ended the exchange without an answer or a failure said: the limit or the client leaving.
  if (exchange.upstream?.stream.exhausted) exchange.end('ok', 'limit');
  else if (exchange.client.destroyed) exchange.end('client_abort', 'the client went away');
}

function upFailed(this: TaggedRequest, err: Error): void {
  const exchange = this[EXCHANGE];
  if (exchange.request !== this || exchange.client.destroyed) return;
  if (exchange.mayRetry && this.reusedSocket && !exchange.responded && !exchange.bodyStarted && !exchange.cancel!.aborted) {
    exchange.mayRetry = false;
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
   * The body is all read: the kept-alive socket is the agent's again and must flow for the next response on it.
   * A drain of the client still due would not come (node emits none for a finished response), so the socket a
   * full client paused is resumed here, not there.
   */
  released(): void {
    this.close();
    if (this.socket.isPaused()) this.socket.resume();
  }

  protected override startSource(): void {
    if (this.answer.readableEnded) {
      // The body is all delivered (a wake after its end): the kept-alive socket is the agent's again and flows.
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
}

/**
 * The limit is reached: the client first, so that node:http's error answer for a response still due never
 * reaches a client being cut off, then the upstream.
 */
function cut(upstream: Upstream): void {
  upstream.client?.destroy();
  upstream.dialed.socket.destroy();
}
