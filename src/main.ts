// The composition root: builds every component from a validated Config, starts them in dependency order,
// and stops them in the reverse order. It holds no logic of its own beyond wiring, reload and shutdown.
import type { Config, UserConfig } from './config/schema.ts';
import { loadConfig } from './config/index.ts';
import { createLogger, type Logger } from './telemetry/logger.ts';
import { createMetrics, type Metrics } from './telemetry/metrics.ts';
import { PlatformClient } from './platform/client.ts';
import { isRedisUrl, openStoreFor } from './store/open.ts';
import type { Store } from './store/types.ts';
import type { Fleet } from './fleet/index.ts';
import { orderLeaseName } from './orders/index.ts';
import { Accounting, PlatformLimitSync, ProductCatalog } from './accounting/index.ts';
import { AccountReconciler, BalanceWatcher, Traffic, Whitelist } from './accounts/index.ts';
import { guardDrawer } from './accounts/draw-guard.ts';
import { Orders } from './orders/index.ts';
import { PoolRegistry } from './pool/registry.ts';
import { startHealthProbes } from './health/index.ts';
import { describePlan, planUsers } from './pool/draw-plan.ts';
import { ipsLeft, PlannedDrawer } from './pool/planned-drawer.ts';
import { ApiDrawer, PwdDrawer, drawApiFromClient, type Drawer } from './pool/drawer.ts';
import { SessionTable } from './session/table.ts';
import { Router } from './proxy/router.ts';
import { WarmConnections } from './proxy/warm.ts';
import { Socks5Listener } from './proxy/socks5.ts';
import { HttpListener } from './proxy/http.ts';
import { HttpsListener, loadTlsPair } from './proxy/https-listener.ts';
import { UpstreamTlsPolicy } from './proxy/dial-tls.ts';
import type { LocalUser } from './proxy/types.ts';
import { PoolEmptyError, poolKeyId, type PoolKey } from './pool/types.ts';
import { buildAdminServer, buildCallbackServer } from './admin/server.ts';
import { attachPortal } from './portal/daemon.ts';
import { checkListenAddresses, listenAs } from './startup/ports.ts';
import { RegionDirectory } from './orders/regions.ts';
import { createReadiness } from './admin/readiness.ts';
import { InstanceDirectoryCache } from './orders/instance-directory.ts';
import { Users } from './users/directory.ts';
import { UserGate } from './users/gate.ts';
import { boundUserSeries } from './users/series.ts';
import { SubAccounts } from './users/sub-account.ts';
import { usersPort } from './users/admin-port.ts';
import type { FastifyInstance } from 'fastify';
import type { Simulator } from './sim/index.ts';
import { DestinationPolicy } from './users/rules.ts';
import { UserPorts } from './users/ports.ts';
import { Events, ExpiryWatcher, QuotaWatcher, WebhookDelivery, WebhookSwitch, balanceLowListener, orderFinalWriter } from './events/index.ts';
import { createConnectionLog, type ConnectionLogService } from './connlog/index.ts';
import { platformFlowFrom } from './connlog/platform-flow.ts';

export interface DaemonOptions {
  logger?: Logger;
  metrics?: Metrics;
  /** Embedded mode: options for the in-process sandbox (tests speed its clock up). */
  /** gatewayPorts: how many password-gateway ports (upstream "nodes") the sandbox opens; default 4. */
  sim?: { orderDelayMs?: number; clockSpeed?: number; gatewayPorts?: number };
  /** The gateway's clock (sticky sessions, pools, dial deadlines); tests move it to expire sessions. */
  now?: () => number;
  /** Connection ids (tests inject a sequence); default random prefix + counter. */
  connectionIds?: () => string;
}

