// What Rotor tells a webhook (docs/reference.md "Events"): the event types, their data, and the JSON body sent.
import type { EventRecord } from '../store/events.ts';

export const EVENT_TYPES = ['user.quota.80', 'user.quota.100', 'user.expired', 'balance.low', 'order.final'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export interface EmitOptions {
  /** Once-only key (src/store/events.ts): a second emit under it writes nothing. */
  marker?: string;
  /** The marker may be forgotten this long after the emit; absent = kept for good. */
  markerTtlMs?: number;
}

/** Where the watchers put events (src/events/outbox.ts Events). Resolves with the event, or undefined for a used marker. */
export interface EventSink {
  emit(type: EventType, data: Record<string, unknown>, options?: EmitOptions): Promise<EventRecord | undefined>;
  /** Re-arms a once-only event whose condition ended. */
  clearMarker(marker: string): Promise<void>;
}

/** The body POSTed to the webhook and listed by GET /v1/events. */
export interface EventBody {
  id: number;
  type: string;
  /** RFC 3339 */
  time: string;
  data: unknown;
}

export function eventBody(e: EventRecord): EventBody {
  return { id: e.id, type: e.type, time: new Date(e.time).toISOString(), data: e.data };
}
