// The tunnel pipeline every listener runs a client through: admission → target check → pick → dial → relay
// → record. The listeners (http.ts, socks5.ts, and through them https-listener.ts and users' own ports) are
// protocol adapters: they parse their protocol and write its answers to what the pipeline returns (an
// admission, a connected upstream or a failure); what is decided, counted and recorded is decided here, once:
//   - admission: credentials (or a user's own port's anonymous admission) → Router.authenticate → a route or
//     a refusal with its status, SOCKS5 reply and result;
//   - target check, pick and dial: Router.dial (target.ts, destination rules, sticky session or pool, the
//     dial race), bound to the client's life (a client that leaves cancels its dial);
//   - relay: the metered, throttled stream of relay.ts, with the node given back at its end;
//   - record: tunnel-record.ts, the only writer of the connection's record.
// Plain-HTTP requests go through the same admission and record; their exchange is http-forward.ts's (a kept
// upstream connection carries many requests), and the UDP relay is udp-associate.ts behind the same admission.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Closer, ConnectionContext, ConnectionRecorder, RecordResult } from '../connlog/types.ts';
import { unrecordedConnections } from '../connlog/recorder.ts';
import { InternalError } from '../errors/rotor-error.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { ConnectionResult, Metrics } from '../telemetry/metrics.ts';
import { REPLY } from '../wire/socks5.ts';
import { DialCancel } from './cancel.ts';
import { DialPromise } from './dial-job.ts';
import { ListenerConnections } from './connections.ts';
import { Forwarder } from './http-forward.ts';
import type { AbsoluteTarget } from './http-message.ts';
import { Hold } from './hold.ts';
import { ResultCounter } from './metric-cells.ts';
import { CLIENT_LISTENERS, relay, type RelayOptions } from './relay.ts';
import type { Authorization, Dialed, Route, Router } from './router.ts';
import {
  endBeforeRelay,
  openRecord,
  type FromUserPort,
  recordCarrying,
  recordCloser,
  recordEnd,
  recordNode,
  recordRefusedUser,
  recordRoute,
  FailureRecorder,
  TunnelEnd,
  type TunnelFailure,
} from './tunnel-record.ts';
import type { Target } from './types.ts';

export type { TunnelFailure };

/** A client's authorized route, or why it has none. */
export type Admission = { route: Route } | { refusal: TunnelFailure; user: string | null };

/**
 * A tunnel's upstream, dialed for an admitted client (connect()): the listener answers its client (200, SOCKS5
 * success, or an Upgrade's request sent on) and hands it to carry() in the same turn.
 */
export interface Connected {
  dialed: Dialed;
  /** What the client sent meanwhile (behind its request, or while the dial ran). */
  head: Buffer | null;
}

export interface TunnelPipelineOptions {
  router: Router;
  /** The listener's protocol: its name on metrics, and the record's listener label with openRecord's variants. */
  listener: 'http' | 'socks5';
  /** Whether a socket came through a user's own port (its records say `user-port-…`). */
  fromUserPort?: FromUserPort | undefined;
  /** Relay idle timeout. */
  idleTimeoutMs: number;
  metrics?: Metrics | undefined;
  logger?: Logger | undefined;
  /** The connection log; default ids only. */
  recorder?: ConnectionRecorder | undefined;
  /** Admission without credentials (a user's own port: src/users/ports.ts UserPorts.admit); undefined = none. */
  anonymous?: ((socket: Socket) => Authorization | undefined) | undefined;
  /** Plain-HTTP forwarding (the HTTP listener): its timeouts and how a failed request is answered. */
  forward?: ForwardSettings | undefined;
  /** Bounds what the kernel holds unsent for each accepted client socket (src/proxy/unsent-limit.ts). */
  limitUnsent?: ((socket: Socket) => void) | undefined;
}

/** What both listeners' options give their pipeline (the listener's own settings, the idle timeout defaulted). */
export function pipelineOptions(
  listener: TunnelPipelineOptions['listener'],
  o: Omit<TunnelPipelineOptions, 'listener' | 'idleTimeoutMs' | 'forward'> & { idleTimeoutMs?: number | undefined },
  forward?: ForwardSettings,
): TunnelPipelineOptions {
  return {
    router: o.router,
    listener,
    idleTimeoutMs: o.idleTimeoutMs ?? 300_000,
    metrics: o.metrics,
    logger: o.logger,
    recorder: o.recorder,
    anonymous: o.anonymous,
    fromUserPort: o.fromUserPort,
    forward,
    limitUnsent: o.limitUnsent,
  };
}

