// The one place a connection's record is filled in as it goes (src/connlog/types.ts ConnectionContext): who,
// where to, through which node, its live byte counters, how the admin stops it, and its end. Every listener
// and every relay (tunnels, forwarded requests, UDP associations) writes the record through these functions
// only, so a new field of the record is set here once for all of them.
import type { Socket } from 'node:net';
import type { Listed, LiveList } from '../connlog/live-list.ts';
import type { TLSSocket } from 'node:tls';
import type { ByteCounters, Closer, ConnectionContext, ConnectionRecorder, RecordResult } from '../connlog/types.ts';
import type { UpstreamNode } from '../pool/types.ts';
import { DescriptorsExhaustedError } from '../errors/failed-accept.ts';
import { isRotorError } from '../errors/rotor-error.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { ConnectionResult } from '../telemetry/metrics.ts';
import { REPLY, type ReplyCode } from '../wire/socks5.ts';
import { GatewayError } from './errors.ts';
import type { ProxyErrorType } from './proxy-status.ts';
import type { ResultCounter } from './metric-cells.ts';
import type { Dialed, Route } from './router.ts';
import type { MeterProvider, RelayAttachment, Target } from './types.ts';

/**
 * The sockets accepted on users' own ports (src/users/ports.ts UserPorts.sockets, which it fills): read, not
 * called, so opening a record calls nothing above the gateway.
 */
export type FromUserPort = WeakMap<Socket, unknown>;

const LABELS = {
  http: { shared: 'http', tls: 'https', port: 'user-port-http', portTls: 'user-port-https' },
  socks5: { shared: 'socks5', tls: 'socks5', port: 'user-port-socks5', portTls: 'user-port-socks5' },
} as const;

/**
 * Opens a connection's record with what its client socket says: the record's `listener` (the protocol,
 * `https` over TLS, `user-port-…` for a user's own port) and `client` (the source address).
 */
export function openRecord(
  recorder: ConnectionRecorder,
  protocol: 'http' | 'socks5',
  socket: Socket,
  fromUserPort: FromUserPort | undefined,
): ConnectionContext {
  const l = LABELS[protocol];
  const tls = (socket as TLSSocket).encrypted === true;
  const label = fromUserPort?.has(socket) ? (tls ? l.portTls : l.port) : tls ? l.tls : l.shared;
  return recorder.open(label, socket.remoteAddress ?? null);
}

/** The target the client asked for, as the record shows it (an IPv6 literal in brackets). */
export function recordTarget(conn: ConnectionContext, target: Target): void {
  conn.target = `${target.host.includes(':') ? `[${target.host}]` : target.host}:${target.port}`;
}

/** The client is admitted: its user and sticky session. */
export function recordRoute(conn: ConnectionContext, route: Route): void {
  conn.user = route.user.name;
  conn.session = route.sessionId ?? null;
}

/** A refused client: the authenticated user the refusal is about, or null (a guess is not a user). */
export function recordRefusedUser(conn: ConnectionContext, user: string | null | undefined): void {
  conn.user = user ?? null;
}

/**
 * The node that carries the connection (known once a dial won), and the exit the upstream named (a SOCKS5
 * reply's bound address; Tunnel.exit), null when it named none: the host Rotor dials is an entry gateway.
 */
export function recordNode(conn: ConnectionContext, node: UpstreamNode, exit: string | null | undefined): void {
  conn.node = node.id;
  conn.exit = exit ?? null;
}

/** The connection carries bytes now: its live counters and how DELETE /v1/connections/:id stops it. */
export function recordCarrying(conn: ConnectionContext, bytes: ByteCounters, closer: Closer): void {
  conn.bytes = bytes;
  conn.closer = closer;
}

/** How DELETE /v1/connections/:id ends the connection before it carries bytes (e.g. its client socket, destroyed). */
export function recordCloser(conn: ConnectionContext, closer: Closer): void {
  conn.closer = closer;
}

/** The end of a connection that carried bytes: its result and the relay's own counters. */
export function recordEnd(conn: ConnectionContext, result: RecordResult, reason: string, up?: number, down?: number): void {
  if (up === undefined || down === undefined) conn.end({ result, reason });
  else conn.end({ result, reason, up, down });
}

/**
 * A connection (or forwarded request) that ends before any relay, on every listener: counted on
 * rotor_proxy_connections_total by `counter` (a client that left is no refusal, so not counted) and recorded once.
 */
export function endBeforeRelay(counter: ResultCounter, conn: ConnectionContext, result: RecordResult, reason: string): void {
  if (result !== 'client_abort') counter.count(result as ConnectionResult);
  conn.end({ result, reason });
}

/** A relay's counters as its end reports them (relay.ts RelayStats). */
interface EndedRelay {
  readonly up: number;
  readonly down: number;
  readonly end: string;
}

/**
 * 'reset' when the upstream failed (an error, not a clean close) before sending the client one byte: the node
 * answered the tunnel and died, which the pool must hear about (Dialed.release). Else undefined.
 */
export function upstreamFailedEarly(stats: EndedRelay, upstream: Socket): 'reset' | undefined {
  return stats.down === 0 && stats.end === 'error' && upstream.errored ? 'reset' : undefined;
}

/** A running relay in its listener's list (connections.ts): its end, which holds the relay's handle. */
export interface RunningRelay extends Listed<RunningRelay> {
  handle: { stop(): void } | undefined;
}

