// The SOCKS5 listener: RFC 1928 CONNECT with RFC 1929 user/password (the handshake is src/wire/socks5.ts),
// then Router.dial and the relay. Refusals follow docs/reference.md: wrong credentials or user-name options fail
// RFC 1929 (status 0x01); a user who may not go on (limit, instance not allowed) passes auth and gets reply
// 0x02 to the CONNECT, so the client can tell "who are you" from "you may not".
import { createServer, type Server, type Socket } from 'node:net';
import type { Logger } from '../telemetry/logger.ts';
import type { ConnectionResult, Metrics } from '../telemetry/metrics.ts';
import { REPLY, Socks5HandshakeError, acceptSocks5, writeReply, type AuthDecision, type HandshakeOptions } from '../wire/socks5.ts';
import { DialCancel } from './cancel.ts';
import { GatewayError } from './errors.ts';
import { holdClient } from './hold.ts';
import { logFailedAccepts } from '../errors/failed-accept.ts';
import { endBeforeRelay, ListenerConnections, openConnection, type FromUserPort } from './connections.ts';
import type { Authorization, Refusal, Route, Router } from './router.ts';
import { unrecordedConnections } from '../connlog/recorder.ts';
import type { UdpAssociations } from './udp-associate.ts';
import type { ConnectionContext, ConnectionRecorder, RecordResult } from '../connlog/types.ts';
import { boundPort, listenOn } from './listen.ts';

export interface Socks5ListenerOptions {
  router: Router;
  /** Default 127.0.0.1. */
  host?: string;
  /** 0 = any free port (read it from listen()'s result). */
  port: number;
  /** Whole handshake, greeting to CONNECT request. Default 10000 ms. */
  handshakeTimeoutMs?: number;
  /** Relay idle timeout. Default 300000 ms. */
  idleTimeoutMs?: number;
  metrics?: Metrics;
  logger?: Logger;
  /** The connection log (one context per connection: id, live list, record); default ids only. */
  recorder?: ConnectionRecorder;
  /** Admission without credentials (a user's own port: src/users/ports.ts UserPorts.admit); undefined = none. */
  anonymous?: (socket: Socket) => Authorization | undefined;
  /** Whether a socket came through a user's own port (its records say `user-port-socks5`). */
  fromUserPort?: FromUserPort;
  /** UDP ASSOCIATE (udp-associate.ts); absent = answered 0x07. */
  udp?: UdpAssociations;
}

type Decision = { route: Route } | { refusal: Refusal };

const LISTENER = 'socks5';

export class Socks5Listener {
  private readonly server: Server;
  private readonly conns = new ListenerConnections();
  private readonly handshakeTimeoutMs: number;
  private readonly idleTimeoutMs: number;
  private readonly recorder: ConnectionRecorder;
  /** The handshake's options, the same for every connection (a user's own port adds its noAuth per socket). */
  private readonly handshake: HandshakeOptions<Decision>;

  constructor(private readonly options: Socks5ListenerOptions) {
    this.recorder = options.recorder ?? unrecordedConnections();
    this.handshakeTimeoutMs = options.handshakeTimeoutMs ?? 10_000;
    this.idleTimeoutMs = options.idleTimeoutMs ?? 300_000;
    this.handshake = {
      timeoutMs: this.handshakeTimeoutMs,
      auth: 'password',
      // holdClient reads it next, in the continuation of the handshake's await (no I/O turn between).
      keepReading: true,
      udp: options.udp !== undefined,
    };
    this.server = createServer({ allowHalfOpen: true, pauseOnConnect: false }, (socket) => this.onConnection(socket));
    logFailedAccepts(this.server, 'proxy listener', options.logger);
  }

  /** Starts listening; resolves with the bound address. */
  listen(): Promise<{ host: string; port: number }> {
    return listenOn(this.server, this.options.port, this.options.host);
  }

  get port(): number {
    return boundPort(this.server);
  }

  /** Client connections open now. */
  get connections(): number {
    return this.conns.sockets.size;
  }

