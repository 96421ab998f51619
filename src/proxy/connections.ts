// What both listeners keep of their client connections: the open sockets and the running relays, how a
// relay is started and forgotten, the graceful stop (a drain period, then everything cut), and what a failed
// accept does.
import type { Socket } from 'node:net';
import { reportFailedAccept } from '../errors/failed-accept.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { relay, upstreamFailedEarly, type RelayHandle, type RelayOptions } from './relay.ts';
import type { Dialed } from './router.ts';
import type { MeterProvider } from './types.ts';
import type { TLSSocket } from 'node:tls';
import type { ConnectionContext, ConnectionRecorder, RecordResult } from '../connlog/types.ts';

export class ListenerConnections {
  /** Client sockets open now (each listener adds on accept and removes on 'close'). */
  readonly sockets = new Set<Socket>();
  private readonly relays = new Set<RelayHandle>();

  /**
   * An accepted client socket, on either listener: registered (for drain and close), counted on
   * rotor_proxy_connections_active while open, errors silenced (each stage handles its own), no Nagle delay.
   * `onClose` runs once the socket is gone, after the bookkeeping.
   */
  accept(socket: Socket, listener: string, metrics: Metrics | undefined, onClose?: () => void): void {
    socket.on('error', noop);
    socket.setNoDelay(true);
    this.sockets.add(socket);
    metrics?.connectionsActive.inc({ listener });
    socket.on('close', () => {
      this.sockets.delete(socket);
      metrics?.connectionsActive.dec({ listener });
      onClose?.();
    });
  }

  /**
   * Relays `client` ↔ the dialed upstream, counted into the user's meter. At the end the node goes back to its
   * pool (as failed when the upstream died before its first byte) and the connection is counted closed.
   */
  relay(
    client: Socket,
    dialed: Dialed,
    clientHead: Buffer | null,
    user: string,
    meters: MeterProvider,
    options: { idleTimeoutMs: number; metrics?: Metrics | undefined },
    conn?: ConnectionContext,
  ): void {
    // onEnd may run inside relay() itself (a side already gone), before `relay` has returned.
    const ref: { handle?: RelayHandle; ended?: boolean } = {};
    const limiter = meters.limiter?.(user);
    if (conn) {
      conn.node = dialed.node.id;
      conn.exit = dialed.exit ?? null;
    }
    // Built field by field, not with conditional spreads (each spread a temporary object and a copy per tunnel).
    const relayOptions: RelayOptions = {
      meter: meters.meter(user),
      idleTimeoutMs: options.idleTimeoutMs,
      clientHead,
      upstreamHead: dialed.head,
      onEnd: (stats) => {
        ref.ended = true;
        if (ref.handle) {
          this.relays.delete(ref.handle);
          limiter?.detach(ref.handle);
        }
        dialed.release(upstreamFailedEarly(stats, dialed.socket));
        meters.connectionClosed(user);
        // The record's bytes are the relay's own counters: the same adds the user's meter got.
        conn?.end({ result: 'ok', reason: stats.end, up: stats.up, down: stats.down });
      },
    };
    if (limiter) relayOptions.limiter = limiter;
    if (options.metrics) relayOptions.bytes = { metrics: options.metrics, user };
    ref.handle = relay(client, dialed.socket, relayOptions);
    if (!ref.ended) {
      this.relays.add(ref.handle);
      limiter?.attach(ref.handle);
      if (conn) {
        const handle = ref.handle;
        conn.bytes = handle.stats;
        conn.closer = () => handle.stop();
      }
    }
  }

  /** Gives open connections up to `drainMs` to finish on their own, then stops every relay and socket. */
  async drainThenClose(drainMs: number): Promise<void> {
    if (this.sockets.size > 0 && drainMs > 0) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer);
          clearInterval(check);
          resolve();
        };
        const timer = setTimeout(done, drainMs);
        const check = setInterval(() => {
          if (this.sockets.size === 0) done();
        }, 20);
        timer.unref();
        check.unref();
      });
    }
    for (const r of this.relays) r.stop();
    for (const s of this.sockets) s.destroy();
  }
}

/** A proxy listener's server 'error' (src/errors/failed-accept.ts says what it means). */
export function onServerError(listening: boolean, err: Error, logger: Logger | undefined): void {
  reportFailedAccept(listening, err, 'proxy listener', logger);
}

/**
 * A connection (or forwarded request) that ends before any relay, on either listener: counted on
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

/** Whether a socket came in on a user's own port (src/users/ports.ts UserPorts.owns). */
export type FromUserPort = (socket: Socket) => boolean;

const LABELS = {
  http: { shared: 'http', tls: 'https', port: 'user-port-http', portTls: 'user-port-https' },
  socks5: { shared: 'socks5', tls: 'socks5', port: 'user-port-socks5', portTls: 'user-port-socks5' },
} as const;

/**
 * Opens a connection's context with what its client socket says: the record's `listener` (the protocol,
 * `https` over TLS, `user-port-…` for a user's own port) and `client` (the source address).
 */
export function openConnection(
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

function noop(): void {}
