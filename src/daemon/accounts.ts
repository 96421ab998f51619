// The merchant's side of the platform: metering and limits (accounting), main and sub accounts reconciled with
// the configured users, the whitelist, balance polling, the platform-side backstop limit and traffic return.
import { Accounting, PlatformLimitSync, ProductCatalog } from '../accounting/index.ts';
import { usageAdoption } from '../accounting/adoption.ts';
import { AccountReconciler, BalanceWatcher, Traffic, Whitelist } from '../accounts/index.ts';
import type { Config, UserConfig } from '../config/schema.ts';
import { balanceLowListener } from '../events/index.ts';
import type { Fleet } from '../fleet/index.ts';
import type { PlatformClient } from '../platform/client.ts';
import type { LocalUser } from '../proxy/types.ts';
import type { Simulator } from '../sim/index.ts';
import type { Backends } from '../store/backends.ts';
import type { UsageStore } from '../accounting/accounting.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { UserChanges } from '../users/changes.ts';
import type { Users } from '../users/directory.ts';
import { PlatformCheck } from '../users/platform-check.ts';
import { collectStartGarbage } from '../startup/heap.ts';
import type { EventsPart } from './events.ts';
import { clockOption, type AssemblyContext } from './lifecycle.ts';

export interface AccountsPart {
  products: ProductCatalog;
  accounting: Accounting;
  whitelist: Whitelist;
  balances: BalanceWatcher;
  limitSync: PlatformLimitSync;
  /** Every user's platform side checked in the background (start, reload): src/users/platform-check.ts. */
  platformCheck: PlatformCheck;
  traffic: Traffic;
  /** The config's users as resolved at start. */
  configured: LocalUser[];
  /** The configured users with their product resolved (the merchant's default dynamic product when unset). */
  resolve(users: readonly UserConfig[]): Promise<LocalUser[]>;
  /** Accounts and whitelist brought in line with these users; balance and limit watchers follow them. */
  apply(users: readonly LocalUser[]): Promise<void>;
  /** The watchers' lists follow the users directory from now on (once per burst of changes). */
  follow(users: Users, changes: UserChanges): Promise<void>;
}

interface Needs {
  client: PlatformClient;
  backends: Pick<Backends, 'usage' | 'settings'>;
  fleet: Fleet | undefined;
  sim: Simulator | undefined;
  events: EventsPart;
}

