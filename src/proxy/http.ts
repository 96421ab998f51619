// The HTTP proxy listener, on proxy-chain's Server.
//
// The split, and why: proxy-chain parses requests, checks Basic proxy credentials through
// prepareRequestFunction, answers 407 with Proxy-Authenticate, cleans hop-by-hop headers and forwards
// absolute-URI requests (forward()); we keep it for all of that. Its CONNECT path cannot meet the contract:
// its dialers set no upstream connect timeout, cannot retry on another node, and `customConnectServer`
// answers 200 before anything is dialed, so a dead upstream could never become a 502/504. So the http.Server's
// 'connect' event (which proxy-chain registers) is taken over here: credentials, Router.dial (retries,
// deadlines), then 200 only once the upstream tunnel is up, and our relay (meter, idle timeout).
// Plain-HTTP requests stay on proxy-chain but never let it dial: prepareRequestFunction runs per request,
// dials through Router.dial itself (mode 'forward': to an HTTP node the request goes in absolute form; through
// a SOCKS5 node a tunnel to the target is opened) and hands the ready socket to forward() with a one-shot
// http.Agent. A refusal or a failed dial becomes a customResponseFunction (403, 502, 503, 504).
import { Agent, type IncomingMessage, type Server as HttpServer } from 'node:http';
import type { Socket } from 'node:net';
import { Server, type PrepareRequestFunctionOpts, type PrepareRequestFunctionResult } from 'proxy-chain';
import type { Logger } from '../telemetry/logger.ts';
import type { ConnectionResult, Metrics } from '../telemetry/metrics.ts';
import { DialCancel } from './cancel.ts';
import { GatewayError } from './errors.ts';
import { holdClient } from './hold.ts';
import { ListenerConnections, onServerError } from './connections.ts';
import type { Authorization, Dialed, Route, Router } from './router.ts';
import type { Target } from './types.ts';
import { unrecordedConnections } from '../connlog/recorder.ts';
import type { ConnectionContext, ConnectionRecorder, RecordResult } from '../connlog/types.ts';

export interface HttpListenerOptions {
  router: Router;
  /** Default 127.0.0.1. */
  host?: string;
  /** 0 = any free port (read it from listen()'s result). */
  port: number;
  /** CONNECT tunnel idle timeout. Default 300000 ms. */
  idleTimeoutMs?: number;
  /**
   * Bound on a new connection's first request head (config proxy.handshakeTimeoutMs). Default 10000 ms.
   * Node's own headersTimeout is only checked every 30 s, so a silent or trickling client needs this.
   */
  handshakeTimeoutMs?: number;
  /** Plain-HTTP forwarding: longest silence from the upstream while a response is due. Default 60000 ms. */
  responseTimeoutMs?: number;
  /** Realm of Proxy-Authenticate. Default 'rotor'. */
  realm?: string;
  metrics?: Metrics;
  logger?: Logger;
  /** The connection log (one context per CONNECT or forwarded request); default ids only. */
  recorder?: ConnectionRecorder;
  /** Admission without credentials (a user's own port: src/users/ports.ts UserPorts.admit); undefined = none. */
  anonymous?: (socket: Socket) => Authorization | undefined;
}

const LISTENER = 'http';

function noop(): void {}

/** Parses `host:port` / `[v6]:port` of a CONNECT request line. */
export function parseConnectTarget(url: string | undefined): Target | undefined {
  if (!url) return undefined;
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9._-]+)):(\d{1,5})$/.exec(url);
  if (!m) return undefined;
  const port = Number(m[3]);
  if (port < 1 || port > 65535) return undefined;
  return { host: (m[1] ?? m[2])!, port };
}

/** Basic credentials of a Proxy-Authorization header; undefined when absent or not Basic. */
export function parseBasic(header: string | undefined): { username: string; password: string } | undefined {
  if (!header) return undefined;
  const m = /^\s*basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
  if (!m) return undefined;
  const text = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = text.indexOf(':');
  if (colon < 0) return { username: text, password: '' };
  return { username: text.slice(0, colon), password: text.slice(colon + 1) };
}

/**
 * An http.Agent that hands out one already-connected socket (our dialed upstream) and never pools it.
 * `onUse` runs when forward() creates its request, synchronously before it pipes the client's body, so a
 * body listener added there misses no chunk.
 */
class DialedAgent extends Agent {
  constructor(
    private readonly socket: Socket,
    private readonly onUse: () => void,
  ) {
    super({ keepAlive: false, maxSockets: 1 });
  }
  override createConnection(): Socket {
    this.onUse();
    return this.socket;
  }
}

export class HttpListener {
  private readonly proxy: Server;
  private readonly server: HttpServer;
  private readonly conns = new ListenerConnections();
  private readonly realm: string;
  private readonly idleTimeoutMs: number;
  private readonly responseTimeoutMs: number;
  private readonly recorder: ConnectionRecorder;

