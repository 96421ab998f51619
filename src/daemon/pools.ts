// Pools of upstream nodes drawn from the platform, one per user, product and region: each user's draw as the
// product record allows it (reported once at start), drawers guarded by balance and whitelist.
import { guardDrawer } from '../accounts/draw-guard.ts';
import type { Config } from '../config/schema.ts';
import type { Orders } from '../orders/index.ts';
import type { PlatformClient } from '../platform/client.ts';
import { describePlan, planUsers } from '../pool/draw-plan.ts';
import { ApiDrawer, PwdDrawer, drawApiFromClient, type Drawer } from '../pool/drawer.ts';
import { drawProxyType, drawProtocol, ipsLeft, PlannedDrawer } from '../pool/planned-drawer.ts';
import { PoolRegistry } from '../pool/registry.ts';
import { PoolEmptyError, poolKeyId, type PoolKey } from '../pool/types.ts';
import type { LocalUser } from '../proxy/types.ts';
import type { AccountsPart } from './accounts.ts';
import { clockOption, type AssemblyContext } from './lifecycle.ts';
import type { UsersPart } from './users.ts';

interface Needs {
  client: PlatformClient;
  orders: Orders;
  accounts: AccountsPart;
  users: UsersPart;
}

export async function assemblePools(config: Config, needs: Needs, ctx: AssemblyContext): Promise<PoolRegistry> {
  const { client, accounts, users } = needs;
  const { logger, metrics } = ctx;
  const directory = users.directory;
  const drawApi = drawApiFromClient(client);
  const productRecord = (productNo: string) => needs.orders.catalog.product(productNo);
  const plans = await planUsers(accounts.configured, productRecord);
  for (const p of plans) {
    const log = logger.child({ component: 'pool', user: p.user.name, productNo: p.productNo });
    if (p.error) log.warn(`draw plan unknown: ${p.error}`);
    else if (p.plan && !p.plan.ok) log.error(`draws refused: ${p.plan.reason}`);
    else if (p.plan) {
      for (const note of p.plan.notes) log.warn(note);
      log.info(describePlan(p.user, p.productNo, p.plan));
    }
  }
  const soldByIp = new Set(plans.filter((p) => p.plan?.ok && p.plan.byIp).map((p) => `${p.user.name}/${p.productNo}`));
  const drawerFor = (key: PoolKey): Drawer => {
    const user = directory.get(key.user);
    // A user removed by a reload while its first connection was on the way: that pool has nothing to draw.
    if (!user) throw new PoolEmptyError(poolKeyId(key), `user ${key.user} is no longer configured`);
    return new PlannedDrawer({
      user,
      key,
      product: productRecord,
      ipsLeft: (main, productNo, proxyType) => ipsLeft(client, main, productNo, proxyType),
      logger: logger.child({ component: 'pool', pool: `${key.user}/${key.productNo}/${key.region}` }),
      build: (plan, record) => {
        // Drawers stamp node expiry (drawn at + sessTime) on the same clock the pools judge it by; with
        // Date.now here and an injected `now` in the pools, nodes drawn after the clock moved were born expired.
        const common = {
          api: drawApi,
          productNo: key.productNo,
          // Strings without a scheme speak the product's protocol (an HTTP-only product's host:port:user:pass).
          protocol: drawProtocol(record),
          metrics,
          ...(key.region ? { region: key.region } : {}),
          ...clockOption(ctx),
        };
        const inner =
          plan.method === 'api'
            ? // DrawByApi's proxyType is the product's (seed 4.16: 104 or 105); a platform refuses a pair that does not match.
              new ApiDrawer({
                ...common,
                mainAccount: user.mainAccount,
                proxyType: drawProxyType(record),
                // A proxyUrl that is a path on the platform's host is fetched from there.
                ...(config.platform.baseUrl ? { linkBase: config.platform.baseUrl } : {}),
              })
            : new PwdDrawer({
                ...common,
                subAccount: plan.account,
                sessTime: plan.sessTime,
                logger: logger.child({ component: 'pool', user: user.name }),
              });
        return guardDrawer(inner, { name: user.name, mainAccount: user.mainAccount, draw: plan.method }, key.productNo, {
          whitelist: accounts.whitelist,
          balances: accounts.balances,
          heal: users.healer,
        });
      },
    });
  };
  const { strategy, lowWater, drawBatch, maxFails, failWindowMs, coolDownMs, acquireTimeoutMs } = config.pool;
  const pools = new PoolRegistry({
    drawerFor,
    maxPerUser: config.pool.maxPerUser,
    replacePerMinute: config.pool.replacePerMinute,
    idleEvictMs: config.pool.idleEvictMs,
    ...clockOption(ctx),
    tuning: {
      strategy,
      lowWater,
      drawBatch,
      maxFails,
      failWindowMs,
      coolDownMs,
      acquireTimeoutMs,
      probation: true,
      redrawAfterMs: config.pool.redrawAfterMs,
      outlier: config.pool.outlier,
    },
    // Sold by IP count: hold one exit at a time (every exit drawn spends an IP of the package).
    // Nor warm upstream connections (an authenticated connection may hold an exit: src/proxy/warm.ts).
    tuningFor: (key) => (soldByIp.has(`${key.user}/${key.productNo}`) ? { drawBatch: 1, lowWater: 1, warm: false } : undefined),
    metrics,
    logger: logger.child({ component: 'pool' }),
  });
  ctx.stops.onStop('pools', () => pools.close());

  // A user's sub account made again: the nodes drawn under the lost one carry its void password; without
  // forgetting them a quiet pool (a backconnect gateway's one line) would refuse the user until the quiet ends.
  users.healer.onHealed((name) => {
    for (const pool of pools.ofUser(name)) pool.forgetNodes();
  });

  // A user removed, or changed in how it draws: its pools are dropped (live connections keep their node).
  // The user as last seen (the directory's own object, not a key string per user: 100,000 users).
  const drawShape = new Map<string, LocalUser>();
  for (const u of directory.locals()) drawShape.set(u.name, u);
  users.changes.on((names, removed) => {
    for (const name of [...names, ...removed]) {
      const now = directory.get(name);
      const before = drawShape.get(name);
      if (now === undefined) drawShape.delete(name);
      else drawShape.set(name, now);
      if ((before && drawKey(before)) === (now && drawKey(now))) continue;
      for (const pool of pools.ofUser(name)) pools.delete(pool.key);
    }
  });
  return pools;
}

/** What a user's pools depend on: when it changes, its pools are dropped. */
function drawKey(u: LocalUser): string {
  return `${u.draw}|${u.product}|${u.mainAccount}|${u.sessTime}`;
}
