// The HTTP proxy listener, a protocol adapter on node:http's server: one Basic parser, one refusal writer
// (http-message.ts); admission, dial, relay and the connection record are the tunnel pipeline's (tunnel.ts)
// for CONNECT tunnels, Upgrade tunnels and absolute-URI requests alike.
//   - CONNECT ('connect' event): credentials, then the pipeline (200 only once the upstream tunnel is up).
//   - Absolute-URI requests ('request', and 'checkContinue' so that `Expect: 100-continue` is answered only
//     once the client is authenticated, admitted and an upstream carries the request): forwarded over
//     kept-alive upstream connections (http-forward.ts). Answers go through node's ServerResponse, so on a
//     pipelined connection a refusal waits its turn behind the responses still due.
//   - Absolute-URI requests with `Upgrade` (WebSocket, 'upgrade' event): dialed like a forward, the request
//     head written by us with Upgrade kept, then relayed as a tunnel (the upstream's 101 passes through).
// A connection opens and closes in one place (onConnection); handleSocket() serves a socket accepted
// elsewhere (a port that sniffs the protocol first, the HTTPS listener).
// A connection whose first bytes are a whole, plain CONNECT head (connect-head.ts) is served
// without node's parser: node would build a parser, an IncomingMessage and a set of listeners for it only to
// drop them at once. Every other first chunk is put back and node's server reads the connection as before.
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { LiveList, type Listed } from '../connlog/live-list.ts';
import { InternalError } from '../errors/rotor-error.ts';
import { slotIf, slotOf } from '../wire/socket-slot.ts';
import { readConnectHead } from './connect-head.ts';
import { holdClient } from './hold.ts';
import { Lane } from './http-lane.ts';
import {
  forwardHeaders,
  parseAbsoluteTarget,
  parseBasic,
  parseConnectTarget,
  refuseResponse,
  refuseSocket,
  requestHead,
  type AbsoluteTarget,
} from './http-message.ts';
import { onServerError } from './connections.ts';
import type { Authorization, Router } from './router.ts';
import type { RelayAttachment, RelayLimiter, Target } from './types.ts';
import type { ConnectionContext, ConnectionRecorder } from '../connlog/types.ts';
import { ProxyListener } from './proxy-listener.ts';
import { descriptorGuard } from './accept-guard.ts';
import { pipelineOptions, TunnelDial, TunnelPipeline, type Admission } from './tunnel.ts';
import { recordTarget, type FromUserPort } from './tunnel-record.ts';

export { parseBasic, parseConnectTarget } from './http-message.ts';

export interface HttpListenerOptions {
  router: Router;
  /** Default 127.0.0.1. */
  host?: string;
  /** 0 = any free port (read it from listen()'s result). */
  port: number;
  /** Bounds what the kernel holds unsent for each client (config proxy.clientUnsentBytes); default the kernel's. */
  limitUnsent?: ((socket: Socket) => void) | undefined;
  /** CONNECT tunnel idle timeout. Default 300000 ms. */
  idleTimeoutMs?: number;
  /**
   * Bound on a new connection's first request head (config proxy.handshakeTimeoutMs). Default 10000 ms.
   * Node's own headersTimeout is only checked every 30 s, so a silent or trickling client needs this.
   */
  handshakeTimeoutMs?: number;
  /** Plain-HTTP forwarding: longest silence from the upstream while a response is due. Default 60000 ms. */
  responseTimeoutMs?: number;
  /** Plain-HTTP forwarding: idle kept-alive upstream connections close after this. Default 30000 ms. */
  upstreamIdleMs?: number;
  /**
   * Plain HTTP: requests a client connection may have waiting behind the one in flight (config
   * proxy.pipelineDepth); past it the connection is answered 503 and closed. Default 16.
   */
  pipelineDepth?: number;
  /** Realm of Proxy-Authenticate. Default 'rotor'. */
  realm?: string;
  metrics?: Metrics;
  logger?: Logger;
  /** The connection log (one context per CONNECT, Upgrade or forwarded request); default ids only. */
  recorder?: ConnectionRecorder;
  /** Admission without credentials (a user's own port: src/users/ports.ts UserPorts.admit); undefined = none. */
  anonymous?: (socket: Socket) => Authorization | undefined;
  /** Whether a socket came through a user's own port (its records say `user-port-http`). */
  fromUserPort?: FromUserPort;
}

