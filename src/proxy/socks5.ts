// The SOCKS5 listener, a protocol adapter: RFC 1928 CONNECT with RFC 1929 user/password (the handshake is
// src/wire/socks5.ts), then the tunnel pipeline (tunnel.ts: admission, dial, relay, record); UDP ASSOCIATE goes
// to udp-associate.ts after the same admission. Refusals follow docs/reference.md: wrong credentials or user-name options fail
// RFC 1929 (status 0x01); a user who may not go on (limit, instance not allowed) passes auth and gets reply
// 0x02 to the CONNECT, so the client can tell "who are you" from "you may not".
import { createServer, type Server, type Socket } from 'node:net';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import {
  REPLY,
  Socks5HandshakeError,
  startSocks5,
  writeReply,
  type AuthDecision,
  type ConnectRequest,
  type HandshakeOptions,
  type Socks5Login,
  type Socks5Step,
} from '../wire/socks5.ts';
import { logFailedAccepts } from '../errors/failed-accept.ts';
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
      // The pipeline's hold reads it next, in the continuation of the handshake's await (no I/O turn between).
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

  private onConnection(socket: Socket): void {
    this.pipeline.accept(socket);
    const client = new Socks5Client(
      socket,
      this.pipeline.open(socket, () => socket.destroy()),
    );
    startSocks5<Admission, Socks5Client>(socket, this.handshake, client).then(this.onStep, this.onFailed);
  }

  /** The login's admission as the handshake's decision; an admission that throws is a refusal. */
  private decide(login: Socks5Login<Admission, Socks5Client>, socket: Socket): AuthDecision<Admission> | Promise<AuthDecision<Admission>> {
    const pipeline = this.pipeline;
    try {
      const a = login.credentials
        ? pipeline.admit({ username: login.username, password: login.password }, socket)
        : pipeline.admitAnonymous(socket);
      return a instanceof Promise ? a.then(decision, refused) : decision(a);
    } catch {
      return REFUSED;
    }
  }

  /**
   * A step of a client's handshake (one function of the listener for all its clients, the client found on the
   * step): the login is decided — at once for a login verified before — and the handshake resumed with the
   * decision (the pipeline's admission needs the client's address for the back-off: src/proxy/auth-guard.ts);
   * the request is dialed.
   */
  private readonly onStep = (step: Socks5Step<Admission, Socks5Client>): void => {
    const client = step.owner!;
    try {
      if (step.kind === 'request') return this.request(step, client);
      const decided = this.decide(step, client.socket);
      if (decided instanceof Promise) decided.then(step.resume.bind(step)).then(this.onStep, this.onFailed);
      else step.resume(decided).then(this.onStep, this.onFailed);
    } catch (err) {
      this.pipeline.defect(client.socket, client.conn, err);
    }
  };

  /** A handshake that failed (answered and closed by the handshake where the protocol allows it): recorded. */
  private readonly onFailed = (err: unknown): void => {
    const client = err instanceof Socks5HandshakeError ? (err.owner as Socks5Client | undefined) : undefined;
    if (client === undefined) {
      this.options.logger?.error({ listener: LISTENER, err }, 'socks5 handshake failed unexpectedly');
      return;
    }
    const code = (err as Socks5HandshakeError).code;
    // A client offering no method we accept (e.g. only "no authentication") is refused for credentials.
    const result = code === 'AUTH_FAILED' || code === 'NO_ACCEPTABLE_METHOD' ? 'auth_failed' : 'bad_request';
    this.pipeline.refused(client.conn, result, (err as Error).message);
    this.options.logger?.debug({ listener: LISTENER, conn: client.conn.id, code }, 'socks5 handshake failed');
  };

  /** The client's request: admitted (recorded), then UDP ASSOCIATE or the tunnel's dial. */
  private request(request: ConnectRequest<Admission, Socks5Client>, client: Socks5Client): void {
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
    if (up instanceof TunnelDial) up.promise.then(this.onDialed);
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

/** A client of the listener during its handshake: what each step's reaction needs (one object per connection). */
class Socks5Client {
  constructor(
    readonly socket: Socket,
    readonly conn: ConnectionContext,
  ) {}
}

/** An admission as the handshake's decision: a credentials refusal fails RFC 1929; others pass it and get 0x02. */
function decision(a: Admission): AuthDecision<Admission> {
  if ('refusal' in a && a.refusal.credentials) return { ok: false };
  return { ok: true, context: a };
}

const REFUSED: AuthDecision<Admission> = { ok: false };
const refused = (): AuthDecision<Admission> => REFUSED;