export interface ForwardSettings {
  /** Longest silence from the upstream while a response is due. */
  responseTimeoutMs: number;
  /** Idle kept-alive upstream connections close after this; default http-forward.ts's. */
  upstreamIdleMs?: number | undefined;
  /** The realm of a 407 answer (Proxy-Authenticate) to a request that failed before its response head. */
  realm: string;
}

/**
 * One tunnel's dial under way (TunnelPipeline.connect): the client it serves, the hold that reads the client
 * meanwhile, the cancel its leaving fires, and the outcome the dial's race writes — told to the listener's one
 * reaction (whenEnded, shared by all its tunnels, no promise), which finds all it needs here.
 */
export class TunnelDial extends DialPromise {
  readonly abort = new DialCancel();
  readonly hold: Hold;
  /**
   * The listener's reaction to the dial's end hands the upstream to carry() (the relay's reader) in the same turn:
   * a warm connection's socket comes over flowing (DialAnswer.takesFlowing).
   */
  readonly takesFlowing = true;

  constructor(
    readonly client: Socket,
    readonly conn: ConnectionContext,
    readonly route: Route,
    head: Buffer | null,
    readonly keepReading: boolean,
  ) {
    super();
    // The relay's client listeners, handed over at the dial's end (connected): none taken off and put on again.
    this.hold = new Hold(client, head, this.abort, CLIENT_LISTENERS);
  }
}

const CREDENTIALS_REQUIRED = 'proxy credentials required (Basic)';

export class TunnelPipeline {
  /** The listener's open sockets and running relays (drain and close). */
  readonly conns = new ListenerConnections();
  readonly router: Router;
  private readonly listener: string;
  private readonly recorder: ConnectionRecorder;
  /** rotor_proxy_connections_total of this listener, by result (handed down to the forwarder and the record's end). */
  private readonly counter: ResultCounter;
  /** Failures before any relay: classified, counted and recorded (handed down to the forwarder as well). */
  private readonly failures: FailureRecorder;
  private readonly forwarder: Forwarder | undefined;

  constructor(private readonly options: TunnelPipelineOptions) {
    this.router = options.router;
    this.listener = options.listener;
    this.recorder = options.recorder ?? unrecordedConnections();
    this.counter = new ResultCounter(options.metrics, options.listener);
    this.failures = new FailureRecorder(this.counter, options.listener, options.logger);
    const forward = options.forward;
    if (forward) {
      this.forwarder = new Forwarder({
        router: options.router,
        responseTimeoutMs: forward.responseTimeoutMs,
        ...(forward.upstreamIdleMs !== undefined ? { idleMs: forward.upstreamIdleMs } : {}),
        metrics: options.metrics,
        counter: this.counter,
        failures: this.failures,
        realm: forward.realm,
      });
    }
  }

  /** An accepted client socket: registered for drain and close, counted active while open. */
  accept(socket: Socket): void {
    this.options.limitUnsent?.(socket);
    this.conns.accept(socket, this.listener, this.options.metrics);
  }

  /** The connection's record, minted once per connection (per request for plain HTTP) from its client socket. */
  open(client: Socket, closer?: Closer): ConnectionContext {
    const conn = openRecord(this.recorder, this.options.listener, client, this.options.fromUserPort);
    if (closer) recordCloser(conn, closer);
    return conn;
  }

  /** Counted on rotor_proxy_connections_total (a relay or forwarded request that started, or a malformed one). */
  count(result: ConnectionResult): void {
    this.counter.count(result);
  }

  /**
   * Admission: the client's credentials (or, without any, a user's own port's admission of its address). At
   * once for a client verified before, else a Promise (the password is checked off the event loop).
   */
  admit(credentials: { username: string; password: string } | undefined, client: Socket): Admission | Promise<Admission> {
    if (credentials === undefined) return this.admitAnonymous(client);
    const a = this.router.authenticate(credentials.username, credentials.password, client.remoteAddress);
    return a instanceof Promise ? a.then(admission) : admission(a);
  }

