// The SOCKS5 listener, a protocol adapter: RFC 1928 CONNECT with RFC 1929 user/password (the handshake is
// src/wire/socks5.ts), then the tunnel pipeline (tunnel.ts: admission, dial, relay, record); UDP ASSOCIATE goes
// to udp-associate.ts after the same admission. Refusals follow docs/reference.md: wrong credentials or user-name options fail
// RFC 1929 (status 0x01); a user who may not go on (limit, instance not allowed) passes auth and gets reply
// 0x02 to the CONNECT, so the client can tell "who are you" from "you may not".
import { createServer, type Server, type Socket } from 'node:net';
import { LiveList, type Listed } from '../connlog/live-list.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import {
  closeFailedHandshake,
  LOGIN,
  MORE,
  REPLY,
  REQUEST,
  Socks5ServerSteps,
  writeReply,
  type AuthDecision,
  type ConnectRequest,
  type HandshakeOptions,
  type HandshakeProgress,
} from '../wire/socks5.ts';
import { logFailedAccepts } from '../errors/failed-accept.ts';
import { slotIf, slotOf } from '../wire/socket-slot.ts';
import type { Authorization, Router } from './router.ts';
import type { UdpAssociations } from './udp-associate.ts';
import type { ConnectionContext, ConnectionRecorder } from '../connlog/types.ts';
import { ProxyListener } from './proxy-listener.ts';
import { descriptorGuard } from './accept-guard.ts';
import { pipelineOptions, TunnelDial, TunnelPipeline, type Admission } from './tunnel.ts';
import { recordTarget, type FromUserPort } from './tunnel-record.ts';

export interface Socks5ListenerOptions {
  router: Router;
  /** Default 127.0.0.1. */
  host?: string;
  /** 0 = any free port (read it from listen()'s result). */
  port: number;
  /** Bounds what the kernel holds unsent for each client (config proxy.clientUnsentBytes); default the kernel's. */
  limitUnsent?: ((socket: Socket) => void) | undefined;
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

const LISTENER = 'socks5';

export class Socks5Listener extends ProxyListener {
  protected readonly server: Server;
  protected readonly pipeline: TunnelPipeline;
  /** The handshake's options, the same for every connection (a user's own port adds its noAuth per socket). */
  private readonly handshake: HandshakeOptions<Admission>;

  constructor(private readonly options: Socks5ListenerOptions) {
    super(options);
    this.pipeline = new TunnelPipeline(pipelineOptions(LISTENER, options));
    this.handshake = {
      timeoutMs: options.handshakeTimeoutMs ?? 10_000,
      auth: 'password',
      // A user's own port may admit a client that offers no credentials.
      anonymous: this.pipeline.admitsAnonymous,
      // The socket keeps flowing after the request: the dial's hold reads it next, in the same turn.
      keepReading: true,
      udp: options.udp !== undefined,
    };
    this.server = createServer({ allowHalfOpen: true, pauseOnConnect: false }, (socket) => this.onConnection(socket));
    logFailedAccepts(this.server, 'proxy listener', options.logger);
    descriptorGuard.watch(this.server);
  }

  /** Stops accepting; running connections get `drainMs` to finish, then are closed. */
  async close(drainMs = 0): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    await this.pipeline.drainThenClose(drainMs);
    await closed;
  }

  /** Serves a socket accepted elsewhere (a user's own port, src/users/handover.ts). */
  handleSocket(socket: Socket): void {
    this.onConnection(socket);
  }

