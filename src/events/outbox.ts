// Events: the one way components record something a webhook should hear about. An event goes into the store's
// outbox (src/store/events.ts) and is delivered from there by the webhook worker (webhook.ts): a crash after
// emit() returns loses nothing, a crash before it leaves the fact that caused it to be seen again (watchers
// re-check on their next round; a once-only marker keeps the event single).
import type { EventOutbox, EventRecord, NewEvent } from '../store/events.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { EmitOptions, EventSink, EventType } from './types.ts';

export interface EventsOptions {
  store: EventOutbox;
  /** false when no webhook is configured: events are listed by GET /v1/events but never sent. */
  deliver: boolean;
  /** Called after an event was written (the webhook worker's nudge). */
  onAppended?: () => void;
  now?: () => number;
  logger?: Logger;
  metrics?: Metrics;
}

export class Events implements EventSink {
  private readonly store: EventOutbox;
  private readonly now: () => number;
  private deliver: boolean;

  constructor(private readonly options: EventsOptions) {
    this.store = options.store;
    this.now = options.now ?? Date.now;
    this.deliver = options.deliver;
  }

  /**
   * A webhook was configured or removed (SIGHUP): events written from now on are queued for delivery, or
   * only listed. Events written while there was no webhook stay listed only (nobody asked for them then).
   */
  setDeliver(deliver: boolean): void {
    this.deliver = deliver;
  }

  emit(type: EventType, data: Record<string, unknown>, options: EmitOptions = {}): Promise<EventRecord | undefined> {
    return this.emitWith(type, data, options, (event) => this.store.appendEvent(event));
  }

  /**
   * Like emit, but the event is written by `write`: a store call that writes it in one transaction with
   * the state it is about (Store.putOrderWithEvent), so a crash keeps both or neither.
   */
  async emitWith(
    type: EventType,
    data: Record<string, unknown>,
    options: EmitOptions,
    write: (event: NewEvent) => Promise<EventRecord | undefined>,
  ): Promise<EventRecord | undefined> {
    const time = this.now();
    const written = await write({
      type,
      time,
      data,
      deliver: this.deliver,
      ...(options.marker !== undefined ? { marker: options.marker } : {}),
      ...(options.marker !== undefined && options.markerTtlMs !== undefined ? { markerExpiresAt: time + options.markerTtlMs } : {}),
    });
    if (written) {
      this.options.logger?.info({ event: type, id: written.id }, `event ${type}`);
      this.options.metrics?.events.inc({ type });
      this.options.onAppended?.();
    }
    return written;
  }

  clearMarker(marker: string): Promise<void> {
    return this.store.clearMarker(marker);
  }

  /** GET /v1/events. */
  list(filter: { since?: number; limit?: number }): Promise<EventRecord[]> {
    return this.store.listEvents(filter);
  }
}
