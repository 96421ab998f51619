// Users as data: the store's records (config users seeded into them), mirrored in memory for the gateway,
// and the feed of their changes that other components follow.
import type { Config } from '../config/schema.ts';
import type { Fleet } from '../fleet/index.ts';
import type { PlatformClient } from '../platform/client.ts';
import type { Backends } from '../store/backends.ts';
import { UserChanges } from '../users/changes.ts';
import { Users } from '../users/directory.ts';
import { portsByNumber } from '../users/port-check.ts';
import { configuredPorts } from '../config/ports.ts';
import { boundUserSeries } from '../users/series.ts';
import { SUB_ACCOUNT_WINDOW_START, SubAccounts } from '../users/sub-account.ts';
import { SubAccountHealer } from '../accounts/heal.ts';
import { AccountRefusalCheck } from '../accounts/refusal-check.ts';
import { UserNotFoundError } from '../users/errors.ts';
import type { AccountsPart } from './accounts.ts';
import { clockOption, type AssemblyContext } from './lifecycle.ts';

export interface UsersPart {
  directory: Users;
  /** Re-creates a sub account the platform lost (src/accounts/heal.ts). */
  healer: SubAccountHealer;
  /** An upstream refused a user's account: balance, then sub account, read again (src/accounts/refusal-check.ts). */
  refusals: AccountRefusalCheck;
  changes: UserChanges;
  /** Expiries as they come (the directory's queue), taken by the user.expired watcher. */
  takeExpired(): { user: string; expiresAt: number }[];
  /** This daemon's listener ports once bound (config key → port), which no user's listen.port may take. */
  reservePorts(ports: Record<string, number | undefined>): void;
}

interface Needs {
  client: PlatformClient;
  backends: Pick<Backends, 'users'>;
  fleet: Fleet | undefined;
  accounts: AccountsPart;
}

export async function assembleUsers(config: Config, needs: Needs, ctx: AssemblyContext): Promise<UsersPart> {
  const { accounts, fleet } = needs;
  const logger = ctx.logger.child({ component: 'users' });
  // The product of users stored without one of their own (the first dynamic product the merchant may use: the
  // product listing). A start does not fail on that lookup (a platform busy for a moment, a listing it serves
  // otherwise): the listing is read again in the background until it answers.
  let defaultProduct = '';
  let retry: NodeJS.Timeout | undefined;
  let stopped = false;
  ctx.stops.onStop('users-default-product', () => {
    stopped = true;
    clearTimeout(retry);
  });
  const learnDefault = async (attempt: number): Promise<void> => {
    try {
      defaultProduct = (await accounts.products.productFor('')) ?? '';
      if (attempt > 0)
        logger.info(
          { product: defaultProduct || null },
          "the merchant's product listing is read: users stored without a product of their own draw from it",
        );
    } catch (err) {
      if (attempt === 0)
        logger.warn(
          { err },
          "the merchant's product listing could not be read at the start: users stored without a product of their own have none until it is read (asked again in the background)",
        );
      if (!stopped) retry = setTimeout(() => void learnDefault(attempt + 1), Math.min(60_000, 2_000 * 2 ** attempt)).unref();
    }
  };
  await learnDefault(0);
  const changes = new UserChanges();
  // abuse bounds: a user's listen.port is checked against these (the configured ones until the listeners are up)
  let ownPorts = portsByNumber(configuredPorts(config));
  // The window grows up to accounts.batchConcurrency: rows beyond it would only wait in the window's queue.
  const windowMax = config.accounts.batchConcurrency;
  const subAccounts = new SubAccounts(needs.client, accounts.products, logger, {
    start: Math.min(SUB_ACCOUNT_WINDOW_START, windowMax),
    max: windowMax,
  });
  const directory = new Users({
    store: needs.backends.users,
    accounting: accounts.accounting,
    platform: subAccounts,
    defaultProduct: () => defaultProduct,
    logger,
    ...clockOption(ctx),
    ...(fleet ? { followMs: 1000 } : {}),
    // Unfinished creations (`rotor users import --store` writes them) resumed as many at once as a batch's rows.
    resumeConcurrency: config.accounts.batchConcurrency,
    onChange: changes.emit,
    ports: { host: config.proxy.http.host, reserved: () => ownPorts, tls: config.proxy.https !== undefined },
  });
  const expired: { user: string; expiresAt: number }[] = [];
  directory.onExpired((user, expiresAt) => expired.push({ user, expiresAt }));
  await directory.start(accounts.configured);
  // The users' load is the start's largest allocation, and no collection is forced for it before ready: a
  // full compaction of the heap there was ~0.15-0.3 s of a 100,000-user restart's CPU before ready. Its garbage
  // goes with V8's own collections (the memory reducer's, once the daemon's allocation slows after ready) and
  // with the full compaction after the background platform check (src/daemon/accounts.ts follow).
  ctx.stops.onStop('users', () => directory.close());
  // Put back into Redis should it lose the fleet's data (src/fleet/index.ts rebuild).
  fleet?.holdUsers(() => directory.held());
  boundUserSeries({
    metrics: ctx.metrics,
    source: accounts.accounting,
    marked: () => directory.marked(),
    max: config.metrics.userSeriesMax,
  });
  // Per-pool and per-account series: half the bound each (src/telemetry/pool-series.ts, balance-series.ts), so
  // the whole page stays under 64 KB at the default whatever the number of users, pools and accounts.
  ctx.metrics.poolSeries.max = Math.ceil(config.metrics.userSeriesMax / 2);
  ctx.metrics.balanceSeries.max = Math.ceil(config.metrics.userSeriesMax / 2);
  await accounts.follow(directory, changes);
  const healer = new SubAccountHealer({
    recreate: async (name) => {
      const u = directory.view(name);
      if (!u) throw new UserNotFoundError(name);
      await subAccounts.ensure(u);
    },
    metrics: ctx.metrics,
    logger: ctx.logger.child({ component: 'accounts' }),
    ...clockOption(ctx),
  });
  accounts.limitSync.setHealer(healer);
  const refusals = new AccountRefusalCheck({
    balances: accounts.balances,
    readSubAccount: (user, productNo) => needs.client.call('GetProxyUserInfo', { appUsername: user, productNo }),
    healer,
    logger,
    ...clockOption(ctx),
  });
  return {
    directory,
    healer,
    refusals,
    changes,
    takeExpired: () => expired.splice(0),
    reservePorts: (ports) => (ownPorts = portsByNumber(ports)),
  };
}