  /**
   * A client's handshake is driven here: the listener's own listeners feed its bytes to the handshake's steps
   * (wire/socks5.ts Socks5ServerSteps: data, nobody called back), and the login is decided in the turn that read
   * it — at once for a login verified before. No 'error' listener: the registry's guard (ListenerConnections.accept)
   * is on every socket, and 'close' follows an error.
   */
  private onConnection(socket: Socket): void {
    this.pipeline.accept(socket);
    const client = new Socks5Connection(this, socket, this.pipeline.open(socket, socket), this.handshake);
    slotOf(socket).socks5 = client;
    socket.on('data', onClientData);
    // on(), not once(): done() removes them (once() would wrap each in a new function per connection).
    socket.on('end', onClientEnd);
    socket.on('close', onClientClose);
    this.accepted.add(client);
    if (this.deadlineSweep === undefined) {
      this.deadlineSweep = setInterval(sweepDeadlines, Math.max(5, Math.min(1000, Math.floor(this.handshake.timeoutMs / 4))), this);
      this.deadlineSweep.unref();
    }
  }

  /**
   * Connections in their handshake, with when each was accepted: one sweep timer checks them (it runs while any
   * is here), not a timer per connection. A stalled client is failed at the deadline or at most one tick
   * (min(1 s, a quarter of the deadline)) after it. A live list, not a Map (src/connlog/live-list.ts says why).
   */
  private readonly accepted = new LiveList<Socks5Connection>();
  private deadlineSweep: NodeJS.Timeout | undefined;

  /** The handshake deadline's sweep: a connection past it still in its handshake fails (TIMEOUT). */
  sweepDeadlines(): void {
    const due = performance.now() - this.handshake.timeoutMs;
    // Oldest first: stop at the first one still within its deadline.
    for (const client of this.accepted) {
      if (client.at > due) break;
      this.progress(client, client.steps.end('TIMEOUT', 'handshake timed out'));
    }
    if (this.accepted.size === 0) {
      clearInterval(this.deadlineSweep);
      this.deadlineSweep = undefined;
    }
  }

  /** The login's admission as the handshake's decision; an admission that throws is a refusal. */
  private decide(steps: Socks5ServerSteps<Admission>, socket: Socket): AuthDecision<Admission> | Promise<AuthDecision<Admission>> {
    const pipeline = this.pipeline;
    try {
      const a = steps.credentials
        ? pipeline.admit({ username: steps.username, password: steps.password }, socket)
        : pipeline.admitAnonymous(socket);
      return a instanceof Promise ? a.then(decision, refused) : decision(a);
    } catch {
      return REFUSED;
    }
  }

  /**
   * Acts on a step of a client's handshake: writes what it says; a login is decided (the pipeline's admission
   * needs the client's address for the back-off: src/proxy/auth-guard.ts) and the handshake goes on with the
   * decision; the request is dialed; a failure is closed and recorded.
   */
  progress(client: Socks5Connection, p: HandshakeProgress): void {
    const { socket, steps } = client;
    try {
      if (steps.out !== null) socket.write(steps.out);
      if (p === MORE) return;
      if (p === LOGIN) {
        const decided = this.decide(steps, socket);
        if (decided instanceof Promise) decided.then((d) => this.progress(client, steps.decide(d)));
        else this.progress(client, steps.decide(decided));
        return;
      }
      this.done(client);
      if (p === REQUEST) return this.request(steps.request!, client);
      closeFailedHandshake(socket, steps.answer);
      const code = steps.failure!;
      // A client offering no method we accept (e.g. only "no authentication") is refused for credentials.
      const result = code === 'AUTH_FAILED' || code === 'NO_ACCEPTABLE_METHOD' ? 'auth_failed' : 'bad_request';
      this.pipeline.refused(client.conn, result, steps.message);
      this.options.logger?.debug({ listener: LISTENER, conn: client.conn.id, code }, 'socks5 handshake failed');
    } catch (err) {
      this.pipeline.defect(socket, client.conn, err);
    }
  }

  /** The handshake ended: its listeners and its deadline go (the socket keeps flowing: the dial's hold reads it next). */
  private done(client: Socks5Connection): void {
    const socket = client.socket;
    slotOf(socket).socks5 = undefined;
    socket.off('data', onClientData);
    socket.off('end', onClientEnd);
    socket.off('close', onClientClose);
    this.accepted.remove(client);
  }

