// Plain-HTTP forwarding (absolute-URI requests) over kept-alive upstream connections.
//
// node:http's Agent does the keeping: which connection is free, whether a response left it reusable, the
// idle timeout (the upstream's Keep-Alive hint honoured), bounded free connections per key. Measured against
// a fresh upstream connection per request (the proxy-chain path this replaces) it is what lifts plain-HTTP
// forwarding (docs/benchmarks.md, M1). The agent never resolves or connects by itself: a new connection is
// Router.dial (mode 'forward': to an HTTP node the request goes in absolute form, through a SOCKS5 node a
// tunnel to the target carries it in origin form), and the agent's key is the route's, so a connection is
// only reused where a fresh dial would have been allowed to land:
//   - a sticky session: its user, session and the node the session is bound to now (a rotation or expiry
//     changes the key, so the old node's connections are never picked again);
//   - an instance route: its user and instance;
//   - a rotating user: its user and this client connection only ("every new client connection may leave
//     through a different upstream"); those idle connections are closed with the client connection.
// Every key also holds the target (a SOCKS5 node's connection is a tunnel to one target).
import { Agent, request as httpRequest, type ClientRequest, type ClientRequestArgs, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Counter } from 'prom-client';
import type { ConnectionContext } from '../connlog/types.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { DialCancel } from './cancel.ts';
import { basicAuth } from './dial-http.ts';
import { forwardHeaders, type AbsoluteTarget } from './http-message.ts';
import type { Dialed, Route, Router } from './router.ts';
import type { RelayLimiter, UserMeter } from './types.ts';

type CounterChild = ReturnType<Counter<'user' | 'direction'>['labels']>;

/** What each kept upstream connection carries: its dial, its user's meter, the client it serves now. */
interface Upstream {
  dialed: Dialed;
  meter: UserMeter;
  /** the user's rate (src/users/limiter.ts): request and response bodies take from it; undefined = none */
  limiter: RelayLimiter | undefined;
  /** the client connection of the exchange under way (cut with the upstream when the limit is reached) */
  client: Socket | null;
  /** up bytes already counted into the meter (body chunks, then the rest of bytesWritten per exchange) */
  upCounted: number;
  down: number;
  flushedUp: number;
  flushedDown: number;
  upCounter: CounterChild | undefined;
  downCounter: CounterChild | undefined;
}

const UPSTREAM = Symbol('rotor.upstream');
type TaggedSocket = Socket & { [UPSTREAM]?: Upstream };

/** Request options as the agent sees them: node:http copies unknown fields through to getName/createConnection. */
interface ForwardArgs extends ClientRequestArgs {
  rotorKey: string;
  rotorRoute: Route;
  rotorTarget: AbsoluteTarget;
  rotorCancel: DialCancel;
  /** the request's connection record: Router.dial notes its retries there */
  rotorTrace: ConnectionContext;
}

/** One client request across its tries. */
interface Exchange {
  /** a body byte went to an upstream: the request can no longer be tried again */
  bodyStarted: boolean;
  /** the client's Expect: 100-continue has been answered (or there was none) */
  continued: boolean;
  /** the request's connection record */
  conn: ConnectionContext;
  /** the kept upstream carrying it, and that upstream's counters when it started */
  upstream: Upstream | null;
  upBase: number;
  downBase: number;
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
  onForwarded: () => void;
}

