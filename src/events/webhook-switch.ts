// The webhook worker as `events.*` asks for it, at start and again on every reload (SIGHUP): a URL set for
// the first time starts a worker, a URL removed stops it (after the POSTs in flight), and changed settings
// (URL, secret, timeouts, backoff, poll, retention) go to the running worker without losing its place in
// the outbox. The composition root (src/main.ts) owns one of these instead of a fixed worker.
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { EventOutbox } from '../store/events.ts';
import { WebhookDelivery, type WebhookSettings } from './webhook.ts';

/** The `events:` config fields the worker follows (src/config/schema.ts). */
export interface WebhookConfig {
  webhookUrl: string;
  secret: string;
  timeoutMs: number;
  retryBaseMs: number;
  retryMaxMs: number;
  pollMs: number;
  retentionDays: number;
}

export interface WebhookSwitchOptions {
  store: EventOutbox;
  metrics?: Metrics;
  logger?: Logger;
  now?: () => number;
}

export function webhookSettings(c: WebhookConfig): WebhookSettings {
  return {
    url: c.webhookUrl,
    secret: c.secret,
    timeoutMs: c.timeoutMs,
    retryBaseMs: c.retryBaseMs,
    retryMaxMs: c.retryMaxMs,
    pollMs: c.pollMs,
    retentionMs: c.retentionDays * 86_400_000,
  };
}

export class WebhookSwitch {
  private current: WebhookDelivery | undefined;

  constructor(private readonly options: WebhookSwitchOptions) {}

  /** The running worker, if a webhook is configured. */
  get delivery(): WebhookDelivery | undefined {
    return this.current;
  }

  /** Starts, reconfigures or stops the worker to match `c`. */
  async apply(c: WebhookConfig): Promise<void> {
    if (c.webhookUrl === '') {
      const was = this.current;
      this.current = undefined;
      if (was) {
        await was.stop();
        this.options.logger?.info('webhook removed: events are listed by GET /v1/events only');
      }
      return;
    }
    if (this.current) {
      this.current.configure(webhookSettings(c));
      return;
    }
    const { store, metrics, logger, now } = this.options;
    this.current = new WebhookDelivery({
      store,
      ...webhookSettings(c),
      ...(metrics ? { metrics } : {}),
      ...(logger ? { logger } : {}),
      ...(now ? { now } : {}),
    });
    this.current.start();
  }

  /** An event was written: look at the outbox now. */
  nudge(): void {
    this.current?.nudge();
  }

  async stop(): Promise<void> {
    const was = this.current;
    this.current = undefined;
    await was?.stop();
  }
}