  constructor(private readonly options: HttpListenerOptions) {
    this.recorder = options.recorder ?? unrecordedConnections();
    this.realm = options.realm ?? 'rotor';
    this.idleTimeoutMs = options.idleTimeoutMs ?? 300_000;
    this.responseTimeoutMs = options.responseTimeoutMs ?? 60_000;
    this.proxy = new Server({
      port: options.port,
      host: options.host ?? '127.0.0.1',
      authRealm: this.realm,
      prepareRequestFunction: (o) => this.prepare(o),
    });
    this.server = this.proxy.server as HttpServer;
    this.server.on('error', (err) => onServerError(this.server.listening, err, options.logger));
    // See the file comment: CONNECT is ours.
    this.server.removeAllListeners('connect');
    this.server.on('connect', (req: IncomingMessage, socket: Socket, head: Buffer) => {
      const conn = this.recorder.open(LISTENER);
      conn.closer = () => socket.destroy();
      this.onConnect(req, socket, head, conn).catch((err: unknown) => {
        // A defect, not a client or upstream failure: say so once and drop the connection, never the process.
        this.options.logger?.error({ listener: LISTENER, conn: conn.id, err }, 'http CONNECT failed unexpectedly');
        socket.destroy();
        conn.end({ result: 'upstream_error', reason: 'internal error' });
      });
    });
    const metrics = options.metrics;
    const handshakeMs = options.handshakeTimeoutMs ?? 10_000;
    this.server.headersTimeout = handshakeMs;
    // Connections whose first request head has arrived; the rest are closed at the handshake deadline.
    const started = new WeakSet<Socket>();
    this.server.prependListener('request', (req: IncomingMessage) => started.add(req.socket));
    this.server.prependListener('connect', (req: IncomingMessage) => started.add(req.socket));
    this.server.on('connection', (socket: Socket) => {
      socket.setNoDelay(true);
      this.conns.sockets.add(socket);
      metrics?.connectionsActive.inc({ listener: LISTENER });
      const deadline = setTimeout(() => {
        if (!started.has(socket)) socket.destroy();
      }, handshakeMs);
      deadline.unref();
      socket.once('close', () => {
        clearTimeout(deadline);
        this.conns.sockets.delete(socket);
        metrics?.connectionsActive.dec({ listener: LISTENER });
      });
    });
  }

  async listen(): Promise<{ host: string; port: number }> {
    await this.proxy.listen();
    const a = this.server.address();
    if (!a || typeof a === 'string') throw new Error('http listener has no address');
    return { host: a.address, port: a.port };
  }

  get port(): number {
    return this.proxy.port;
  }

  get connections(): number {
    return this.conns.sockets.size;
  }

  /** Stops accepting; running connections get `drainMs` to finish, then are closed. */
  async close(drainMs = 0): Promise<void> {
    const closed = this.proxy.close(false);
    this.server.closeIdleConnections?.();
    await this.conns.drainThenClose(drainMs);
    await closed;
  }

  /** Serves a socket accepted elsewhere (a user's own port, src/users/handover.ts). */
  handleSocket(socket: Socket): void {
    this.server.emit('connection', socket);
  }

  private count(result: ConnectionResult): void {
    this.options.metrics?.connectionsTotal.inc({ listener: LISTENER, result });
  }

  /** A connection or request that ends before any relay: counted (except a client abort) and recorded. */
  private refuse(conn: ConnectionContext, result: RecordResult, reason: string): void {
    if (result !== 'client_abort') this.count(result);
    conn.end({ result, reason });
  }

  /** The record's result for a refused authorization. */
  private static refusalResult(a: Authorization & { ok: false }): RecordResult {
    return a.kind === 'auth' ? 'auth_failed' : a.kind === 'forbidden' ? (a.result ?? 'limited') : 'bad_request';
  }

  /** A complete HTTP answer on a raw socket, then close (CONNECT refusals and failures). */
  private answer(socket: Socket, status: number, reason: string): void {
    const body = reason;
    const text = STATUS_TEXT[status] ?? 'Error';
    const auth = status === 407 ? `Proxy-Authenticate: Basic realm="${this.realm}"\r\n` : '';
    if (socket.writable) {
      socket.end(
        `HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\n${auth}\r\n${body}`,
      );
    }
    setTimeout(() => socket.destroy(), 1000).unref();
  }