function closeEndedFreeSocket(this: Socket): void {
  this.destroy();
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
    return (options as ForwardArgs).rotorKey;
  }

  /**
   * Upstream sockets are dialed allowHalfOpen (tunnels need half-close), so a server that closes after each
   * response without saying so (tinyproxy does) leaves a free socket whose reading has ended but which is
   * still writable: the next request was written into it and waited out its response timeout (3 s a request
   * in test/proxy/http-forwarding) before the retry. A free socket that ends is closed at once, which takes it
   * out of the pool; one that ended before it was freed is not kept.
   */
  override keepSocketAlive(socket: Socket): boolean {
    // Node's Agent reads this method's return value (a falsy one destroys the socket); @types/node says void.
    if (socket.readableEnded || !(super.keepSocketAlive(socket) as unknown as boolean)) return false;
    socket.once('end', closeEndedFreeSocket);
    return true;
  }

  override reuseSocket(socket: Socket, req: ClientRequest): void {
    socket.off('end', closeEndedFreeSocket);
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

/** One exchange's outcome as the listener answers it. */
export type ForwardFailure = (err: unknown, res: ServerResponse) => void;

export class Forwarder {
  private readonly agent: RouteAgent;
  /** Keys of rotating routes per client connection, so their idle upstreams close with it. */
  private readonly clientKeys = new WeakMap<Socket, Set<string>>();
  private readonly clientIds = new WeakMap<Socket, number>();
  private nextClientId = 1;

  constructor(private readonly options: ForwarderOptions) {
    this.agent = new RouteAgent((args) => this.dial(args), options.idleMs ?? 30_000, options.maxIdlePerKey ?? 8);
  }

  /** Closes every idle upstream connection (listener shutdown). */
  close(): void {
    this.agent.destroy();
  }

  /**
   * Forwards `req` for `route` to `target` and streams the answer into `res`. `onContinue` runs once an
   * upstream carries the request (the client's `Expect: 100-continue` is answered there); `fail` answers a
   * failure that happened before the response head.
   */
  forward(
    req: IncomingMessage,
    res: ServerResponse,
    route: Route,
    target: AbsoluteTarget,
    expectContinue: boolean,
    conn: ConnectionContext,
    fail: ForwardFailure,
  ): void {
    const client = req.socket;
    const key = this.keyFor(route, target, client);
    const headers = toHeaderObject(forwardHeaders(req.rawHeaders, { drop: DROP }), target.authority);
    const exchange: Exchange = { bodyStarted: false, continued: !expectContinue, conn, upBase: 0, downBase: 0, upstream: null };
    this.attempt(req, res, route, target, key, headers, exchange, fail, true);
  }

  /**
   * One try of an exchange. A kept-alive upstream may have closed just as it was picked (a server that
   * closes after each response without saying so, like tinyproxy): such a failure, before any response
   * byte and before any body byte left, is tried once more on a new connection.
   */
  private attempt(
    req: IncomingMessage,
    res: ServerResponse,
    route: Route,
    target: AbsoluteTarget,
    key: string,
    headers: Record<string, string | string[]>,
    exchange: Exchange,
    fail: ForwardFailure,
    mayRetry: boolean,
  ): void {
    const client = req.socket;
    const cancel = new DialCancel();
    const args: ForwardArgs = {
      agent: this.agent,
      method: req.method ?? 'GET',
      host: target.host,
      port: target.port,
      path: target.path,
      // node:http writes the head only at the first write, so the 'socket' handler below can still choose
      // the request form and add the node's credentials once it knows which upstream carries the request.
      headers,
      rotorKey: key,
      rotorRoute: route,
      rotorTarget: target,
      rotorCancel: cancel,
      rotorTrace: exchange.conn,
    };
    const up: ClientRequest = httpRequest(args);
    let responded = false;
    const onClientGone = (): void => {
      cancel.abort();
      up.destroy();
    };
    client.once('close', onClientGone);
    up.setTimeout(this.options.responseTimeoutMs, () => {
      up.destroy(Object.assign(new Error('upstream response timed out'), { code: 'ETIMEDOUT' }));
    });
    up.once('socket', (s: Socket) => {
      const upstream = (s as TaggedSocket)[UPSTREAM];
      if (!upstream) return;
      upstream.client = client;
      this.recordExchange(exchange, upstream, () => {
        client.destroy();
        up.destroy();
      });
      if (upstream.dialed.viaProxy) {
        up.path = target.absolute;
        const auth = basicAuth(upstream.dialed.node);
        if (auth) up.setHeader('Proxy-Authorization', auth);
      }
      // A sticky session without a node yet: this dial binds one, and the connection must not be kept
      // under the unbound key, where the session's next start (after expiry) would find it.
      if (key.endsWith(UNBOUND)) up.shouldKeepAlive = false;
      this.options.onForwarded();
      if (!exchange.continued) {
        exchange.continued = true;
        res.writeContinue();
      }
      this.pumpBody(req, up, upstream, exchange);
    });
    up.once('response', (answer: IncomingMessage) => {
      responded = true;
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, forwardHeaders(answer.rawHeaders));
      const upstream = (up.socket as TaggedSocket | null)?.[UPSTREAM];
      streamThrottled(answer, res, upstream?.limiter);
      answer.once('end', () => {
        if (upstream) this.settle(up.socket!, upstream);
        this.endExchange(exchange, 'ok', 'closed');
      });
    });
    up.once('close', () => {
      client.off('close', onClientGone);
      // Whatever ended the exchange without an answer or a failure said: the limit or the client leaving.
      if (exchange.upstream?.meter.exhausted) this.endExchange(exchange, 'ok', 'limit');
      else if (client.destroyed) this.endExchange(exchange, 'client_abort', 'the client went away');
    });
    up.on('error', (err) => {
      if (client.destroyed) return;
      if (mayRetry && up.reusedSocket && !responded && !exchange.bodyStarted && !cancel.aborted) {
        this.attempt(req, res, route, target, key, headers, exchange, fail, false);
        return;
      }
      if (res.headersSent) {
        client.destroy();
        this.endExchange(exchange, 'upstream_error', 'the upstream failed during the response');
      } else {
        fail(err, res);
      }
    });
  }

  /** The request's record learns its upstream and counts its own bytes from here on. */
  private recordExchange(exchange: Exchange, upstream: Upstream, closer: () => void): void {
    const conn = exchange.conn;
    exchange.upstream = upstream;
    exchange.upBase = upstream.upCounted;
    exchange.downBase = upstream.down;
    conn.node = upstream.dialed.node.id;
    conn.exit = upstream.dialed.node.host;
    conn.closer = closer;
    conn.bytes = {
      get up() {
        return upstream.upCounted - exchange.upBase;
      },
      get down() {
        return upstream.down - exchange.downBase;
      },
    };
  }

  private endExchange(exchange: Exchange, result: 'ok' | 'client_abort' | 'upstream_error', reason: string): void {
    const u = exchange.upstream;
    if (u) exchange.conn.end({ result, reason, up: u.upCounted - exchange.upBase, down: u.down - exchange.downBase });
    else exchange.conn.end({ result, reason });
  }

  /**
   * Client body → upstream, counted chunk by chunk into the user's meter and taken from the user's rate: the
   * client's body is paused while the upstream is full or the user is over its rate (both must clear).
   */
  private pumpBody(req: IncomingMessage, up: ClientRequest, upstream: Upstream, exchange: Exchange): void {
    const meter = upstream.meter;
    if (req.complete && req.readableLength === 0) {
      up.end();
      return;
    }
    const hold = new Hold(req, upstream.limiter);
    req.on('data', (chunk: Buffer) => {
      exchange.bodyStarted = true;
      upstream.upCounted += chunk.length;
      meter.add(chunk.length, 0);
      if (meter.exhausted) {
        cut(upstream);
        return;
      }
      if (!up.write(chunk)) hold.full();
      hold.take(chunk.length);
    });
    up.on('drain', hold.drained);
    req.once('end', () => up.end());
  }

  /** End of an exchange: the head and framing bytes written count too; the byte counters move. */
  private settle(socket: Socket, upstream: Upstream): void {
    const written = socket.bytesWritten - upstream.upCounted;
    if (written > 0) {
      upstream.upCounted += written;
      upstream.meter.add(written, 0);
    }
    upstream.client = null;
    const up = upstream.upCounted;
    if (upstream.upCounter && up > upstream.flushedUp) upstream.upCounter.inc(up - upstream.flushedUp);
    if (upstream.downCounter && upstream.down > upstream.flushedDown) upstream.downCounter.inc(upstream.down - upstream.flushedDown);
    upstream.flushedUp = up;
    upstream.flushedDown = upstream.down;
  }

  private keyFor(route: Route, target: AbsoluteTarget, client: Socket): string {
    const where = `${target.host}:${target.port}`;
    const user = route.user.name;
    if (route.instanceNo !== undefined) return `i|${user}|${route.instanceNo}|${where}`;
    const pool = `${route.poolKey.productNo}|${route.poolKey.region}`;
    if (route.sessionId !== undefined) {
      const bound = this.options.router.boundNodeId(route);
      return bound === undefined ? `s|${user}|${route.sessionId}|${pool}|${where}${UNBOUND}` : `s|${user}|${route.sessionId}|${bound}|${pool}|${where}`;
    }
    let id = this.clientIds.get(client);
    if (id === undefined) {
      id = this.nextClientId++;
      this.clientIds.set(client, id);
    }
    const key = `c|${id}|${user}|${pool}|${where}`;
    let keys = this.clientKeys.get(client);
    if (!keys) {
      keys = new Set();
      this.clientKeys.set(client, keys);
      client.once('close', () => this.dropClient(client));
    }
    keys.add(key);
    return key;
  }

  /** A client connection closed: its rotating routes' idle upstreams can never be picked again. */
  private dropClient(client: Socket): void {
    const keys = this.clientKeys.get(client);
    if (!keys) return;
    for (const key of keys) for (const s of this.agent.freeSockets[key] ?? []) s.destroy();
  }

  /** A new upstream connection for the agent: Router.dial, then metering attached for its whole life. */
  private async dial(args: ForwardArgs): Promise<Socket> {
    const router = this.options.router;
    const route = args.rotorRoute;
    const user = route.user.name;
    const dialed = await router.dial(route, args.rotorTarget, args.rotorCancel, 'forward', args.rotorTrace);
    const socket = dialed.socket as TaggedSocket;
    const metrics = this.options.metrics;
    const upstream: Upstream = {
      dialed,
      meter: router.meters.meter(user),
      limiter: router.meters.limiter?.(user),
      client: null,
      upCounted: 0,
      down: 0,
      flushedUp: 0,
      flushedDown: 0,
      upCounter: metrics?.bytesTotal.labels({ user, direction: 'up' }),
      downCounter: metrics?.bytesTotal.labels({ user, direction: 'down' }),
    };
    socket[UPSTREAM] = upstream;
    const meter = upstream.meter;
    socket.on('data', (chunk: Buffer) => {
      upstream.down += chunk.length;
      meter.add(0, chunk.length);
      if (meter.exhausted) cut(upstream);
    });
    socket.once('close', () => {
      this.settle(socket, upstream);
      dialed.release(upstream.down === 0 && socket.errored ? 'reset' : undefined);
    });
    if (dialed.head) socket.unshift(dialed.head);
    // Dialers hand over paused sockets; the http client's own 'data' listener would not resume it.
    socket.resume();
    return socket;
  }
}