/**
 * What a tunnel's relay does at its end (relay.ts calls relayEnded: an object handed down, no callback into
 * the pipeline that started it): the relay leaves the listener's registry and its user's limiter, the node
 * goes back to its pool (as failed when the upstream died before its first byte), the connection is counted
 * closed and its record ends with the relay's own counters (the same adds the user's meter got). One object
 * per tunnel; the relay may end inside relay() itself (a side already gone), before the pipeline registers it.
 */
export class TunnelEnd implements RunningRelay {
  ended = false;
  /** Set once relay() returned and the pipeline registered it (unless it had ended already). */
  handle: { stop(): void } | undefined = undefined;
  /** The relay's place in its user's limiter, set with `handle` when the user has one. */
  attached: RelayAttachment | undefined = undefined;
  /** Neighbours in the listener's list of running relays (ListenerConnections.relays). */
  prevLive: RunningRelay | null = null;
  nextLive: RunningRelay | null = null;

  constructor(
    private readonly relays: LiveList<RunningRelay>,
    private readonly dialed: Dialed,
    private readonly meters: MeterProvider,
    private readonly user: string,
    private readonly conn: ConnectionContext,
  ) {}

  relayEnded(stats: EndedRelay): void {
    this.ended = true;
    const handle = this.handle;
    if (handle !== undefined) {
      this.relays.remove(this);
      this.attached?.detach();
    }
    this.dialed.release(upstreamFailedEarly(stats, this.dialed.socket));
    this.meters.connectionClosed(this.user);
    recordEnd(this.conn, 'ok', stats.end, stats.up, stats.down);
  }
}

/** Why a client gets no tunnel, in every protocol's terms: the status, the SOCKS5 reply, the record's result. */
export interface TunnelFailure {
  /** HTTP status (407, 403, 400, 502, 504, …) */
  status: number;
  /** SOCKS5 reply to the request */
  socksReply: ReplyCode;
  /** one line, safe to show the client */
  reason: string;
  /** the record's reason (may name the upstream's failure kind, never its address) */
  recordReason: string;
  result: RecordResult;
  /** RFC 9209 error type; absent = the one the status implies */
  error?: ProxyErrorType;
  /** a credentials failure (HTTP 407; SOCKS5 fails RFC 1929 instead of replying to the request) */
  credentials?: boolean;
}

/**
 * A failure before any relay as every listener answers it: classified (failure()), counted and recorded
 * (failed()); the caller answers its client with what it returns. One per listener, handed down to the
 * forwarder, so a plain-HTTP request that fails before its response head is recorded and answered without a
 * call back up into the pipeline or the listener.
 */
export class FailureRecorder {
  /** The log line of a failed dial: 'socks5 connect failed', 'http upstream failed'. */
  private readonly failedLine: string;

  constructor(
    private readonly counter: ResultCounter,
    private readonly listener: 'http' | 'socks5',
    private readonly logger: Logger | undefined,
  ) {
    this.failedLine = `${listener} ${listener === 'socks5' ? 'connect' : 'upstream'} failed`;
  }

  /** The failure of `err`, counted (unless the client left) and recorded: the caller answers with it. */
  failed(err: unknown, conn: ConnectionContext): TunnelFailure {
    const f = this.failure(err, conn);
    endBeforeRelay(this.counter, conn, f.result, f.recordReason);
    return f;
  }

  /**
   * An error as the client is answered and the connection recorded: the error's own status and message
   * (RotorError's are safe to show), else 502/504 for a failed upstream exchange, 500 for a defect.
   */
  failure(err: unknown, conn: ConnectionContext): TunnelFailure {
    if (err instanceof GatewayError) {
      if (err.code === 'DIAL_ABORTED')
        return {
          status: err.httpStatus,
          socksReply: err.socksReply,
          reason: err.message,
          recordReason: err.message,
          result: 'client_abort',
        };
      this.logger?.info(
        { listener: this.listener, conn: conn.id, user: conn.user, code: err.code, reason: err.upstreamReason },
        this.failedLine,
      );
      return {
        status: err.httpStatus,
        socksReply: err.socksReply,
        reason: err.message,
        recordReason: err.upstreamReason ? `${err.message} (${err.upstreamReason})` : err.message,
        result: err.connectionResult,
        error: err.proxyError,
      };
    }
    // Out of descriptors: the proxy's own state (503), never the upstream's; no node was blamed for it.
    if (err instanceof DescriptorsExhaustedError) return upstreamFailure(err.httpStatus, err.message, 'proxy_internal_error');
    if (isRotorError(err)) return upstreamFailure(err.httpStatus, err.message);
    const code = (err as NodeJS.ErrnoException | undefined)?.code;
    if (code === 'ETIMEDOUT') return upstreamFailure(504, 'the upstream did not answer in time', 'http_response_timeout');
    if (code === 'ECONNRESET' || code === 'EPIPE') return upstreamFailure(502, 'the upstream failed', 'connection_terminated');
    if (code?.startsWith('HPE_')) return upstreamFailure(502, 'the upstream failed', 'http_protocol_error');
    this.logger?.error({ listener: this.listener, conn: conn.id, user: conn.user, err }, 'upstream exchange failed unexpectedly');
    return upstreamFailure(500, 'internal error');
  }
}

function upstreamFailure(status: number, reason: string, error?: ProxyErrorType): TunnelFailure {
  const f: TunnelFailure = { status, socksReply: REPLY.generalFailure, reason, recordReason: reason, result: 'upstream_error' };
  if (error !== undefined) f.error = error;
  return f;
}