export interface Daemon {
  readonly config: Config;
  readonly ports: { http: number; socks5: number; admin: number; callback: number; https?: number; portal?: number | undefined };
  readonly platform: { baseUrl: string; appKey: string };
  /** The in-process sandbox in embedded mode. */
  readonly sim: Simulator | undefined;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly accounting: Accounting;
  readonly orders: Orders;
  readonly sessions: SessionTable;
  readonly pools: PoolRegistry;
  /** The users directory (users as data). */
  readonly users: Users;
  /** Fleet mode (`store.path: redis://…`): the shared allowance, sessions and leases; undefined with SQLite. */
  readonly fleet: Fleet | undefined;
  /** The event outbox, its webhook worker (when events.webhookUrl is set) and the quota watcher (src/events/). */
  readonly events: { outbox: Events; delivery: WebhookDelivery | undefined; quota: QuotaWatcher };
  /** Users' own ports (`listen`), kept in step with the users (src/users/ports.ts). */
  readonly userPorts: UserPorts;
  /** The connection log: live connections, records, usage rollups. */
  readonly connections: ConnectionLogService;
  /** Applies a new config (users, limits, pools) without dropping live connections. */
  reload(next: Config): Promise<void>;
  /** Stop accepting, drain live connections up to `drainMs`, flush counters, close everything. */
  close(drainMs?: number): Promise<void>;
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

export async function startDaemon(config: Config, options: DaemonOptions = {}): Promise<Daemon> {
  const logger = options.logger ?? createLogger({ level: config.log.level });
  const metrics = options.metrics ?? createMetrics();
  const stack: Array<{ name: string; stop: () => Promise<unknown> | unknown }> = [];
  const onStop = (name: string, stop: () => Promise<unknown> | unknown): void => {
    stack.push({ name, stop });
  };
  const closeAll = async (): Promise<void> => {
    while (stack.length > 0) {
      const { name, stop } = stack.pop()!;
      try {
        await stop();
      } catch (err) {
        logger.error({ err, component: name }, 'error while stopping');
      }
    }
  };

  // Every listener address is bound (and released) before anything touches the platform (src/startup/ports.ts).
  const addresses = {
    http: { section: 'proxy.http', host: config.proxy.http.host, port: config.proxy.http.port },
    socks5: { section: 'proxy.socks5', host: config.proxy.socks5.host, port: config.proxy.socks5.port },
    admin: { section: 'admin', host: config.admin.host, port: config.admin.port },
    callback: { section: 'callback', host: config.callback.host, port: config.callback.port },
    ...(config.proxy.https ? { https: { section: 'proxy.https', host: config.proxy.https.host, port: config.proxy.https.port } } : {}),
  };
  await checkListenAddresses(Object.values(addresses));
  // The HTTPS proxy's certificate is read as early (a wrong path fails the start, naming its key).
  const tlsPair = config.proxy.https ? await loadTlsPair(config.proxy.https.cert, config.proxy.https.key) : undefined;

  try {
    // 1. The platform: the in-process sandbox in embedded mode, else the configured one.
    let sim: Simulator | undefined;
    let platformConfig = config.platform;
    if (config.platform.mode === 'embedded') {
      const { startSimulator, sandboxStateFile } = await import('./sim/index.ts');
      const stateFile = sandboxStateFile(config.store.path);
      sim = await startSimulator({
        ...(stateFile ? { stateFile } : {}),
        ...(options.sim?.orderDelayMs !== undefined ? { orderDelayMs: options.sim.orderDelayMs } : {}),
        ...(options.sim?.clockSpeed !== undefined ? { clock: { speed: options.sim.clockSpeed } } : {}),
        ...(options.sim?.gatewayPorts !== undefined ? { gatewayPorts: options.sim.gatewayPorts } : {}),
        ...(Object.keys(config.platform.sandbox.drawnLines).length > 0 ? { drawnLines: config.platform.sandbox.drawnLines } : {}),
        backconnect: config.platform.sandbox.backconnect, latencyMs: config.platform.sandbox.latencyMs,
      });
      const started = sim;
      onStop('sandbox', () => started.close());
      platformConfig = { ...config.platform, baseUrl: sim.baseUrl, appKey: sim.appKey, appSecret: sim.appSecret };
      logger.info({ baseUrl: sim.baseUrl }, 'embedded sandbox platform started');
    }
    const client = new PlatformClient({
      baseUrl: platformConfig.baseUrl,
      appKey: platformConfig.appKey,
      appSecret: platformConfig.appSecret,
      version: platformConfig.version,
      encrypt: platformConfig.encrypt,
      timeoutMs: platformConfig.timeoutMs,
      retries: platformConfig.retries,
      backoff: platformConfig.backoff,
      logger: logger.child({ component: 'platform' }),
      metrics,
    });
    onStop('platform client', () => client.close());

    // 2. State: SQLite for one daemon; Redis (and the fleet's shared parts on its connection) for several.
    const fleetConfig = config.fleet;
    const store: Store = await openStoreFor(config.store.path, isRedisUrl(config.store.path) ? { prefix: fleetConfig.prefix, logger: logger.child({ component: 'store' }) } : {});
    onStop('store', () => store.close());
    let fleet: Fleet | undefined;
    // The fleet's parts (and the Redis driver) are loaded only for a redis:// store: a daemon on SQLite never
    // holds them (docs/benchmarks.md "Idle RSS").
    let fleetParts: typeof import('./fleet/index.ts') | undefined;
    if (isRedisUrl(config.store.path)) {
      const { RedisStore } = await import('./store/redis.ts');
      fleetParts = await import('./fleet/index.ts');
      if (!(store instanceof RedisStore)) throw new Error('a redis:// store.path opened a store that is not the Redis driver');
      const started = fleetParts.startFleet(store.connection, {
        ...(fleetConfig.instanceId ? { instanceId: fleetConfig.instanceId } : {}),
        prefix: fleetConfig.prefix,
        sliceBytes: fleetConfig.sliceBytes,
        offlineBytes: fleetConfig.offlineBytes,
        aliveTtlMs: fleetConfig.aliveTtlMs,
        leaseTtlMs: fleetConfig.leaseTtlMs,
        logger: logger.child({ component: 'fleet' }),
        ...(options.now ? { now: options.now } : {}),
      });
      fleet = started;
      // After the accounting's last flush and the orders' stop (both registered later, so stopped earlier).
      onStop('fleet', () => started.close());
      logger.info({ instance: started.instance, sliceBytes: fleetConfig.sliceBytes, offlineBytes: fleetConfig.offlineBytes }, 'fleet mode: limits, sticky sessions and order tracking shared through redis');
    }

    // Events: written to the store's outbox, delivered by one worker (src/events/). `ev` follows reloads.
    let ev = config.events;
    const webhook = new WebhookSwitch({ store, metrics, logger: logger.child({ component: 'events' }) });
    await webhook.apply(ev);
    onStop('webhook delivery', () => webhook.stop());
    const events = new Events({ store, deliver: webhook.delivery !== undefined, onAppended: () => webhook.nudge(), metrics, logger: logger.child({ component: 'events' }) });

    // 3. Accounts, limits, balances.
    const products = new ProductCatalog({ client });
    const users = await resolveProducts(config.users, products, logger);
    // countBytes false: the listeners' relays already feed rotor_proxy_bytes_total (else it counted twice).
    const accounting = new Accounting({
      store,
      metrics,
      flushIntervalMs: config.accounts.flushIntervalMs,
      countBytes: false,
      timeZone: config.billing.timezone,
      ...(options.now ? { now: options.now } : {}),
      logger: logger.child({ component: 'accounting' }),
      ...(fleet ? { allowance: fleet.allowance } : {}),
    });
    await accounting.start(users);
    onStop('accounting', () => accounting.close());

    const reconciler = new AccountReconciler({ client, products, accounting, logger: logger.child({ component: 'accounts' }) });
    const whitelist = new Whitelist({ client, products, store, egressIp: config.accounts.egressIp, logger: logger.child({ component: 'whitelist' }) });
    const balances = new BalanceWatcher({ client, products, metrics, accounting, intervalMs: config.accounts.balancePollMs, logger: logger.child({ component: 'balances' }) });
    const limitSync = new PlatformLimitSync({ client, accounting, products, intervalMs: config.accounts.limitSyncMs, logger: logger.child({ component: 'limits' }) });
    const traffic = new Traffic({ client, products, onReturned: () => void balances.nudge() });

    const applyAccounts = async (list: readonly LocalUser[]): Promise<void> => {
      const report = await reconciler.reconcile(list);
      logger.info({ accounts: report }, 'platform accounts reconciled');
      if (sim && config.accounts.sandboxFlowMb > 0) {
        const { creditDemoFlow } = await import('./sim/demo-credit.ts');
        await creditDemoFlow(list, { client, clock: sim.clock, flowMb: config.accounts.sandboxFlowMb, logger });
      }
      const wl = await whitelist.reconcile(list);
      logger.info({ whitelist: wl }, 'whitelist reconciled');
      balances.setUsers(list);
      limitSync.setUsers(list);
    };
    balances.onBalance(balanceLowListener(events, () => ev.balanceLowMb, logger.child({ component: 'events' })));
    await applyAccounts(users);

    // Users as data: the store's records (config users seeded into them), mirrored in memory for the gateway.
    const defaultProduct = (await products.productFor('')) ?? '';
    let refreshLists: (names: string[], removed: string[]) => void = () => undefined;
    const usersDir = new Users({
      store,
      accounting,
      platform: new SubAccounts(client, products, logger.child({ component: 'users' })),
      defaultProduct: () => defaultProduct,
      logger: logger.child({ component: 'users' }),
      ...(options.now ? { now: options.now } : {}),
      ...(fleet ? { followMs: 1000 } : {}),
      onChange: (names, removed) => refreshLists(names, removed),
    });
    // Expiries as they come (the directory's queue), for the user.expired watcher below.
    const expired: { user: string; expiresAt: number }[] = [];
    usersDir.onExpired((user, expiresAt) => expired.push({ user, expiresAt }));
    await usersDir.start(users);
    onStop('users', () => usersDir.close());
    balances.setUsers(usersDir.locals());
    limitSync.setUsers(usersDir.locals());
    boundUserSeries({ metrics, source: accounting, marked: () => usersDir.marked(), max: config.metrics.userSeriesMax });
    await balances.start();
    onStop('balances', () => balances.stop());
    await limitSync.start();
    onStop('limit sync', () => limitSync.stop());

    // 4. Static orders.
    const o = config.orders;
    const orders = new Orders({
      client,
      store,
      metrics,
      logger: logger.child({ component: 'orders' }),
      tracking: {
        pollInitialMs: o.pollInitialMs,
        pollMaxMs: o.pollMaxMs,
        sweepMs: o.sweepMs,
        expiryWarnHours: o.expiryWarnHours,
        ...(o.autoRenew.enabled ? { autoRenew: o.autoRenew } : {}),
      },
      ...(fleet ? { claims: fleet.leases } : {}),
      storeFinalOrder: orderFinalWriter(events, store),
    });
    fleet?.onLeaseLost((name) => {
      if (name.startsWith(orderLeaseName(''))) orders.tracker.drop(name.slice(orderLeaseName('').length));
    });
    await orders.start();
    onStop('orders', () => orders.stop());
    const instances = new InstanceDirectoryCache(store, { logger, ...(options.now ? { now: options.now } : {}) });
    await instances.start();
    onStop('instance directory', () => instances.stop());

    // 5. The gateway.
    const directory = usersDir;
    const drawApi = drawApiFromClient(client);
    const productRecord = (productNo: string) => orders.catalog.product(productNo);
    // Each user's draw as the product record allows it, reported once at start (check-config prints the same).
    const plans = await planUsers(users, productRecord);
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
        build: (plan) => {
          // Drawers stamp node expiry (drawn at + sessTime) on the same clock the pools judge it by; with
          // Date.now here and an injected `now` in the pools, nodes drawn after the clock moved were born expired.
          const common = {
            api: drawApi,
            productNo: key.productNo,
            metrics,
            ...(key.region ? { region: key.region } : {}),
            ...(options.now ? { now: options.now } : {}),
          };
          const inner =
            plan.method === 'api'
              ? new ApiDrawer({ ...common, mainAccount: user.mainAccount, proxyType: 104 })
              : new PwdDrawer({ ...common, subAccount: plan.account, sessTime: plan.sessTime, logger: logger.child({ component: 'pool', user: user.name }) });
          return guardDrawer(inner, { mainAccount: user.mainAccount, draw: plan.method }, key.productNo, { whitelist, balances });
        },
      });
    };
    const { strategy, lowWater, drawBatch, maxFails, failWindowMs, coolDownMs, acquireTimeoutMs } = config.pool;
    const pools = new PoolRegistry({
      drawerFor,
      maxPerUser: config.pool.maxPerUser,
      idleEvictMs: config.pool.idleEvictMs,
      ...(options.now ? { now: options.now } : {}),
      tuning: { strategy, lowWater, drawBatch, maxFails, failWindowMs, coolDownMs, acquireTimeoutMs, probation: true, redrawAfterMs: config.pool.redrawAfterMs, outlier: config.pool.outlier },
      // Sold by IP count: hold one exit at a time (every exit drawn spends an IP of the package).
      tuningFor: (key) => (soldByIp.has(`${key.user}/${key.productNo}`) ? { drawBatch: 1, lowWater: 1 } : undefined),
      metrics,
      logger: logger.child({ component: 'pool' }),
    });
    onStop('pools', () => pools.close());
    const sessions = new SessionTable({ metrics, ...(options.now ? { now: options.now } : {}) });
    const sweep = setInterval(() => sessions.sweep(), 30_000);
    sweep.unref();
    onStop('session sweep', () => clearInterval(sweep));

    const poolProvider = { pool: (key: PoolKey) => pools.get(key) };
    const fleetSessions = fleet && fleetParts
      ? new fleetParts.FleetSessions({ table: sessions, shared: fleet.sessions, pools: poolProvider, logger: logger.child({ component: 'fleet' }), ...(options.now ? { now: options.now } : {}) })
      : undefined;
    const regions = new RegionDirectory(orders.catalog, { logger: logger.child({ component: 'regions' }) });
    await regions.start();
    onStop('regions', () => regions.stop());
    const destinations = new DestinationPolicy(config.proxy.rules);
    // Warm upstream connections (src/proxy/warm.ts); never for products sold by IP count (an authenticated connection may hold an exit).
    const warm = new WarmConnections({
      ...config.pool.warm, metrics, connectTimeoutMs: config.proxy.connectTimeoutMs, handshakeTimeoutMs: config.proxy.upstreamHandshakeTimeoutMs ?? config.proxy.connectTimeoutMs,
      enabledFor: (key) => !key || (!soldByIp.has(`${key.user}/${key.productNo}`) && !config.pool.warm.off.includes(key.productNo)),
    });
    onStop('warm upstream connections', () => warm.close());
    const upstreamTls = new UpstreamTlsPolicy(config.pool.tls, logger.child({ component: 'gateway' }));
    const routerOptions = {
      dialers: { socks5: warm.socks5, http: warm.http },
      destinations,
      regionKnown: (code: string) => regions.isKnown(code),
      users: directory,
      meters: new UserGate(usersDir, accounting, options.now ?? Date.now),
      instances,
      metrics,
      logger: logger.child({ component: 'gateway' }),
      retries: config.proxy.retries,
      connectTimeoutMs: config.proxy.connectTimeoutMs,
      handshakeTimeoutMs: config.proxy.upstreamHandshakeTimeoutMs ?? config.proxy.connectTimeoutMs,
      hedgeAfterMs: config.proxy.hedgeAfterMs,
      upstreamTls,
      ...(options.now ? { now: options.now } : {}),
    };
    const router = fleetSessions && fleetParts ? new fleetParts.FleetRouter(routerOptions, fleetSessions) : new Router({ ...routerOptions, pools: poolProvider, sessions });
    const prober = startHealthProbes({
      pools: () => pools.list(),
      healthCheck: config.pool.healthCheck,
      connectTimeoutMs: config.proxy.connectTimeoutMs,
      handshakeTimeoutMs: config.proxy.upstreamHandshakeTimeoutMs ?? config.proxy.connectTimeoutMs,
      recentTarget: () => router.recentTarget(),
      metrics,
      logger: logger.child({ component: 'health' }),
      ...(options.now ? { now: options.now } : {}),
    });
    onStop('health probes', () => prober.stop());
    // Users' own ports hand their sockets to the shared listeners, which admit an allowed address without
    // credentials through userPorts.admit.
    const userPorts = new UserPorts({
      host: config.proxy.http.host,
      listeners: { http: { handleSocket: (s) => httpListener.handleSocket(s) }, socks5: { handleSocket: (s) => socksListener.handleSocket(s) } },
      authorizeUser: (name) => router.authorizeUser(name),
      handshakeTimeoutMs: config.proxy.handshakeTimeoutMs,
      logger: logger.child({ component: 'user-ports' }),
    });
    // Registered before the listeners, so it stops after them: every connection has ended into a record
    // before the last flush.
    const connections = createConnectionLog({
      config,
      store,
      priceOf: (user) => directory.get(user)?.pricePerGb ?? config.billing.defaultPricePerGb,
      accountOf: (user) => directory.get(user),
      platformFlow: platformFlowFrom(traffic),
      metrics,
      logger: logger.child({ component: 'connlog' }),
      ...(options.connectionIds ? { ids: options.connectionIds } : {}),
      ...(options.now ? { now: options.now } : {}),
    });
    onStop('connection log', () => connections.close());
    const httpListener = new HttpListener({
      anonymous: (socket) => userPorts.admit(socket),
      recorder: connections.recorder,
      router,
      host: config.proxy.http.host,
      port: config.proxy.http.port,
      idleTimeoutMs: config.proxy.idleTimeoutMs,
      handshakeTimeoutMs: config.proxy.handshakeTimeoutMs,
      pipelineDepth: config.proxy.pipelineDepth,
      metrics,
      logger: logger.child({ component: 'http' }),
    });
    const socksListener = new Socks5Listener({
      anonymous: (socket) => userPorts.admit(socket),
      recorder: connections.recorder,
      router,
      host: config.proxy.socks5.host,
      port: config.proxy.socks5.port,
      handshakeTimeoutMs: config.proxy.handshakeTimeoutMs,
      idleTimeoutMs: config.proxy.idleTimeoutMs,
      metrics,
      logger: logger.child({ component: 'socks5' }),
    });
    const httpAddr = await listenAs(addresses.http, () => httpListener.listen());
    const socksAddr = await listenAs(addresses.socks5, () => socksListener.listen());
    const https = tlsPair && config.proxy.https ? new HttpsListener({ http: httpListener, ...config.proxy.https, handshakeTimeoutMs: config.proxy.handshakeTimeoutMs, metrics, logger: logger.child({ component: 'https' }) }, tlsPair) : undefined;
    const httpsAddr = https && addresses.https ? await listenAs(addresses.https, () => https.listen()) : undefined;
    let draining = 0;
    onStop('listeners', () => {
      connections.recorder.stopping(draining);
      return Promise.all([httpListener.close(draining), socksListener.close(draining), https?.close()]);
    });
    await userPorts.sync(directory.locals());
    onStop('user ports', () => userPorts.close());

    // Quota thresholds and expiries, checked off the data path: each user's usage of its current quota
    // period, under that period's key (src/users/period.ts), so a threshold fires once per period.
    // Both read only what changed (accounting's change feed, the directory's expiry queue): 10,000 idle
    // users cost these rounds nothing.
    const quotaFeed = accounting.changeFeed();
    const quota = new QuotaWatcher({
      read: () => quotaFeed.take().flatMap((m) => (m.configured ? [{ user: m.name, periodKey: m.periodKey, usedBytes: m.used, limitBytes: m.limit }] : [])),
      events,
      intervalMs: ev.checkMs,
      logger: logger.child({ component: 'events' }),
    });
    quota.start();
    onStop('quota watcher', () => quota.stop());
    const expiry = new ExpiryWatcher({
      read: () => expired.splice(0),
      events,
      intervalMs: ev.checkMs,
      logger: logger.child({ component: 'events' }),
    });
    expiry.start();
    onStop('expiry watcher', () => expiry.stop());

    // 6. Admin API and platform callbacks.
    const ready = createReadiness({
      probePlatform: () => client.call('GetAppInfo', {}),
      probeStore: () => store.kvGet('readyz.probe'),
      listenersUp: () => httpListener.port > 0 && socksListener.port > 0,
    });
    const admin: FastifyInstance = buildAdminServer(
      {
        platform: client,
        catalog: orders.catalog,
        orders,
        balances,
        traffic,
        whitelist,
        users: usersPort(usersDir, { logger: logger.child({ component: 'users' }) }),
        // Dynamic pools, then the static instances dialed so far (`instance/<instanceNo>`, their failures).
        pools: { snapshot: () => [...pools.snapshot(), ...router.staticPools().map((p) => p.poolSnapshot())] },
        sessions: fleetSessions ?? sessions,
        metrics: metrics.registry,
        ready,
        events,
        connections,
        billing: { currency: config.billing.currency },
      },
      {
        token: config.admin.token,
        host: config.admin.host,
        allowedHosts: config.admin.allowedHosts,
        allowedOrigins: config.admin.allowedOrigins,
        logger: logger.child({ component: 'admin' }),
        callbackPath: config.callback.path,
      },
    );
    // The customer portal and the admin's access generator (src/portal/daemon.ts).
    const portal = await attachPortal({ config, admin, users: usersDir, connections, catalog: orders.catalog, proxyPorts: () => ({ http: httpAddr.port, socks5: socksAddr.port }), logger: logger.child({ component: 'portal' }) });
    onStop('portal', () => portal.close());
    await listenAs(addresses.admin, () =>
      admin.listen({ host: config.admin.host, port: config.admin.port, listenTextResolver: (address) => `admin API listening at ${address}` }),
    );
    onStop('admin', () => admin.close());
    const callbacks = buildCallbackServer((query) => orders.handleCallback(query), { path: config.callback.path, logger: logger.child({ component: 'callback' }) });
    await listenAs(addresses.callback, () =>
      callbacks.listen({ host: config.callback.host, port: config.callback.port, listenTextResolver: (address) => `platform callbacks listening at ${address}` }),
    );
    onStop('callbacks', () => callbacks.close());
    const adminPort = portOf(admin);
    const callbackPort = portOf(callbacks);
    if (sim) sim.setCallbackUrl(`http://${urlHost(config.callback.host)}:${callbackPort}${config.callback.path}`);

    logger.info(
      { http: httpAddr, socks5: socksAddr, ...(httpsAddr ? { https: httpsAddr } : {}), admin: adminPort, callback: callbackPort, users: users.map((u) => u.name) },
      'rotor is ready',
    );

    // A user changed or removed through the API (or by another daemon): its pools follow, and so do the
    // balance watcher's, the limit sync's and the whitelist's lists.
    const drawShape = new Map(usersDir.locals().map((u) => [u.name, drawKey(u)]));
    refreshLists = (names, removed) => {
      for (const name of removed) quota.forget(name);
      for (const name of names) changedSinceLists.add(name);
      for (const name of removed) removedSinceLists.add(name);
      // A reload names nobody (and applyAccounts gave the limit sync the config's users alone): all of them.
      if (names.length === 0 && removed.length === 0) listsWhole = true;
      for (const name of [...names, ...removed]) {
        const now = usersDir.get(name);
        const shape = now ? drawKey(now) : undefined;
        if (drawShape.get(name) !== shape) {
          for (const pool of pools.list()) if (pool.key.user === name) pools.delete(pool.key);
          if (shape === undefined) drawShape.delete(name);
          else drawShape.set(name, shape);
        }
      }
      if (names.some((n) => usersDir.get(n)?.draw === 'api')) whitelistDue = true;
      router.setUsers(usersDir);
      // The lists are O(users): rebuilt once per burst of changes (10,000 creations are not 10,000 rebuilds).
      if (listsTimer === undefined) {
        listsTimer = setTimeout(() => {
          listsTimer = undefined;
          const all = usersDir.locals();
          balances.setUsers(all);
          // The limit sync takes the changes alone (its list is a map; rebuilding it per burst was O(users)).
          if (listsWhole) limitSync.setUsers(all);
          else limitSync.updateUsers([...changedSinceLists].flatMap((n) => usersDir.get(n) ?? []), [...removedSinceLists].filter((n) => usersDir.get(n) === undefined));
          listsWhole = false;
          changedSinceLists.clear();
          removedSinceLists.clear();
          userPorts.sync(all).catch((err: unknown) => logger.warn({ err }, 'user ports could not follow a user change'));
          if (whitelistDue) {
            whitelistDue = false;
            whitelist.reconcile(all).catch((err: unknown) => logger.warn({ err }, 'whitelist reconcile after a user change failed'));
          }
        }, 200);
        listsTimer.unref();
      }
    };
    let listsTimer: NodeJS.Timeout | undefined;
    const changedSinceLists = new Set<string>();
    const removedSinceLists = new Set<string>();
    let listsWhole = false;
    let whitelistDue = false;
    onStop('user lists', () => clearTimeout(listsTimer));

    let closed = false;
    // Read-only to callers, replaced by reload: a getter over this, not a cast that writes a readonly field.
    let currentConfig = config;
    const daemon: Daemon = {
      get config() {
        return currentConfig;
      },
      ports: { http: httpAddr.port, socks5: socksAddr.port, admin: adminPort, callback: callbackPort, ...(httpsAddr ? { https: httpsAddr.port } : {}), portal: portal.port },
      platform: { baseUrl: platformConfig.baseUrl, appKey: platformConfig.appKey },
      sim,
      logger,
      metrics,
      accounting,
      orders,
      sessions,
      pools,
      users: usersDir,
      fleet,
      events: {
        outbox: events,
        get delivery() {
          return webhook.delivery;
        },
        quota,
      },
      userPorts,
      connections,
      async reload(next: Config): Promise<void> {
        const nextUsers = await resolveProducts(next.users, products, logger);
        // Config users are seeded again (config fields win); API users stay. Pools of users that went away
        // or changed how they draw are dropped (refreshLists); live connections keep their node.
        destinations.setDefaults(next.proxy.rules);
        upstreamTls.set(next.pool.tls);
        // events.*: the webhook worker started, reconfigured or stopped; the watchers' interval; balance.low's line.
        await webhook.apply(next.events);
        events.setDeliver(webhook.delivery !== undefined);
        quota.setIntervalMs(next.events.checkMs);
        expiry.setIntervalMs(next.events.checkMs);
        ev = next.events;
        await usersDir.seed(nextUsers);
        await userPorts.sync(usersDir.locals());
        await applyAccounts(nextUsers);
        refreshLists([], []);
        // A user new to the config gets its platform-side backstop now, not at the next sync interval.
        await limitSync.reconcile();
        // The HTTPS proxy's certificate (renewed files at the same or new paths); unreadable = the old one kept.
        if (https && next.proxy.https) await https.reload(next.proxy.https).catch((err: unknown) => logger.error({ err }, 'tls certificate not reloaded; the running one is kept'));
        currentConfig = next;
        logger.info({ users: nextUsers.map((u) => u.name) }, 'configuration reloaded');
      },
      async close(drainMs = 0): Promise<void> {
        if (closed) return;
        closed = true;
        draining = drainMs;
        await closeAll();
        logger.info('rotor stopped');
      },
    };
    return daemon;
  } catch (err) {
    await closeAll();
    throw err;
  }
}