/**
 * Pauses one body's source while its sink is full or its user is over the rate (backpressure, nothing
 * dropped: the chunk read is always written), and resumes it once both have cleared. One per body; per chunk
 * only a take() and a few flag operations (the wake and drain functions are made once, here).
 */
class Hold {
  private sinkFull = false;
  private overRate = false;

  constructor(
    private readonly source: IncomingMessage,
    private readonly limiter: RelayLimiter | undefined,
  ) {}

  full(): void {
    this.sinkFull = true;
    this.source.pause();
  }

  take(bytes: number): void {
    // Every chunk is taken (counted), even one that arrived while already paused; one wait at a time.
    if (this.limiter === undefined || this.limiter.take(bytes) || this.overRate) return;
    this.overRate = true;
    this.source.pause();
    this.limiter.wait(this.wake);
  }

  readonly drained = (): void => {
    this.sinkFull = false;
    if (!this.overRate) this.source.resume();
  };

  private readonly wake = (): void => {
    this.overRate = false;
    if (!this.sinkFull) this.source.resume();
  };
}

/**
 * Response body → client like `answer.pipe(res)`, with the user's rate on top (Hold). Without a limiter it
 * is the pipe itself.
 */
function streamThrottled(answer: IncomingMessage, res: ServerResponse, limiter: RelayLimiter | undefined): void {
  if (limiter === undefined) {
    answer.pipe(res);
    return;
  }
  const hold = new Hold(answer, limiter);
  answer.on('data', (chunk: Buffer) => {
    if (!res.write(chunk)) hold.full();
    hold.take(chunk.length);
  });
  res.on('drain', hold.drained);
  answer.once('end', () => res.end());
}

/**
 * The limit is reached: the client first, so that node:http's error answer for a response still due never
 * reaches a client being cut off, then the upstream.
 */
function cut(upstream: Upstream): void {
  upstream.client?.destroy();
  upstream.dialed.socket.destroy();
}

/** A flat header list as the object node:http's request takes (repeated fields as arrays), Host first. */
function toHeaderObject(list: string[], authority: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = { Host: authority };
  for (let i = 0; i < list.length; i += 2) {
    const name = list[i]!;
    const value = list[i + 1]!;
    const had = out[name];
    if (had === undefined) out[name] = value;
    else if (Array.isArray(had)) had.push(value);
    else out[name] = [had, value];
  }
  return out;
}
