// The one place a connection's record is filled in as it goes (src/connlog/types.ts ConnectionContext): who,
// where to, through which node, its live byte counters, how the admin stops it, and its end. Every listener
// and every relay (tunnels, forwarded requests, UDP associations) writes the record through these functions
// only, so a new field of the record is set here once for all of them.
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { ByteCounters, ConnectionContext, ConnectionRecorder, RecordResult } from '../connlog/types.ts';
import type { UpstreamNode } from '../pool/types.ts';
import type { Route } from './router.ts';
import type { Target } from './types.ts';

/** Whether a socket came in on a user's own port (src/users/ports.ts UserPorts.owns). */
export type FromUserPort = (socket: Socket) => boolean;

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
  const label = fromUserPort?.(socket) ? (tls ? l.portTls : l.port) : tls ? l.tls : l.shared;
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
export function recordCarrying(conn: ConnectionContext, bytes: ByteCounters, closer: () => void): void {
  conn.bytes = bytes;
  conn.closer = closer;
}

/** How DELETE /v1/connections/:id ends the connection before it carries bytes. */
export function recordCloser(conn: ConnectionContext, closer: () => void): void {
  conn.closer = closer;
}

/** The end of a connection that carried bytes: its result and the relay's own counters. */
export function recordEnd(conn: ConnectionContext, result: RecordResult, reason: string, up?: number, down?: number): void {
  if (up === undefined || down === undefined) conn.end({ result, reason });
  else conn.end({ result, reason, up, down });
}

/**
 * A connection (or forwarded request) that ends before any relay, on every listener: counted on
 * rotor_proxy_connections_total by `count` (a client that left is no refusal, so not counted) and recorded once.
 */
export function endBeforeRelay(count: (result: RecordResult) => void, conn: ConnectionContext, result: RecordResult, reason: string): void {
  if (result !== 'client_abort') count(result);
  conn.end({ result, reason });
}