const LISTENER = 'http';
/** Distinct Proxy-Authorization values whose parse is kept; on overflow the cache starts over. */
const PARSED_AUTH_MAX = 1024;

/**
 * A client connection's own state in the listener, kept in its socket's slot: in the handshake deadline's
 * list until its first request head (or the deadline, or its close), and the user counted open on it. Found
 * through the socket, so neither needs a table keyed by sockets (a WeakSet or WeakMap insert per connection).
 */
interface Accepted extends Listed<Accepted> {
  readonly socket: Socket;
  readonly at: number;
  readonly listener: HttpListener;
  /** Plain HTTP: the user counted active on the connection (tunnels count per dial). */
  counted: CountedClient | undefined;
  /** No byte read yet (the CONNECT fast path waits for the first): closed at once when the listener closes. */
  silent: boolean;
}

/** The socket's Accepted: its slot's field (wire/socket-slot.ts), not a property of its own. */
function acceptedOf(socket: Socket): Accepted | undefined {
  return slotIf(socket)?.accepted as Accepted | undefined;
}

/** A socket's first bytes, for the CONNECT fast path (one function for all; `this` is the socket). */
function onFirstData(this: Socket, chunk: Buffer): void {
  this.removeListener('data', onFirstData);
  this.removeListener('end', onEndBeforeData);
  const entry = acceptedOf(this)!;
  entry.silent = false;
  entry.listener.firstData(this, chunk);
}

/** The client sent its FIN before any byte: closed, as node's server closes a connection ended without a request. */
function onEndBeforeData(this: Socket): void {
  this.removeListener('data', onFirstData);
  this.removeListener('end', onEndBeforeData);
  acceptedOf(this)!.silent = false;
  this.end();
}

/** Every accepted socket's 'close' listener (one function for all; `this` is the socket). */
function onAcceptedClose(this: Socket): void {
  const entry = acceptedOf(this);
  if (entry !== undefined) entry.listener.closed(entry);
}

/** A plain-HTTP client connection counted open for a user (and stopped by the user's disable or delete). */
interface CountedClient {
  user: string;
  limiter: RelayLimiter | undefined;
  /** Its place in the limiter's running relays (set right after it is made, when the user has a limiter). */
  attached: RelayAttachment | undefined;
  stop(): void;
}

export class HttpListener extends ProxyListener {
  protected readonly server: HttpServer;
  protected readonly pipeline: TunnelPipeline;
  private readonly realm: string;
  private readonly handshakeMs: number;
  private readonly pipelineDepth: number;
  /** Proxy-Authorization values parsed (null: not Basic), bounded: see credentials(). */
  private readonly parsedAuth = new Map<string, { username: string; password: string } | null>();
  /**
   * Connections under the handshake deadline (no request head yet), with when each was accepted: one sweep timer
   * checks them (it runs while any is here), not a timer per connection. A silent client is closed at the
   * deadline or at most one tick (min(1 s, a quarter of the deadline)) after it; a first request head takes its
   * connection out (started()). A live list, not a Map (src/connlog/live-list.ts says why).
   */
  private readonly accepted = new LiveList<Accepted>();
  private deadlineSweep: NodeJS.Timeout | undefined;
  /** node:http's own 'connection' listener (its parser's setup), called for every connection not served by the fast path. */
  private readonly nodeConnection: (socket: Socket) => void;

