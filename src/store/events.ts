// The event outbox as the store keeps it (src/events/ writes and delivers it). Each driver implements it in
// its own file (sqlite-events.ts, redis-events.ts); the Store interface includes it.
//
// Once-only events carry a `marker`: the event is written only when no event was written under that marker
// before, in the same transaction (SQLite) or script (Redis) as the marker itself, so a threshold crossed by
// two daemons, or seen again after a restart, still makes one event.
// Delivery claims are the pending time itself: claiming an event moves its next attempt to the end of the
// claim, so another worker (another daemon of a fleet) skips it until then, and a worker that died mid-delivery
// leaves it due again once the claim runs out.

export interface NewEvent {
  type: string;
  /** epoch ms */
  time: number;
  /** JSON-encodable */
  data: unknown;
  /** Once-only key: when an event was already written under it, nothing is written. */
  marker?: string;
  /** epoch ms after which the marker may be forgotten (pruned); absent = kept for good. */
  markerExpiresAt?: number;
  /** false: recorded for GET /v1/events but never sent (no webhook configured). Default true. */
  deliver?: boolean;
}

export interface EventRecord {
  /** increasing; receivers dedupe by it */
  id: number;
  type: string;
  /** epoch ms */
  time: number;
  data: unknown;
  /** delivery attempts so far */
  attempts: number;
  /** epoch ms; null while not delivered */
  deliveredAt: number | null;
  /** epoch ms of the next attempt (or the end of a running claim); null when delivered or not to be sent */
  nextAttemptAt: number | null;
  lastError: string | null;
}

export type EventSettlement = { deliveredAt: number } | { error: string; nextAttemptAt: number };

export interface EventOutbox {
  /** Writes the event, unless its marker was used before (then undefined). */
  appendEvent(event: NewEvent): Promise<EventRecord | undefined>;
  /** Events with id > since, oldest first, at most `limit` (default 100). */
  listEvents(filter?: { since?: number; limit?: number }): Promise<EventRecord[]>;
  /** Up to `limit` undelivered events due at `now`, oldest first, each claimed until now + leaseMs. */
  claimEvents(now: number, leaseMs: number, limit: number): Promise<EventRecord[]>;
  /** Records one delivery attempt's outcome (attempts + 1). */
  settleEvent(id: number, outcome: EventSettlement): Promise<void>;
  /** Forgets a marker, so the next event under it is written again (a condition that ended, e.g. a balance topped up). */
  clearMarker(marker: string): Promise<void>;
  /**
   * Drops delivered events delivered before `deliveredBefore`, events never to be sent older than
   * `deliveredBefore`, and markers whose expiry is before `now`. Returns the events dropped.
   */
  pruneEvents(options: { deliveredBefore: number; now: number }): Promise<number>;
}
