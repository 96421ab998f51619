// What a listener keeps of its client connections: the open sockets and the running relays, the graceful
// stop (a drain period, then everything cut), and what a failed accept does.
import type { Socket } from 'node:net';
import { LiveList, type Listed } from '../connlog/live-list.ts';
import { reportFailedAccept } from '../errors/failed-accept.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { metricCell, type MetricCell } from './metric-cells.ts';
import { noDelay } from './no-delay.ts';
import { slotIf, slotOf } from '../wire/socket-slot.ts';
import type { RunningRelay } from './tunnel-record.ts';

/** An open client socket in the listener's list (kept in the socket's slot, wire/socket-slot.ts: one 'close' function for all sockets). */
interface OpenSocket extends Listed<OpenSocket> {
  readonly socket: Socket;
  readonly list: LiveList<OpenSocket>;
  readonly active: MetricCell | undefined;
}

function onOpenClose(this: Socket): void {
  const entry = slotIf(this)?.open as OpenSocket | undefined;
  if (entry === undefined) return;
  entry.list.remove(entry);
  entry.active?.dec();
}

// Both lists are live lists, not Sets: a long-lived Set's rehashed tables would keep every connection and
// relay they ever held reachable for V8's young-generation collections (src/connlog/live-list.ts says how).
export class ListenerConnections {
  /** Client sockets open now (each listener adds on accept and removes on 'close'). */
  private readonly open = new LiveList<OpenSocket>();
  /** Relays running now (the tunnel pipeline adds them, tunnel.ts; their end removes them, TunnelEnd). */
  readonly relays = new LiveList<RunningRelay>();
  /** Client sockets open now. */
  get openSockets(): number {
    return this.open.size;
  }

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
    const active = metrics ? this.activeCell(metrics, listener) : undefined;
    const entry: OpenSocket = { socket, list: this.open, active, prevLive: null, nextLive: null };
    slotOf(socket).open = entry;
    this.open.add(entry);
    active?.inc();
    socket.on('close', onOpenClose);
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
    if (this.open.size > 0 && drainMs > 0) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer);
          clearInterval(check);
          resolve();
        };
        const timer = setTimeout(done, drainMs);
        const check = setInterval(() => {
          if (this.open.size === 0) done();
        }, 20);
        timer.unref();
        check.unref();
      });
    }
    for (const r of [...this.relays]) r.handle?.stop();
    for (const o of [...this.open]) o.socket.destroy();
  }
}

/** A proxy listener's server 'error' (src/errors/failed-accept.ts says what it means). */
export function onServerError(listening: boolean, err: Error, logger: Logger | undefined): void {
  reportFailedAccept(listening, err, 'proxy listener', logger);
}

function noop(): void {}