/** What a user's pools depend on: when it changes, its pools are dropped. */
function drawKey(u: LocalUser): string {
  return `${u.draw}|${u.product}|${u.mainAccount}|${u.sessTime}`;
}

function portOf(server: FastifyInstance): number {
  const address = server.server.address();
  return typeof address === 'object' && address ? address.port : 0;
}

function urlHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/**
 * `rotor start`: run until SIGINT/SIGTERM, reload on SIGHUP (an invalid file is refused and the old config
 * kept). Resolves once the daemon has shut down.
 */
export async function runDaemon(config: Config, configFile?: string): Promise<void> {
  const logger = createLogger({ level: config.log.level });
  const daemon = await startDaemon(config, { logger });
  await new Promise<void>((resolve) => {
    let stopping = false;
    const stop = (signal: string): void => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, 'shutting down: draining connections');
      daemon.close(config.proxy.drainMs).then(resolve, (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        resolve();
      });
    };
    process.once('SIGINT', () => stop('SIGINT'));
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGHUP', () => {
      void (async () => {
        try {
          const next = loadConfig(configFile ? { file: configFile } : {});
          await daemon.reload(next);
        } catch (err) {
          logger.error({ err }, 'reload refused; the running configuration is kept');
        }
      })();
    });
  });
}
