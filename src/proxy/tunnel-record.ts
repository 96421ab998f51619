// The one place a connection's record is filled in as it goes (src/connlog/types.ts ConnectionContext): who,
// where to, through which node, its live byte counters, how the admin stops it, and its end. Every listener
// and every relay (tunnels, forwarded requests, UDP associations) writes the record through these functions
// only, so a new field of the record is set here once for all of them.
import type { ByteCounters, ConnectionContext, RecordResult } from '../connlog/types.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { UpstreamNode } from '../pool/types.ts';
import type { Route } from './router.ts';
import type { Target } from './types.ts';

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

/** The node that carries the connection (known once a dial won). */
export function recordNode(conn: ConnectionContext, node: UpstreamNode): void {
  conn.node = node.id;
  conn.exit = node.host;
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
 * rotor_proxy_connections_total (a client that left is no refusal, so not counted) and recorded once.
 */
export function endBeforeRelay(
  metrics: Metrics | undefined,
  listener: string,
  conn: ConnectionContext,
  result: RecordResult,
  reason: string,
): void {
  if (result !== 'client_abort') metrics?.connectionsTotal.inc({ listener, result });
  conn.end({ result, reason });
}