  /** Stops accepting; running connections get `drainMs` to finish, then are closed. */
  async close(drainMs = 0): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    await this.conns.drainThenClose(drainMs);
    await closed;
  }

  /** Serves a socket accepted elsewhere (a user's own port, src/users/handover.ts). */
  handleSocket(socket: Socket): void {
    this.onConnection(socket);
  }

  private count(result: ConnectionResult): void {
    this.options.metrics?.connectionsTotal.inc({ listener: LISTENER, result });
  }

  /** A connection that ends before any relay: counted (except a client abort) and recorded. */
  private refuse(conn: ConnectionContext, result: RecordResult, reason: string): void {
    endBeforeRelay(this.options.metrics, LISTENER, conn, result, reason);
  }

  private onConnection(socket: Socket): void {
    this.conns.accept(socket, LISTENER, this.options.metrics);
    const conn = openConnection(this.recorder, LISTENER, socket, this.options.fromUserPort);
    conn.closer = () => socket.destroy();
    this.handle(socket, conn).catch((err: unknown) => {
      // A defect, not a client or upstream failure: say so once and drop the connection, never the process.
      this.options.logger?.error({ listener: LISTENER, conn: conn.id, err }, 'socks5 connection failed unexpectedly');
      socket.destroy();
      conn.end({ result: 'upstream_error', reason: 'internal error' });
    });
  }

  private async handle(socket: Socket, conn: ConnectionContext): Promise<void> {
    const router = this.options.router;
    let request;
    try {
      // Per connection: the back-off needs the client's address (src/proxy/auth-guard.ts).
      const authenticate = (username: string, password: string): AuthDecision<Decision> | Promise<AuthDecision<Decision>> => {
        const a = router.authenticate(username, password, socket.remoteAddress);
        return a instanceof Promise ? a.then(decide) : decide(a);
      };
      request = await acceptSocks5<Decision>(
        socket,
        this.options.anonymous
          ? { ...this.handshake, authenticate, noAuth: () => decide(this.options.anonymous!(socket)) }
          : { ...this.handshake, authenticate },
      );
    } catch (err) {
      const code = err instanceof Socks5HandshakeError ? err.code : 'CLOSED';
      // A client offering no method we accept (e.g. only "no authentication") is refused for credentials.
      const result = code === 'AUTH_FAILED' || code === 'NO_ACCEPTABLE_METHOD' ? 'auth_failed' : 'bad_request';
      this.refuse(conn, result, err instanceof Error ? err.message : code);
      this.options.logger?.debug({ listener: LISTENER, conn: conn.id, code }, 'socks5 handshake failed');
      return;
    }
    const target = { host: request.host, port: request.port };
    conn.target = `${hostText(request.host)}:${request.port}`;
    const decision = request.context;
    if (!decision || 'refusal' in decision) {
      writeReply(socket, REPLY.notAllowed);
      const refusal = decision?.refusal;
      conn.user = refusal?.user ?? null;
      this.refuse(conn, refusal?.result ?? 'limited', refusal?.reason ?? 'not allowed');
      this.options.logger?.debug({ listener: LISTENER, conn: conn.id, reason: refusal?.reason }, 'socks5 connect refused');
      return;
    }
    const route = decision.route;
    const user = route.user.name;
    conn.user = user;
    conn.session = route.sessionId ?? null;
    if (request.command === 0x03 && this.options.udp) {
      await this.options.udp.serve(socket, request, route, conn);
      return;
    }
    const meters = router.meters;
    const abort = new DialCancel();
    const release = holdClient(socket, request.head, () => abort.abort());
    meters.connectionOpened(user);
    let dialed;
    try {
      dialed = await router.dial(route, target, abort, 'tunnel', conn);
    } catch (err) {
      release();
      meters.connectionClosed(user);
      if (!(err instanceof GatewayError)) {
        writeReply(socket, REPLY.generalFailure);
        this.refuse(conn, 'upstream_error', 'internal error');
        this.options.logger?.error({ listener: LISTENER, conn: conn.id, user, err }, 'socks5 dial failed unexpectedly');
        return;
      }
      // The client ended or failed mid-dial: close our side too. The listener is allowHalfOpen, so without
      // this a client that sent FIN after its request would leave the socket (and the gauge) open forever.
      if (err.code === 'DIAL_ABORTED') {
        socket.destroy();
        this.refuse(conn, 'client_abort', err.message);
        return;
      }
      writeReply(socket, err.socksReply);
      this.refuse(conn, err.connectionResult, err.upstreamReason ? `${err.message} (${err.upstreamReason})` : err.message);
      this.options.logger?.info(
        { listener: LISTENER, conn: conn.id, user, code: err.code, reason: err.upstreamReason },
        'socks5 connect failed',
      );
      return;
    }
    // Still flowing: the relay below takes the reading over in this same turn (no pause, no resume).
    const head = release(true);
    if (socket.destroyed || abort.aborted) {
      socket.destroy(); // half-open after the client's FIN: see DIAL_ABORTED above
      dialed.socket.destroy();
      dialed.release();
      meters.connectionClosed(user);
      conn.node = dialed.node.id;
      this.refuse(conn, 'client_abort', 'the client went away');
      return;
    }
    writeReply(socket, REPLY.succeeded);
    this.count('ok');
    this.conns.relay(socket, dialed, head, user, meters, { idleTimeoutMs: this.idleTimeoutMs, metrics: this.options.metrics }, conn);
  }
}

/** An admission without credentials as the handshake's decision (none or an auth refusal: no way in). */
function decide(a: Authorization | undefined): AuthDecision<Decision> {
  if (!a || (!a.ok && a.kind === 'auth')) return { ok: false };
  if (a.ok) return { ok: true, context: { route: a.route } };
  const { ok: _ok, ...refusal } = a;
  return { ok: true, context: { refusal } };
}

/** An IPv6 literal in brackets, so `host:port` stays readable. */
function hostText(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}
