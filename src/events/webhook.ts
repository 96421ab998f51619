// The webhook worker: claims due events from the outbox, POSTs each as JSON with its signature, and records
// the outcome: a 2xx delivers it, anything else (status, refused, timeout) schedules a retry with capped
// exponential backoff, for as long as it takes (at least once: a receiver dedupes by `id`). One loop per
// daemon, never on the data path; in a fleet every daemon runs one and the outbox's claims keep two from
// sending the same event at once. Delivered events are pruned after `retentionDays`.
import type { EventOutbox, EventRecord } from '../store/events.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { signBody, SIGNATURE_HEADER } from './signature.ts';
import { eventBody } from './types.ts';

export interface WebhookOptions {
  store: EventOutbox;
  url: string;
  secret: string;
  /** One POST, until the status line. Default 10000 ms. */
  timeoutMs?: number;
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** How often the outbox is looked at when nothing nudges the worker. Default 1000 ms. */
  pollMs?: number;
  /** Events claimed per round. Default 5. A claim lasts batch × timeoutMs + 2 s: after a crash mid-round, that long until another worker (or the restarted one) sends them. */
  batch?: number;
  /** Delivered events are kept this long (GET /v1/events), then pruned. Default 30 days. */
  retentionMs?: number;
  now?: () => number;
  random?: () => number;
  logger?: Logger;
  metrics?: Metrics;
}

const PRUNE_EVERY_MS = 3_600_000;

/** The settings a SIGHUP may change on a running worker (config events.*). */
export type WebhookSettings = Pick<WebhookOptions, 'url' | 'secret'> &
  Required<Pick<WebhookOptions, 'timeoutMs' | 'retryBaseMs' | 'retryMaxMs' | 'pollMs' | 'retentionMs'>>;

export class WebhookDelivery {
  private url: string;
  private secret: string;
  private timeoutMs: number;
  private retryBaseMs: number;
  private retryMaxMs: number;
  private pollMs: number;
  private readonly batch: number;
  private retentionMs: number;
  private readonly now: () => number;
  private readonly random: () => number;
  private running = false;
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private nudged = false;
  private lastPrune = 0;
  private readonly inFlight = new Set<AbortController>();
  /** Delivery outcomes since start (tests and the log). */
  readonly stats = { delivered: 0, failed: 0 };

  constructor(private readonly options: WebhookOptions) {
    this.url = options.url;
    this.secret = options.secret;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.retryBaseMs = options.retryBaseMs ?? 1_000;
    this.retryMaxMs = options.retryMaxMs ?? 300_000;
    this.pollMs = options.pollMs ?? 1_000;
    this.batch = options.batch ?? 5;
    this.retentionMs = options.retentionMs ?? 30 * 86_400_000;
    this.now = options.now ?? Date.now;
    this.random = options.random ?? Math.random;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  /** Stops after the POSTs in flight (aborted) are settled. */
  async stop(): Promise<void> {
    this.running = false;
    for (const c of this.inFlight) c.abort();
    this.wake?.();
    await this.loop;
  }

  /**
   * New settings (SIGHUP): the next POST goes to the new URL, signed with the new secret; a POST in flight
   * finishes under the old ones. A changed poll interval applies from the next wait (this one is cut short).
   */
  configure(s: WebhookSettings): void {
    this.url = s.url;
    this.secret = s.secret;
    this.timeoutMs = s.timeoutMs;
    this.retryBaseMs = s.retryBaseMs;
    this.retryMaxMs = s.retryMaxMs;
    this.pollMs = s.pollMs;
    this.retentionMs = s.retentionMs;
    this.wake?.();
  }

  /** Look at the outbox now (an event was just written). */
  nudge(): void {
    this.nudged = true;
    this.wake?.();
  }

  /** One round: claims due events and delivers them in order. Returns how many were attempted. */
  async runOnce(): Promise<number> {
    const store = this.options.store;
    // The claim covers the whole batch's POSTs at their timeout, plus a margin.
    const claimed = await store.claimEvents(this.now(), this.batch * this.timeoutMs + 2_000, this.batch);
    for (const e of claimed) {
      if (!this.running) break;
      await this.deliver(e);
    }
    if (this.now() - this.lastPrune >= PRUNE_EVERY_MS) {
      this.lastPrune = this.now();
      const dropped = await store.pruneEvents({ deliveredBefore: this.now() - this.retentionMs, now: this.now() });
      if (dropped > 0) this.options.logger?.info({ dropped }, 'old events pruned');
    }
    return claimed.length;
  }

  private async run(): Promise<void> {
    while (this.running) {
      let attempted = 0;
      try {
        attempted = await this.runOnce();
      } catch (err) {
        // The store is down: try again after the poll interval.
        this.options.logger?.warn({ err }, 'event delivery round failed');
      }
      if (!this.running) break;
      // More may be due, or an event was written while this round ran: look again at once.
      if (attempted > 0 || this.nudged) {
        this.nudged = false;
        continue;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, this.pollMs);
        timer.unref();
        function done(): void {
          clearTimeout(timer);
          resolve();
        }
        this.wake = done;
      });
      this.wake = undefined;
    }
  }

  private async deliver(e: EventRecord): Promise<void> {
    const body = JSON.stringify(eventBody(e));
    const abort = new AbortController();
    this.inFlight.add(abort);
    const timer = setTimeout(() => abort.abort(new Error(`no answer within ${this.timeoutMs} ms`)), this.timeoutMs);
    let error: string | undefined;
    try {
      const res = await fetch(this.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'rotor-webhook',
          [SIGNATURE_HEADER]: signBody(body, this.secret),
          'x-rotor-event': e.type,
          'x-rotor-event-id': String(e.id),
        },
        body,
        redirect: 'manual',
        signal: abort.signal,
      });
      // The body is not needed, but reading it lets the connection be reused.
      await res.arrayBuffer().catch(() => undefined);
      if (res.status < 200 || res.status > 299) error = `HTTP ${res.status}`;
    } catch (err) {
      error = abort.signal.aborted
        ? `timeout or stop: ${String((abort.signal.reason as Error | undefined)?.message ?? '')}`
        : `request failed: ${(err as Error).message}`;
    } finally {
      clearTimeout(timer);
      this.inFlight.delete(abort);
    }
    const store = this.options.store;
    if (error === undefined) {
      this.stats.delivered++;
      this.options.metrics?.webhookDeliveries.inc({ result: 'delivered' });
      await store.settleEvent(e.id, { deliveredAt: this.now() });
      this.options.logger?.debug({ id: e.id, event: e.type }, 'event delivered');
      return;
    }
    this.stats.failed++;
    this.options.metrics?.webhookDeliveries.inc({ result: 'failed' });
    const delay = Math.min(this.retryMaxMs, this.retryBaseMs * 2 ** Math.min(e.attempts, 30)) * (1 + this.random() * 0.5);
    await store.settleEvent(e.id, { error, nextAttemptAt: this.now() + Math.round(delay) });
    this.options.logger?.warn(
      { id: e.id, event: e.type, attempts: e.attempts + 1, error, retryInMs: Math.round(delay) },
      'event delivery failed; will retry',
    );
  }
}