export async function assembleAccounts(config: Config, needs: Needs, ctx: AssemblyContext): Promise<AccountsPart> {
  const { client, backends, fleet, sim, events } = needs;
  const { logger, metrics } = ctx;
  const products = new ProductCatalog({ client });
  const resolve = (users: readonly UserConfig[]) => resolveProducts(users, products, logger);
  // countBytes false: the listeners' relays already feed rotor_proxy_bytes_total (else it counted twice).
  const accounting = new Accounting({
    store: accountingStore(backends),
    metrics,
    flushIntervalMs: config.accounts.flushIntervalMs,
    countBytes: false,
    timeZone: config.billing.timezone,
    ...clockOption(ctx),
    logger: logger.child({ component: 'accounting' }),
    ...(fleet ? { allowance: fleet.allowance } : {}),
  });
  const configured = await resolve(config.users);
  // The stored counters only: the config's users are applied by the users directory's seed (src/daemon/users.ts),
  // once it knows each one's usage key. Applied here by plain name first, a config user made under a deleted
  // customer's name had its config limit written on that customer's row at every start that changed it.
  await accounting.start([]);
  ctx.stops.onStop('accounting', () => accounting.close());

  const reconciler = new AccountReconciler({ client, products, accounting, logger: logger.child({ component: 'accounts' }) });
  const whitelist = new Whitelist({
    client,
    products,
    store: backends.settings,
    egressIp: config.accounts.egressIp,
    logger: logger.child({ component: 'whitelist' }),
  });
  const balances = new BalanceWatcher({
    client,
    products,
    metrics,
    accounting,
    intervalMs: config.accounts.balancePollMs,
    logger: logger.child({ component: 'balances' }),
  });
  const limitSync = new PlatformLimitSync({
    client,
    accounting,
    products,
    intervalMs: config.accounts.limitSyncMs,
    logger: logger.child({ component: 'limits' }),
    ...(config.billing.adoptPlatformUsage ? { adopt: usageAdoption(fleet?.leases) } : {}),
  });
  const traffic = new Traffic({
    client,
    products,
    timeZone: config.platform.timeZone,
    onReturned: () => void balances.nudge(),
    logger: logger.child({ component: 'traffic' }),
  });
  const platformCheck = new PlatformCheck({
    check: (u) => limitSync.syncUser(u),
    concurrency: config.accounts.platformConcurrency,
    metrics,
    logger: logger.child({ component: 'limits' }),
  });

  const apply = async (list: readonly LocalUser[]): Promise<void> => {
    const report = await reconciler.reconcile(list);
    logger.info({ accounts: report }, 'platform accounts reconciled');
    if (sim && config.accounts.sandboxFlowMb > 0) {
      const { creditDemoFlow } = await import('../sim/demo-credit.ts');
      await creditDemoFlow(list, { client, clock: sim.clock, flowMb: config.accounts.sandboxFlowMb, logger });
    }
    const wl = await whitelist.reconcile(list);
    logger.info({ whitelist: wl }, 'whitelist reconciled');
    balances.setUsers(list);
    limitSync.setUsers(list);
  };
  balances.onBalance(balanceLowListener(events.outbox, () => events.settings().balanceLowMb, logger.child({ component: 'events' })));
  await apply(configured);

  const follow = async (users: Users, changes: UserChanges): Promise<void> => {
    // One list of every user for the three of them (not one walk of the directory each).
    const all = users.locals();
    balances.setUsers(all);
    limitSync.setUsers(all);
    // Subscribed before the awaits below: the start resumes unfinished creations in the background (1,000 made
    // ready at a time), and one made ready between the list above and a later subscription would be in neither
    // (a burst names its own users only; none walks everyone).
    // The balance watcher lists the users when a poll needs them, not per burst (35 ms at 100,000 users, each of
    // an import's bursts of 1,000).
    const listUsers = (): readonly LocalUser[] => users.locals();
    changes.onBurst(200, (burst) => {
      // The balances and the limit sync take the changes alone (walking every user per burst was O(users)).
      const changed = burst.whole ? undefined : [...burst.changed].flatMap((n) => users.get(n) ?? []);
      balances.setUsers(listUsers, changed);
      if (changed === undefined) limitSync.setUsers(users.locals());
      else
        limitSync.updateUsers(
          changed,
          [...burst.removed].filter((n) => users.get(n) === undefined),
        );
      if ([...burst.changed].some((n) => users.get(n)?.draw === 'api')) {
        whitelist.reconcile(users.locals()).catch((err: unknown) => logger.warn({ err }, 'whitelist reconcile after a user change failed'));
      }
    });
    await balances.start();
    ctx.stops.onStop('balances', () => balances.stop());
    await limitSync.start({ firstPass: false });
    ctx.stops.onStop('limit sync', () => limitSync.stop());
    // Every user's platform side is checked in the background: ready in seconds whatever the user count.
    platformCheck.start(all);
    ctx.stops.onStop('platform check', () => platformCheck.stop());
    // The check is the start's last burst of work: what the start left behind is returned now (src/startup/heap.ts).
    void platformCheck.done().then(() => {
      const gc = collectStartGarbage();
      const mib = (n: number): number => Math.round(n / 1024 / 102.4) / 10;
      logger.info({ heapUsedMiB: { before: mib(gc.before), after: mib(gc.after) }, ms: Math.round(gc.ms) }, 'start-up garbage collected');
    });
  };

  return { products, accounting, whitelist, balances, limitSync, platformCheck, traffic, configured, resolve, apply, follow };
}

async function resolveProducts(users: readonly UserConfig[], products: ProductCatalog, logger: Logger): Promise<LocalUser[]> {
  const out: LocalUser[] = [];
  for (const u of users) {
    let product = u.product;
    if (product === '') {
      product = (await products.productFor('')) ?? '';
      if (product === '') logger.warn({ user: u.name }, 'no dynamic product is authorized for the merchant; the user cannot draw');
    }
    out.push({ ...u, product });
  }
  return out;
}

/** Accounting keeps its counters in the usage backend and the configured limits it last applied in the settings. */
function accountingStore({ usage, settings }: Pick<Backends, 'usage' | 'settings'>): UsageStore {
  return {
    addUsage: (deltas, batchId) => usage.addUsage(deltas, batchId),
    getUsage: (user) => usage.getUsage(user),
    listUsage: () => usage.listUsage(),
    setLimit: (user, limitBytes) => usage.setLimit(user, limitBytes),
    getUsages: (users) => usage.getUsages(users),
    setLimits: (limits) => usage.setLimits(limits),
    usageChangedSince: (since) => usage.usageChangedSince(since),
    kvGet: <T>(key: string) => settings.kvGet<T>(key),
    kvSet: (key, value) => settings.kvSet(key, value),
  };
}