  /** The client's request: admitted (recorded), then UDP ASSOCIATE or the tunnel's dial. */
  private request(request: ConnectRequest<Admission>, client: Socks5Connection): void {
    const { socket, conn } = client;
    const pipeline = this.pipeline;
    const target = { host: request.host, port: request.port };
    recordTarget(conn, target);
    const route = request.context ? pipeline.admitted(conn, request.context) : undefined;
    if (!route) {
      if (!request.context) pipeline.refused(conn, 'limited', 'not allowed');
      writeReply(socket, REPLY.notAllowed);
      this.options.logger?.debug({ listener: LISTENER, conn: conn.id }, 'socks5 connect refused');
      return;
    }
    if (request.command === 0x03 && this.options.udp) {
      this.options.udp.serve(socket, request, route, conn).catch((err: unknown) => pipeline.defect(socket, conn, err));
      return;
    }
    // Still flowing: the relay takes the reading over in the same turn as the dial's end (keepReading).
    const up = pipeline.connect(socket, conn, route, target, request.head, true);
    if (up === undefined) return;
    if (up instanceof TunnelDial) up.whenEnded(this.onDialed);
    else writeReply(socket, up.socksReply);
  }

  /** A tunnel's dial ended (one function of the listener for all its tunnels): answered, then relayed. */
  private readonly onDialed = (dial: TunnelDial): void => {
    const { client, conn } = dial;
    try {
      const up = this.pipeline.connected(dial);
      if (up === undefined) return;
      if (!('dialed' in up)) {
        writeReply(client, up.socksReply);
        return;
      }
      writeReply(client, REPLY.succeeded);
      this.pipeline.carry(client, up, dial.route, conn);
    } catch (err) {
      this.pipeline.defect(client, conn, err);
    }
  };
}

/** A client of the listener: its socket, its record and its handshake's steps (one object per connection). */
class Socks5Connection implements Listed<Socks5Connection> {
  readonly steps: Socks5ServerSteps<Admission>;
  /** when it was accepted (performance.now), for the handshake deadline */
  readonly at = performance.now();
  /** neighbours in the listener's list of connections in their handshake */
  prevLive: Socks5Connection | null = null;
  nextLive: Socks5Connection | null = null;

  constructor(
    readonly listener: Socks5Listener,
    readonly socket: Socket,
    readonly conn: ConnectionContext,
    handshake: HandshakeOptions<Admission>,
  ) {
    this.steps = new Socks5ServerSteps(handshake);
  }
}

/** The connection a socket in its handshake belongs to (its slot's field, wire/socket-slot.ts), for the shared listeners below (no closure per connection). */
function clientOf(socket: Socket): Socks5Connection | undefined {
  return slotIf(socket)?.socks5 as Socks5Connection | undefined;
}

function onClientData(this: Socket, chunk: Buffer): void {
  const client = clientOf(this);
  if (client !== undefined) client.listener.progress(client, client.steps.feed(chunk));
}

function onClientEnd(this: Socket): void {
  const client = clientOf(this);
  if (client !== undefined) client.listener.progress(client, client.steps.end('CLOSED', 'client closed during the handshake'));
}

function onClientClose(this: Socket, hadError: boolean): void {
  const client = clientOf(this);
  if (client === undefined) return;
  const message = hadError ? 'client connection failed during the handshake' : 'client closed during the handshake';
  client.listener.progress(client, client.steps.end('CLOSED', message));
}

function sweepDeadlines(listener: Socks5Listener): void {
  listener.sweepDeadlines();
}

/** An admission as the handshake's decision: a credentials refusal fails RFC 1929; others pass it and get 0x02. */
function decision(a: Admission): AuthDecision<Admission> {
  if ('refusal' in a && a.refusal.credentials) return { ok: false };
  return { ok: true, context: a };
}

const REFUSED: AuthDecision<Admission> = { ok: false };
const refused = (): AuthDecision<Admission> => REFUSED;