  /** Admission without credentials: a user's own port admits its allowed addresses; anyone else is refused 407. */
  admitAnonymous(client: Socket): Admission {
    return admission(this.options.anonymous?.(client));
  }

  /** Whether this listener admits some clients without credentials (a user's own port). */
  get admitsAnonymous(): boolean {
    return this.options.anonymous !== undefined;
  }

  /** The admission's route, recorded; or undefined when refused (recorded and counted; the caller answers). */
  admitted(conn: ConnectionContext, a: Admission): Route | undefined {
    if ('refusal' in a) {
      recordRefusedUser(conn, a.user);
      this.refused(conn, a.refusal.result, a.refusal.recordReason);
      return undefined;
    }
    recordRoute(conn, a.route);
    return a.route;
  }

  /** A connection or request that ends before any relay: counted (except a client that left) and recorded. */
  refused(conn: ConnectionContext, result: RecordResult, reason: string): void {
    endBeforeRelay(this.counter, conn, result, reason);
  }

  /** A defect (not a client or upstream failure): said once, the connection dropped, never the process. */
  defect(client: Socket, conn: ConnectionContext, err: unknown): void {
    this.options.logger?.error({ listener: this.listener, conn: conn.id, err }, 'connection failed unexpectedly');
    client.destroy();
    recordEnd(conn, 'upstream_error', 'internal error');
  }

  /**
   * An error as the client is answered and the connection recorded (tunnel-record.ts FailureRecorder: the
   * error's own status and message, else 502/504 for a failed upstream exchange, 500 for a defect).
   */
  failure(err: unknown, conn: ConnectionContext): TunnelFailure {
    return this.failures.failure(err, conn);
  }

  /**
   * Target check, pick and dial for an admitted client, bound to its life: the client is read meanwhile (its
   * leaving cancels the dial, its early bytes are kept), its connection slot is taken. What is ready runs now
   * (the login was verified, the pool has a ready node, the warm set a ready connection: the request is on its
   * way upstream when this returns). Returns the dial under way — its whenEnded reaction gets it once the race
   * ended (no promise per tunnel, never an error), and connected() then gives the outcome — or, refused at
   * once, the failure (recorded and counted; the listener answers it).
   * `head` is what the client sent behind its request. `keepReading` (default): the client socket stays flowing
   * from the dial's end to the relay, which takes the reading over in the same turn (the dial's hold has it
   * flowing in any case: a pause there and a resume in the relay cost every CONNECT a pause, a resume and its
   * tick for nothing); false: it is paused in between.
   */
  connect(
    client: Socket,
    conn: ConnectionContext,
    route: Route,
    target: Target,
    head: Buffer | null,
    keepReading = true,
  ): TunnelDial | TunnelFailure | undefined {
    const dial = new TunnelDial(client, conn, route, head, keepReading);
    this.router.meters.connectionOpened(route.user.name);
    try {
      this.router.startDial(route, target, dial.abort, 'tunnel', conn, dial);
    } catch (err) {
      // Refused before any race (a malformed or forbidden target, a limit, no pool): answered in this turn.
      return this.dialFailed(dial, err);
    }
    return dial;
  }

  /**
   * A dial's end (connect()'s, once it ended): the upstream (the listener answers its client, then
   * calls carry() in the same turn), the failure (recorded and counted; the listener answers it), or undefined
   * for a client that left (closed and recorded).
   */
  connected(dial: TunnelDial): Connected | TunnelFailure | undefined {
    const { client, conn, route, abort } = dial;
    const meters = this.router.meters;
    const user = route.user.name;
    let dialed: Dialed;
    try {
      dialed = this.router.dialed(dial);
    } catch (err) {
      return this.dialFailed(dial, err);
    }
    // The hold's listeners stay for the relay (carry(), in this turn).
    const held = dial.hold.release(dial.keepReading, true);
    if (client.destroyed || abort.aborted) {
      client.destroy();
      dialed.socket.destroy();
      dialed.release();
      meters.connectionClosed(user);
      recordNode(conn, dialed.node, dialed.exit);
      this.refused(conn, 'client_abort', 'the client went away');
      return undefined;
    }
    return { dialed, head: held };
  }

