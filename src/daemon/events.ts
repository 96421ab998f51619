// Events: written to the store's outbox, delivered by one worker (src/events/); the webhook settings follow
// reloads.
import type { Config } from '../config/schema.ts';
import { Events, WebhookSwitch } from '../events/index.ts';
import type { Backends } from '../store/backends.ts';
import type { AssemblyContext } from './lifecycle.ts';

export interface EventsPart {
  outbox: Events;
  webhook: WebhookSwitch;
  /** The events section in force (reload replaces it). */
  settings(): Config['events'];
  reload(next: Config['events']): Promise<void>;
}

export async function assembleEvents(config: Config, backends: Pick<Backends, 'outbox'>, ctx: AssemblyContext): Promise<EventsPart> {
  const store = backends.outbox;
  let settings = config.events;
  const logger = ctx.logger.child({ component: 'events' });
  const webhook = new WebhookSwitch({ store, metrics: ctx.metrics, logger });
  await webhook.apply(settings);
  ctx.stops.onStop('webhook delivery', () => webhook.stop());
  const outbox = new Events({
    store,
    deliver: webhook.delivery !== undefined,
    onAppended: () => webhook.nudge(),
    metrics: ctx.metrics,
    logger,
  });
  return {
    outbox,
    webhook,
    settings: () => settings,
    async reload(next) {
      await webhook.apply(next);
      outbox.setDeliver(webhook.delivery !== undefined);
      settings = next;
    },
  };
}