  constructor(private readonly options: HttpListenerOptions) {
    super(options);
    this.realm = options.realm ?? 'rotor';
    this.pipeline = new TunnelPipeline(
      pipelineOptions(LISTENER, options, {
        responseTimeoutMs: options.responseTimeoutMs ?? 60_000,
        upstreamIdleMs: options.upstreamIdleMs,
        realm: options.realm ?? 'rotor',
      }),
    );
    this.handshakeMs = options.handshakeTimeoutMs ?? 10_000;
    this.pipelineDepth = options.pipelineDepth ?? 16;
    // requestTimeout off: a proxied upload may rightly take longer than node's 5 minutes; the handshake
    // deadline bounds a silent client's first head, the response timeout and relay idle bound the rest.
    // noDelay false (node's default is true: a setsockopt per accepted socket): the listening socket carries
    // TCP_NODELAY (no-delay.ts) and Linux copies it into each accepted socket; ListenerConnections.accept sets it
    // on any socket that did not come that way.
    this.server = createServer({ noDelay: false, headersTimeout: this.handshakeMs, requestTimeout: 0 });
    this.server.on('error', (err) => onServerError(this.server.listening, err, options.logger));
    descriptorGuard.watch(this.server);
    // node:http's 'connection' listener is taken off the server and called only for connections the CONNECT
    // fast path does not serve (firstData).
    const own = this.server.listeners('connection');
    if (own.length !== 1) throw new InternalError(`node:http server with ${own.length} 'connection' listeners, expected its own one`);
    this.nodeConnection = own[0] as (socket: Socket) => void;
    this.server.removeListener('connection', this.nodeConnection);
    this.server.on('connection', (socket: Socket) => this.readFirstChunk(socket));
    this.server.on('request', (req: IncomingMessage, res: ServerResponse) => this.onRequest(req, res, false));
    this.server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => this.onRequest(req, res, true));
    this.server.on('connect', (req: IncomingMessage, socket: Socket, head: Buffer) =>
      this.tunnel(req, req.url, req.headers['proxy-authorization'], socket, head, 'connect'),
    );
    this.server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) =>
      this.tunnel(req, req.url, req.headers['proxy-authorization'], socket, head, 'upgrade'),
    );
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
      // A malformed request: 400 as node would, but counted. A timed-out or reset client gets nothing.
      if (err.code === 'ECONNRESET' || err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
        socket.destroy();
        return;
      }
      this.pipeline.count('bad_request');
      if (socket.writable) refuseSocket(socket, { status: 400, reason: 'malformed request' }, this.realm);
      else socket.destroy();
    });
  }

  /**
   * Serves a client socket accepted elsewhere (a user's own port after its first byte, the HTTPS listener once
   * TLS is up): bytes already read from it must be put back with `socket.unshift()` first. Its first chunk takes
   * the CONNECT fast path as on this listener's own port.
   */
  handleSocket(socket: Socket): void {
    this.readFirstChunk(socket);
    // A socket accepted paused (pauseOnConnect) or paused by the sniffer must flow to deliver its first chunk.
    socket.resume();
  }

  /** A new connection: registered, its first chunk awaited by onFirstData (firstData). */
  private readFirstChunk(socket: Socket): void {
    this.onConnection(socket).silent = true;
    socket.on('data', onFirstData);
    socket.on('end', onEndBeforeData);
  }

  /**
   * A connection's first bytes (onFirstData): a whole, plain CONNECT head is served here; any other chunk is put
   * back and the connection goes to node's server, which reads it from the start.
   */
  firstData(socket: Socket, chunk: Buffer): void {
    const head = readConnectHead(chunk);
    if (head === undefined) {
      // Paused so the chunk waits for node's parser; resumed once the parser listens.
      socket.pause();
      socket.unshift(chunk);
      this.nodeConnection.call(this.server, socket);
      socket.resume();
      return;
    }
    // As node's server leaves a socket it hands over for CONNECT: neither flowing nor paused, so bytes the client
    // sends before the relay starts wait in the socket (flowing with no listener would drop them).
    (socket as { readableFlowing: boolean | null }).readableFlowing = null;
    const rest = head.end === chunk.length ? EMPTY : chunk.subarray(head.end);
    this.tunnel(null, head.target, head.authorization, socket, rest, 'connect');
  }

  /** Stops accepting; running connections get `drainMs` to finish, then are closed. */
  async close(drainMs = 0): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    // Connections that sent nothing yet, as node's closeIdleConnections closes those it reads.
    for (let e = this.accepted.first; e !== null; e = e.nextLive) if (e.silent) e.socket.destroy();
    await this.pipeline.drainThenClose(drainMs);
    await closed;
  }

  /** Where a client connection opens and closes: the registry, the gauge, the handshake deadline. */
  private onConnection(socket: Socket): Accepted {
    const entry: Accepted = {
      socket,
      at: performance.now(),
      listener: this,
      counted: undefined,
      silent: false,
      prevLive: null,
      nextLive: null,
    };
    slotOf(socket).accepted = entry;
    this.accepted.add(entry);
    if (this.deadlineSweep === undefined) {
      this.deadlineSweep = setInterval(sweepDeadlines, Math.max(5, Math.min(1000, Math.floor(this.handshakeMs / 4))), this);
      this.deadlineSweep.unref();
    }
    this.pipeline.accept(socket);
    // The listener's own 'close' listener, after the registry's: nothing below calls the listener back.
    socket.on('close', onAcceptedClose);
    return entry;
  }

  /** A client connection closed (onAcceptedClose). */
  closed(entry: Accepted): void {
    this.accepted.remove(entry);
    this.uncount(entry);
  }

  /** The connection's first request head arrived (any later one finds it out already): no deadline from here. */
  private started(socket: Socket): Accepted {
    const entry = acceptedOf(socket)!;
    this.accepted.remove(entry);
    return entry;
  }

  /** The handshake deadline's sweep: a connection past it without a request head is closed. */
  sweepDeadlines(): void {
    const due = performance.now() - this.handshakeMs;
    // Oldest first: stop at the first one still within its deadline.
    for (let e = this.accepted.first; e !== null && e.at <= due; e = this.accepted.first) {
      this.accepted.remove(e);
      e.socket.destroy();
    }
    if (this.accepted.size === 0) {
      clearInterval(this.deadlineSweep);
      this.deadlineSweep = undefined;
    }
  }

  /** Credentials and admission, the same for every kind of request (the pipeline's; a Promise when checked off the loop). */
  private admit(authorization: string | undefined, socket: Socket): Admission | Promise<Admission> {
    const credentials = this.credentials(authorization);
    return credentials ? this.pipeline.admit(credentials, socket) : this.pipeline.admitAnonymous(socket);
  }

  /**
   * Basic credentials of a Proxy-Authorization value. A plain-HTTP client sends the same value on every
   * request of its connection: the parse (a regex and a base64 decode) runs once per distinct value here.
   */
  private credentials(header: string | undefined): ReturnType<typeof parseBasic> {
    if (header === undefined) return undefined;
    let hit = this.parsedAuth.get(header);
    if (hit === undefined) {
      hit = parseBasic(header) ?? null;
      if (this.parsedAuth.size >= PARSED_AUTH_MAX) this.parsedAuth.clear();
      this.parsedAuth.set(header, hit);
    }
    return hit ?? undefined;
  }

  /** A plain-HTTP request arrived: started now, or queued behind the one in flight (http-lane.ts). */
  private onRequest(req: IncomingMessage, res: ServerResponse, expectContinue: boolean): void {
    const client = req.socket;
    this.started(client);
    const arrival = Lane.of(client).arrive(req, res, expectContinue, this.pipelineDepth);
    if (arrival === 'start') this.startInLane(req, res, expectContinue);
    else if (arrival === 'overflow') {
      const conn = this.pipeline.open(client);
      const reason = `more than ${this.pipelineDepth} pipelined requests waiting`;
      this.pipeline.refused(conn, 'limited', reason);
      refuseResponse(res, { status: 503, reason }, this.realm);
    }
  }

  /** Starts a request that holds its connection's lane; when its response closes, the next waiting one starts. */
  private startInLane(req: IncomingMessage, res: ServerResponse, expectContinue: boolean): void {
    res.on('close', this.responseClosed);
    this.startRequest(req, res, expectContinue);
  }

  /** The 'close' listener of every response that holds a lane (one function per listener; `this` is the response). */
  private readonly responseClosed = ((listener: HttpListener) =>
    function (this: ServerResponse): void {
      const next = Lane.done(this);
      if (next !== undefined) listener.startInLane(next.req, next.res, next.expectContinue);
    })(this);

  /** One plain-HTTP request, its turn come: admitted, then forwarded or refused. */
  private startRequest(req: IncomingMessage, res: ServerResponse, expectContinue: boolean): void {
    const client = req.socket;
    // Each forwarded request is one connection of the log (its upstream connection may be a kept one).
    // Its closer is set by the forwarder (Exchange.stop); a refusal ends the record before anyone could use one.
    const conn = this.pipeline.open(client);
    const target = parseAbsoluteTarget(req.url);
    if (!target) {
      const reason = 'a proxy request needs an absolute http:// URI (or CONNECT)';
      this.pipeline.refused(conn, 'bad_request', reason);
      refuseResponse(res, { status: 400, reason }, this.realm);
      return;
    }
    recordTarget(conn, target);
    // A connection already counted gives its slot back before admission reserves one for this request and
    // counting it open takes it again: every request is admitted against the user's maxConnections, yet a
    // kept-alive connection holds one slot however many requests it carries (a reservation left unopened
    // here would lock the user out for the reservation's lifetime).
    const entry = acceptedOf(client)!;
    const counted = entry.counted;
    if (counted !== undefined) this.options.router.meters.connectionClosed(counted.user);
    const pending = this.admit(req.headers['proxy-authorization'], client);
    if (pending instanceof Promise) {
      // The password is being checked: the request waits (node's parser holds the next one meanwhile). The
      // connection's registration goes now (its slot was given back above), so a close meanwhile counts nothing twice.
      if (counted !== undefined) this.forget(entry, counted);
      pending.then(
        (a) => this.onAdmitted(req, res, expectContinue, conn, target, undefined, a),
        (err: unknown) => this.pipeline.forwardFailed(err, res, conn),
      );
      return;
    }
    this.onAdmitted(req, res, expectContinue, conn, target, counted, pending);
  }

  /** startRequest once the client's credentials are decided. */
  private onAdmitted(
    req: IncomingMessage,
    res: ServerResponse,
    expectContinue: boolean,
    conn: ConnectionContext,
    target: AbsoluteTarget,
    counted: CountedClient | undefined,
    admission: Admission,
  ): void {
    const client = req.socket;
    if (client.destroyed) {
      this.pipeline.refused(conn, 'client_abort', 'the client went away');
      return;
    }
    const entry = acceptedOf(client)!;
    const route = this.pipeline.admitted(conn, admission);
    if (route === undefined) {
      if (counted !== undefined) this.forget(entry, counted);
      if ('refusal' in admission) refuseResponse(res, admission.refusal, this.realm);
      return;
    }
    this.countOpen(entry, route.user.name, counted);
    this.pipeline.forward(req, res, route, target, expectContinue, conn);
  }

  /**
   * Counts the client connection open for `user` and registers it with the user's limiter, so disable and
   * delete close it like a tunnel (the rate itself is taken per body chunk in http-forward.ts).
   */
  private countOpen(entry: Accepted, user: string, previous: CountedClient | undefined): void {
    const meters = this.options.router.meters;
    meters.connectionOpened(user);
    const limiter = meters.limiter?.(user);
    // The same user again on a kept-alive connection (the usual case): its registration stands as it is.
    if (previous !== undefined && previous.user === user && previous.limiter === limiter) return;
    if (previous !== undefined) previous.attached?.detach();
    const client = entry.socket;
    const counted: CountedClient = { user, limiter, attached: undefined, stop: () => client.destroy() };
    if (limiter) counted.attached = limiter.attach(counted);
    entry.counted = counted;
  }

  /** Drops a client connection's registration whose slot was already given back. */
  private forget(entry: Accepted, counted: CountedClient): void {
    entry.counted = undefined;
    counted.attached?.detach();
  }

  private uncount(entry: Accepted): void {
    const counted = entry.counted;
    if (counted === undefined) return;
    this.forget(entry, counted);
    this.options.router.meters.connectionClosed(counted.user);
  }

  /**
   * CONNECT, or an absolute-URI request with Upgrade: the socket is ours from here. A login verified before is
   * admitted and dialed in this turn; only a password being checked waits (admitLater). `req` is null for a
   * CONNECT read by the fast path (firstData).
   */
  private tunnel(
    req: IncomingMessage | null,
    url: string | undefined,
    authorization: string | undefined,
    socket: Socket,
    head: Buffer,
    kind: 'connect' | 'upgrade',
  ): void {
    if (Lane.busy(socket)) {
      // Pipelined behind requests still being answered: its bytes would interleave with theirs (and node has
      // already detached the connection from the responses' flow control). Such a client is broken or hostile.
      this.started(socket);
      this.pipeline.refused(this.pipeline.open(socket), 'bad_request', 'CONNECT or Upgrade pipelined behind plain-HTTP requests');
      socket.destroy();
      return;
    }
    // The record's closer is the socket itself (destroyed): no closure per tunnel.
    const conn = this.pipeline.open(socket, socket);
    try {
      // No 'error' listener of its own: ListenerConnections.accept's guard is on every accepted socket.
      const entry = this.started(socket);
      let target: Target | undefined;
      let absolute: ReturnType<typeof parseAbsoluteTarget>;
      if (kind === 'connect') target = parseConnectTarget(url);
      else target = absolute = parseAbsoluteTarget(url);
      if (!target) {
        const reason =
          kind === 'connect' ? 'CONNECT target must be host:port' : 'an Upgrade request needs an absolute http:// or ws:// URI';
        this.pipeline.refused(conn, 'bad_request', reason);
        refuseSocket(socket, { status: 400, reason }, this.realm);
        return;
      }
      recordTarget(conn, target);
      // An Upgrade on a kept-alive connection that carried forwarded requests: from here the relay counts it.
      this.uncount(entry);
      const admission = this.admit(authorization, socket);
      if (admission instanceof Promise) {
        this.admitLater(req, socket, head, conn, target, absolute, admission).catch((err: unknown) =>
          this.pipeline.defect(socket, conn, err),
        );
        return;
      }
      this.dial(req, socket, head, conn, target, absolute, admission);
    } catch (err) {
      this.pipeline.defect(socket, conn, err);
    }
  }

  /** The password is being checked: the client is read meanwhile (its FIN, any early bytes). */
  private async admitLater(
    req: IncomingMessage | null,
    socket: Socket,
    head: Buffer,
    conn: ConnectionContext,
    target: Target,
    absolute: AbsoluteTarget | undefined,
    pending: Promise<Admission>,
  ): Promise<void> {
    let gone = false;
    const release = holdClient(socket, head, () => (gone = true));
    const admission = await pending;
    head = release() ?? Buffer.alloc(0);
    if (gone || socket.destroyed) {
      socket.destroy();
      this.pipeline.refused(conn, 'client_abort', 'the client went away');
      return;
    }
    this.dial(req, socket, head, conn, target, absolute, admission);
  }

  /** An admitted tunnel's dial: its end is answered by onDialed (CONNECT) or an Upgrade's own reaction. */
  private dial(
    req: IncomingMessage | null,
    socket: Socket,
    head: Buffer,
    conn: ConnectionContext,
    target: Target,
    absolute: AbsoluteTarget | undefined,
    admission: Admission,
  ): void {
    const route = this.pipeline.admitted(conn, admission);
    if (route === undefined) {
      if ('refusal' in admission) refuseSocket(socket, admission.refusal, this.realm);
      return;
    }
    // An Upgrade goes through a tunnel to the target (CONNECT to an HTTP node): HTTP proxies commonly drop
    // Upgrade on forwarded requests, and a tunnel carries whatever protocol the 101 switches to. Its request
    // head goes first as client data of the relay, metered like every later byte (quota, rate, the record's
    // bytesUp, the rollups), as a forwarded request's head is (http-forward.ts settle).
    const upgrade = absolute === undefined || req === null ? null : upgradeHead(req, absolute);
    const clientHead = upgrade === null ? (head.length > 0 ? head : null) : head.length > 0 ? Buffer.concat([upgrade, head]) : upgrade;
    const up = this.pipeline.connect(socket, conn, route, target, clientHead);
    if (up === undefined) return;
    if (!(up instanceof TunnelDial)) {
      refuseSocket(socket, up, this.realm);
      return;
    }
    up.whenEnded(upgrade === null ? this.onDialed : this.onUpgradeDialed);
  }

  /** A CONNECT's dial ended (one function of the listener for all its tunnels). */
  private readonly onDialed = (dial: TunnelDial): void => this.answer(dial, false);
  /** An Upgrade's dial ended: its request head is the relay's first client data. */
  private readonly onUpgradeDialed = (dial: TunnelDial): void => this.answer(dial, true);

  /** A tunnel's dial ended: the client answered (200; an Upgrade's answer is the target's) and the relay started. */
  private answer(dial: TunnelDial, upgrade: boolean): void {
    const { client, conn } = dial;
    try {
      const up = this.pipeline.connected(dial);
      if (up === undefined) return;
      if (!('dialed' in up)) {
        refuseSocket(client, up, this.realm);
        return;
      }
      if (!upgrade) client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      this.pipeline.carry(client, up, dial.route, conn);
    } catch (err) {
      this.pipeline.defect(client, conn, err);
    }
  }
}

/**
 * An Upgrade's request as it goes on through the tunnel: as received, hop-by-hop fields removed, Upgrade kept.
 * Latin-1, as node read the header bytes (and writes a forwarded request's head): each byte goes on as it came.
 */
function upgradeHead(req: IncomingMessage, absolute: AbsoluteTarget): Buffer {
  const headers = forwardHeaders(req.rawHeaders, { keepUpgrade: true, drop: HOST });
  headers.unshift('Host', absolute.authority);
  return Buffer.from(requestHead(req.method ?? 'GET', absolute.path, headers), 'latin1');
}

const HOST = new Set(['host']);
const EMPTY = Buffer.alloc(0);

function sweepDeadlines(listener: HttpListener): void {
  listener.sweepDeadlines();
}
