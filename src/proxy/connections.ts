// What a listener keeps of its client connections: the open sockets and the running relays, the graceful
// stop (a drain period, then everything cut), and what a failed accept does.
import type { Socket } from 'node:net';
import { reportFailedAccept } from '../errors/failed-accept.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { metricCell, type MetricCell } from './metric-cells.ts';
import { noDelay } from './no-delay.ts';
import type { RelayHandle } from './relay.ts';

export class ListenerConnections {
  /** Client sockets open now (each listener adds on accept and removes on 'close'). */
  readonly sockets = new Set<Socket>();
  /** Relays running now (the tunnel pipeline adds and removes them: tunnel.ts). */
  readonly relays = new Set<RelayHandle>();
  /** rotor_proxy_connections_active's cell per listener (no label hashing per connection). */
  private readonly active = new Map<string, MetricCell>();

  /**
   * An accepted client socket, on either listener: registered (for drain and close), counted on
   * rotor_proxy_connections_active while open, errors silenced (each stage handles its own), no Nagle delay
   * (inherited from the listening socket: no-delay.ts).
   */
  accept(socket: Socket, listener: string, metrics: Metrics | undefined): void {
    socket.on('error', noop);
    noDelay(socket);
    this.sockets.add(socket);
    const active = metrics ? this.activeCell(metrics, listener) : undefined;
    active?.inc();
    socket.on('close', () => {
      this.sockets.delete(socket);
      active?.dec();
    });
  }

  private activeCell(metrics: Metrics, listener: string): MetricCell {
    let cell = this.active.get(listener);
    if (cell === undefined) {
      cell = metricCell(metrics.connectionsActive, { listener });
      this.active.set(listener, cell);
    }
    return cell;
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

function noop(): void {}
