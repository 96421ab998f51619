// Quota thresholds and expiries, checked off the data path: each user's usage of its current quota period,
// under that period's key (src/users/period.ts), so a threshold fires once per period. Both read only what
// changed (accounting's change feed, the directory's expiry queue): 10,000 idle users cost these rounds nothing.
import type { Config } from '../config/schema.ts';
import { ExpiryWatcher, QuotaWatcher } from '../events/index.ts';
import type { AccountsPart } from './accounts.ts';
import type { EventsPart } from './events.ts';
import type { AssemblyContext } from './lifecycle.ts';
import type { UsersPart } from './users.ts';

export interface WatchersPart {
  quota: QuotaWatcher;
  reload(next: Config['events']): void;
}

export function assembleWatchers(
  needs: { events: EventsPart; accounts: AccountsPart; users: UsersPart },
  ctx: AssemblyContext,
): WatchersPart {
  const { events, users } = needs;
  const logger = ctx.logger.child({ component: 'events' });
  const quotaFeed = needs.accounts.accounting.changeFeed();
  const quota = new QuotaWatcher({
    read: () =>
      quotaFeed
        .take()
        .flatMap((m) => (m.configured ? [{ user: m.name, periodKey: m.periodKey, usedBytes: m.used, limitBytes: m.limit }] : [])),
    events: events.outbox,
    intervalMs: events.settings().checkMs,
    logger,
  });
  quota.start();
  ctx.stops.onStop('quota watcher', () => quota.stop());
  users.changes.on((_names, removed) => {
    for (const name of removed) quota.forget(name);
  });
  const expiry = new ExpiryWatcher({ read: users.takeExpired, events: events.outbox, intervalMs: events.settings().checkMs, logger });
  expiry.start();
  ctx.stops.onStop('expiry watcher', () => expiry.stop());
  return {
    quota,
    reload(next) {
      quota.setIntervalMs(next.checkMs);
      expiry.setIntervalMs(next.checkMs);
    },
  };
}