  private async onConnect(req: IncomingMessage, socket: Socket, head: Buffer, conn: ConnectionContext): Promise<void> {
    socket.on('error', noop);
    const target = parseConnectTarget(req.url);
    if (!target) {
      this.refuse(conn, 'bad_request', 'CONNECT target must be host:port');
      this.answer(socket, 400, 'CONNECT target must be host:port');
      return;
    }
    conn.target = req.url ?? null;
    const credentials = parseBasic(req.headers['proxy-authorization']);
    const router = this.options.router;
    const a = credentials ? router.authorize(credentials.username, credentials.password) : this.options.anonymous?.(socket);
    if (!a) {
      this.refuse(conn, 'auth_failed', 'proxy credentials required (Basic)');
      this.answer(socket, 407, 'proxy credentials required (Basic)');
      return;
    }
    if (!a.ok) {
      conn.user = a.user ?? null;
      this.refuse(conn, HttpListener.refusalResult(a), a.reason);
      this.answer(socket, a.kind === 'auth' ? 407 : a.kind === 'forbidden' ? 403 : 400, a.reason);
      return;
    }
    conn.user = a.route.user.name;
    conn.session = a.route.sessionId ?? null;
    const held = { head: head.length > 0 ? head : null };
    const dialed = await this.dial(a.route, target, socket, 'tunnel', conn, held);
    if (!dialed) return;
    const user = a.route.user.name;
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    this.count('ok');
    this.conns.relay(socket, dialed, held.head, user, router.meters, { idleTimeoutMs: this.idleTimeoutMs, metrics: this.options.metrics }, conn);
  }

  /**
   * Router.dial bound to the client's life. On failure the client has been answered (CONNECT) or the error
   * is returned for a custom response (plain HTTP); on success connectionOpened has been counted.
   */
  private async dial(route: Route, target: Target, client: Socket, mode: 'tunnel', conn: ConnectionContext, held: { head: Buffer | null }): Promise<Dialed | undefined>;
  private async dial(route: Route, target: Target, client: Socket, mode: 'forward', conn: ConnectionContext): Promise<Dialed | GatewayError>;
  private async dial(
    route: Route,
    target: Target,
    client: Socket,
    mode: 'tunnel' | 'forward',
    conn: ConnectionContext,
    held?: { head: Buffer | null },
  ): Promise<Dialed | GatewayError | undefined> {
    const router = this.options.router;
    const user = route.user.name;
    const abort = new DialCancel();
    const onGone = (): void => abort.abort();
    // A CONNECT socket is ours: keep reading it so a client that leaves is seen. A plain request's socket
    // is read by the http server, whose 'close' is enough.
    let release: (() => Buffer | null) | undefined;
    if (held) release = holdClient(client, held.head, onGone);
    else client.once('close', onGone);
    router.meters.connectionOpened(user);
    try {
      const dialed = await router.dial(route, target, abort, mode, conn);
      if (client.destroyed || abort.aborted) {
        // A CONNECT socket is ours and half-open after the client's FIN: close it, or it stays open forever.
        if (mode === 'tunnel') client.destroy();
        dialed.socket.destroy();
        dialed.release();
        router.meters.connectionClosed(user);
        conn.node = dialed.node.id;
        this.refuse(conn, 'client_abort', 'the client went away');
        return undefined;
      }
      return dialed;
    } catch (err) {
      router.meters.connectionClosed(user);
      if (!(err instanceof GatewayError)) {
        conn.end({ result: 'upstream_error', reason: 'internal error' });
        // proxy-chain answers a plain request whose prepareRequestFunction throws; a CONNECT is ours.
        if (mode === 'forward') throw err;
        this.count('upstream_error');
        this.options.logger?.error({ listener: LISTENER, conn: conn.id, user, err }, 'http dial failed unexpectedly');
        this.answer(client, 500, 'internal error');
        return undefined;
      }
      if (err.code !== 'DIAL_ABORTED') {
        this.refuse(conn, err.connectionResult, err.upstreamReason ? `${err.message} (${err.upstreamReason})` : err.message);
        this.options.logger?.info({ listener: LISTENER, conn: conn.id, user, code: err.code, reason: err.upstreamReason }, 'http upstream failed');
      } else {
        this.refuse(conn, 'client_abort', err.message);
      }
      if (mode === 'forward') return err;
      if (err.code !== 'DIAL_ABORTED') this.answer(client, err.httpStatus, err.message);
      // The client ended mid-dial; its CONNECT socket is half-open and nobody else will close it.
      else client.destroy();
      return undefined;
    } finally {
      if (release && held) held.head = release();
      else client.off('close', onGone);
    }
  }