  /** A dial that failed: the hold and the slot given back, the failure recorded and counted (undefined: the client left). */
  private dialFailed(dial: TunnelDial, err: unknown): TunnelFailure | undefined {
    const { client, conn } = dial;
    dial.hold.release();
    this.router.meters.connectionClosed(dial.route.user.name);
    const f = this.failure(err, conn);
    this.refused(conn, f.result, f.recordReason);
    if (f.result !== 'client_abort') return f;
    // The client ended mid-dial: its socket is half-open (allowHalfOpen) and nobody else will close it.
    client.destroy();
    return undefined;
  }

  /**
   * Counts the tunnel established and relays `client` ↔ the dialed upstream through the one metered, throttled stream (relay.ts: the user's
   * meter, rate and idle timeout). At the end the node goes back to its pool (as failed when the upstream died
   * before its first byte), the connection is counted closed and its record ends with the relay's counters.
   */
  carry(client: Socket, connected: Connected, route: Route, conn: ConnectionContext): void {
    this.count('ok');
    const { dialed, head: clientHead } = connected;
    const meters = this.router.meters;
    const user = route.user.name;
    const limiter = meters.limiter?.(user);
    recordNode(conn, dialed.node, dialed.exit);
    const end = new TunnelEnd(this.conns.relays, dialed, meters, user, conn);
    // Built field by field, not with conditional spreads (each spread a temporary object and a copy per tunnel).
    const relayOptions: RelayOptions = {
      meter: meters.meter(user),
      idleTimeoutMs: this.options.idleTimeoutMs,
      clientHead,
      upstreamHead: dialed.head,
      end,
    };
    if (limiter) relayOptions.limiter = limiter;
    if (this.options.metrics) relayOptions.bytes = { metrics: this.options.metrics, user };
    const handle = relay(client, dialed.socket, relayOptions);
    // The relay may have ended inside relay() itself (a side already gone).
    if (end.ended) return;
    end.handle = handle;
    this.conns.relays.add(end);
    if (limiter) end.attached = limiter.attach(handle);
    recordCarrying(conn, handle.stats, handle);
  }

  /**
   * Plain HTTP: an admitted request's pick, dial, relay and record are its exchange's (http-forward.ts: a kept
   * upstream connection carries many requests); a failure before the response head is recorded (the
   * FailureRecorder handed to it) and answered by the forwarder itself.
   */
  forward(
    req: IncomingMessage,
    res: ServerResponse,
    route: Route,
    target: AbsoluteTarget,
    continues: boolean,
    conn: ConnectionContext,
  ): void {
    if (this.forwarder === undefined) throw new InternalError('TunnelPipeline.forward: this listener forwards no plain HTTP');
    this.forwarder.forward(req, res, route, target, continues, conn);
  }

  /** A plain-HTTP request that failed before its response head (e.g. its admission threw): recorded and answered. */
  forwardFailed(err: unknown, res: ServerResponse, conn: ConnectionContext): void {
    if (this.forwarder === undefined) throw new InternalError('TunnelPipeline.forwardFailed: this listener forwards no plain HTTP');
    this.forwarder.failed(err, res, conn);
  }

  /** Stops accepting work: open connections get `drainMs`, then every relay and socket is cut. */
  async drainThenClose(drainMs: number): Promise<void> {
    await this.conns.drainThenClose(drainMs);
    this.forwarder?.close();
  }
}

/** An authorization as every listener answers it. */
function admission(a: Authorization | undefined): Admission {
  if (!a) return { refusal: refusal(407, CREDENTIALS_REQUIRED, 'auth_failed', true), user: null };
  if (a.ok) return { route: a.route };
  if (a.kind === 'auth') return { refusal: refusal(407, a.reason, 'auth_failed', true), user: null };
  if (a.kind === 'forbidden') return { refusal: refusal(403, a.reason, a.result ?? 'limited'), user: a.user ?? null };
  return { refusal: refusal(400, a.reason, 'bad_request'), user: a.user ?? null };
}

function refusal(status: number, reason: string, result: RecordResult, credentials = false): TunnelFailure {
  const f: TunnelFailure = { status, socksReply: REPLY.notAllowed, reason, recordReason: reason, result };
  if (credentials) f.credentials = true;
  return f;
}