  /** proxy-chain calls this for plain-HTTP requests only (CONNECT is ours): once per request. */
  private async prepare(o: PrepareRequestFunctionOpts): Promise<PrepareRequestFunctionResult> {
    // Plain HTTP: each forwarded request is dialed on its own, so each is one connection of the log.
    const conn = this.recorder.open(LISTENER);
    conn.target = `${o.hostname.includes(':') ? `[${o.hostname}]` : o.hostname}:${o.port}`;
    const router = this.options.router;
    const a = o.request.headers['proxy-authorization'] ? router.authorize(o.username, o.password) : this.options.anonymous?.(o.request.socket);
    if (!a) {
      this.refuse(conn, 'auth_failed', 'proxy credentials required (Basic)');
      return { requestAuthentication: true, failMsg: 'proxy credentials required (Basic)' };
    }
    if (!a.ok) {
      conn.user = a.user ?? null;
      this.refuse(conn, HttpListener.refusalResult(a), a.reason);
      if (a.kind === 'auth') return { requestAuthentication: true, failMsg: a.reason };
      return textResponse(a.kind === 'forbidden' ? 403 : 400, a.reason);
    }
    conn.user = a.route.user.name;
    conn.session = a.route.sessionId ?? null;
    const client = o.request.socket;
    conn.closer = () => client.destroy();
    const target = { host: o.hostname, port: o.port };
    const dialed = await this.dial(a.route, target, client, 'forward', conn);
    if (!dialed) return textResponse(502, 'client went away');
    if (dialed instanceof GatewayError) return textResponse(dialed.code === 'DIAL_ABORTED' ? 502 : dialed.httpStatus, dialed.message);
    this.count('ok');
    const attachBody = this.meterForward(a.route, dialed, o.request, conn);
    const result: PrepareRequestFunctionResult = { httpAgent: new DialedAgent(dialed.socket, attachBody) };
    if (dialed.viaProxy) {
      const n = dialed.node;
      const auth =
        n.username !== undefined ? `${encodeURIComponent(n.username)}:${encodeURIComponent(n.password ?? '')}@` : '';
      result.upstreamProxyUrl = `http://${auth}${n.host.includes(':') ? `[${n.host}]` : n.host}:${n.port}`;
    }
    return result;
  }

  /**
   * Counts one forwarded request's bytes into the user's meter (closing both sides once it is exhausted),
   * bounds the upstream's silence, and gives the node back when the upstream socket closes. Returns the
   * function that starts counting the request body (see DialedAgent).
   */
  private meterForward(route: Route, dialed: Dialed, request: IncomingMessage, conn: ConnectionContext): () => void {
    const router = this.options.router;
    const user = route.user.name;
    const meter = router.meters.meter(user);
    const upstream = dialed.socket;
    const client = request.socket;
    if (dialed.head) upstream.unshift(dialed.head);
    // The request's bytes so far, also what GET /v1/connections/active shows.
    const counts = { up: 0, down: 0 };
    conn.bytes = counts;
    conn.node = dialed.node.id;
    conn.exit = dialed.node.host;
    // The client first: once the upstream is gone proxy-chain answers a request still waiting for its
    // response head with a 59x status, which must not reach a client that is being cut off.
    let end = 'closed';
    const stop = (): void => {
      client.destroy();
      upstream.destroy();
    };
    conn.closer = stop;
    const onUp = (chunk: Buffer): void => {
      counts.up += chunk.length;
      meter.add(chunk.length, 0);
      if (meter.exhausted) {
        end = 'limit';
        stop();
      }
    };
    const onDown = (chunk: Buffer): void => {
      counts.down += chunk.length;
      meter.add(0, chunk.length);
      if (meter.exhausted) {
        end = 'limit';
        stop();
      }
    };
    upstream.on('data', onDown);
    upstream.setTimeout(this.responseTimeoutMs, () => {
      end = 'idle';
      upstream.destroy(Object.assign(new Error('upstream response timed out'), { code: 'ETIMEDOUT' }));
    });
    upstream.once('close', () => {
      request.off('data', onUp);
      upstream.off('data', onDown);
      // Request headers went out unseen by onUp; count everything written.
      const { up, down } = counts;
      const headerBytes = Math.max(0, upstream.bytesWritten - up);
      if (headerBytes > 0) meter.add(headerBytes, 0);
      const metrics = this.options.metrics;
      if (metrics) {
        metrics.bytesTotal.inc({ user, direction: 'up' }, up + headerBytes);
        metrics.bytesTotal.inc({ user, direction: 'down' }, down);
      }
      dialed.release();
      router.meters.connectionClosed(user);
      conn.end({ result: 'ok', reason: end, up: up + headerBytes, down });
    });
    return () => {
      request.on('data', onUp);
      // Dialers hand over paused sockets; the http client's own 'data' listener would not resume it.
      upstream.resume();
    };
  }
}

function textResponse(statusCode: number, reason: string): PrepareRequestFunctionResult {
  return {
    customResponseFunction: () => ({
      statusCode,
      headers: { 'content-type': 'text/plain; charset=utf-8', connection: 'close' },
      body: reason,
    }),
  };
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  403: 'Forbidden',
  407: 'Proxy Authentication Required',
  499: 'Client Closed Request',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};
