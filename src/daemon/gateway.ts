// The gateway: sticky sessions, the router (authorize, then dial), upstream health probes, the connection log,
// the HTTP and SOCKS5 listeners and users' own ports.
import type { LocalUser } from '../proxy/types.ts';
import type { SecureContextOptions } from 'node:tls';
import type { Config } from '../config/schema.ts';
import type { ConnectionLogService } from '../connlog/index.ts';
import { platformFlowFrom } from '../connlog/platform-flow.ts';
import { startHealthProbes } from '../health/index.ts';
import { RegionDirectory } from '../orders/regions.ts';
import type { PoolRegistry } from '../pool/registry.ts';
import { UpstreamTlsPolicy } from '../proxy/dial-tls.ts';
import { HttpListener } from '../proxy/http.ts';
import { HttpsListener, type loadTlsPair } from '../proxy/https-listener.ts';
import { ProductNames } from '../proxy/product-names.ts';
import { Router } from '../proxy/router.ts';
import { warmConnections } from './warm.ts';
import { Socks5Listener } from '../proxy/socks5.ts';
import { UdpAssociations } from '../proxy/udp-associate.ts';
import { SessionTable } from '../session/table.ts';
import { listenAs, type ListenAddress } from '../startup/ports.ts';
import { UserGate } from '../admission/users.ts';
import { UserPorts } from '../users/ports.ts';
import { descriptorGuard } from '../proxy/accept-guard.ts';
import { configureHashing } from '../admission/password.ts';
import { DestinationPolicy } from '../proxy/destination-rules.ts';
import type { AccountsPart } from './accounts.ts';
import { createConnectionLog } from './connection-log.ts';
import { clockOption, type AssemblyContext } from './lifecycle.ts';
import type { OrdersPart } from './orders.ts';
import type { StatePart } from './state.ts';
import type { UsersPart } from './users.ts';
import { BanTable } from '../proxy/request-bans.ts';
import { RequestRules } from '../proxy/request-rules.ts';
import { unsentLimiter } from '../proxy/unsent-limit.ts';

export interface GatewayPart {
  sessions: SessionTable;
  /** What the admin API lists as sessions: the fleet's shared view, or this daemon's table. */
  sessionView: SessionTable | NonNullable<ReturnType<typeof fleetSessionsFor>>;
  router: Router;
  connections: ConnectionLogService;
  userPorts: UserPorts;
  httpListener: HttpListener;
  socksListener: Socks5Listener;
  addresses: {
    http: { host: string; port: number };
    socks5: { host: string; port: number };
    https: { host: string; port: number } | undefined;
  };
  /** How long the listeners let live connections finish when the daemon stops. */
  setDrain(ms: number): void;
  /** Reads the files a new config names (throws = nothing changed), then returns the application of its rules, TLS policy and users' ports. */
  prepareReload(next: Config): Promise<() => Promise<void>>;
  /** After the rest of a reload: the HTTPS proxy's certificate read again. */
  reloadTls(next: Config): Promise<void>;
  /** Exits banned by request rules (GET /v1/bans). */
  bans: BanTable;
}

interface Needs {
  state: StatePart;
  accounts: AccountsPart;
  users: UsersPart;
  orders: OrdersPart;
  pools: PoolRegistry;
  listen: { http: ListenAddress; socks5: ListenAddress; https?: ListenAddress };
  /** The HTTPS proxy's certificate and key, read before anything started (proxy.https). */
  tlsPair: Awaited<ReturnType<typeof loadTlsPair>> | undefined;
  connectionIds: (() => string) | undefined;
}

function fleetSessionsFor(needs: Needs, sessions: SessionTable, ctx: AssemblyContext) {
  const { fleet, fleetParts } = needs.state;
  if (!fleet || !fleetParts) return undefined;
  return new fleetParts.FleetSessions({
    table: sessions,
    shared: fleet.sessions,
    pools: needs.pools,
    logger: ctx.logger.child({ component: 'fleet' }),
    ...clockOption(ctx),
  });
}

export async function assembleGateway(config: Config, needs: Needs, ctx: AssemblyContext): Promise<GatewayPart> {
  const { logger, metrics } = ctx;
  const { accounts, users, pools } = needs;
  const directory = users.directory;
  const routing = await assembleRouting(config, needs, ctx);
  const { router } = routing;
  const prober = startHealthProbes({
    pools: () => pools.list(),
    healthCheck: config.pool.healthCheck,
    // A node goes cooling for coolDownMs (an outlier for baseEjectionMs or more): a pass over the pools this
    // often sees it before it is due, so the prober needs no wake-up in between.
    lookMs: Math.min(
      config.pool.coolDownMs,
      config.pool.outlier.baseEjectionMs > 0 ? config.pool.outlier.baseEjectionMs : Infinity,
      config.pool.healthCheck.intervalMs > 0 ? config.pool.healthCheck.intervalMs : Infinity,
    ),
    connectTimeoutMs: config.proxy.connectTimeoutMs,
    handshakeTimeoutMs: config.proxy.upstreamHandshakeTimeoutMs ?? config.proxy.connectTimeoutMs,
    recentTarget: () => router.recentTarget(),
    metrics,
    logger: logger.child({ component: 'health' }),
    ...clockOption(ctx),
  });
  ctx.stops.onStop('health probes', () => prober.stop());
  // Registered before the listeners, so it stops after them: every connection has ended into a record
  // before the last flush.
  const connections = createConnectionLog({
    config,
    backends: needs.state.backends,
    priceOf: (user) => directory.get(user)?.pricePerGb ?? config.billing.defaultPricePerGb,
    accountOf: (user) => directory.get(user),
    platformFlow: platformFlowFrom(accounts.traffic),
    metrics,
    logger: logger.child({ component: 'connlog' }),
    ...(needs.connectionIds ? { ids: needs.connectionIds } : {}),
    ...clockOption(ctx),
  });
  ctx.stops.onStop('connection log', () => connections.close());
  const listeners = await assembleListeners(config, needs, ctx, router, connections);
  const { userPorts, udp, httpsListener } = listeners;

  return {
    bans: routing.bans,
    sessions: routing.sessions,
    sessionView: routing.fleetSessions ?? routing.sessions,
    router,
    connections,
    userPorts,
    httpListener: listeners.httpListener,
    socksListener: listeners.socksListener,
    addresses: listeners.addresses,
    setDrain: listeners.setDrain,
    async prepareReload(next) {
      const applyTls = await routing.upstreamTls.prepare(next.pool.tls);
      return async () => {
        routing.destinations.setDefaults(next.proxy.rules);
        routing.requestRules.setGlobal(next.proxy.requestRules);
        applyTls();
        udp?.setSettings({ ...next.proxy.udp, idleTimeoutMs: next.proxy.idleTimeoutMs });
        await userPorts.sync(directory.locals());
      };
    },
    async reloadTls(next) {
      // The HTTPS proxy's certificate (renewed files at the same or new paths); unreadable = the old one kept.
      if (httpsListener && next.proxy.https)
        await httpsListener
          .reload(next.proxy.https)
          .then(() => userPorts.reloadTls())
          .catch((err: unknown) => logger.error({ err }, 'tls certificate not reloaded; the running one is kept'));
    },
  };
}

/** Sticky sessions, regions, destination and request rules, bans and the router that uses them. */
async function assembleRouting(config: Config, needs: Needs, ctx: AssemblyContext) {
  const { logger, metrics } = ctx;
  const { accounts, users, orders, pools } = needs;
  const directory = users.directory;
  const sessions = new SessionTable({ metrics, maxPerUser: config.proxy.maxSessionsPerUser, ...clockOption(ctx) });
  const sweep = setInterval(() => sessions.sweep(), 30_000);
  sweep.unref();
  ctx.stops.onStop('session sweep', () => clearInterval(sweep));

  const fleetSessions = fleetSessionsFor(needs, sessions, ctx);
  needs.state.fleet?.holdSessions(() => sessions.held()); // put back should Redis lose them (src/fleet/index.ts rebuild)
  const regions = new RegionDirectory(orders.orders.catalog, { logger: logger.child({ component: 'regions' }) });
  // The products a `-product-` may name: the catalogue's full listing, loaded with the regions (at once, so a
  // slow platform delays the start once), before the listeners open.
  const products = new ProductNames(orders.orders.catalog, { logger: logger.child({ component: 'products' }) });
  await Promise.all([regions.start(), products.start()]);
  ctx.stops.onStop('regions', () => regions.stop());
  ctx.stops.onStop('products', () => products.stop());
  const destinations = new DestinationPolicy(config.proxy.rules);
  const upstreamTls = new UpstreamTlsPolicy(config.pool.tls, logger.child({ component: 'gateway' }));
  const warm = warmConnections(config, ctx);
  // Request rules (proxy.requestRules; users' own come with their records) and the bans they make.
  const requestRules = new RequestRules(config.proxy.requestRules);
  const bans = new BanTable(clockOption(ctx));
  const routerOptions = {
    dialers: { socks5: warm.socks5, http: warm.http },
    destinations,
    requestRules,
    bans,
    regionKnown: (code: string) => regions.spelling(code),
    productKnown: (productNo: string) => products.isKnown(productNo),
    users: directory.table,
    meters: new UserGate(directory.table, accounts.accounting, ctx.now ?? Date.now),
    instances: orders.instances,
    metrics,
    logger: logger.child({ component: 'gateway' }),
    retries: config.proxy.retries,
    connectTimeoutMs: config.proxy.connectTimeoutMs,
    handshakeTimeoutMs: config.proxy.upstreamHandshakeTimeoutMs ?? config.proxy.connectTimeoutMs,
    hedgeAfterMs: config.proxy.hedgeAfterMs,
    upstreamTls,
    // An upstream refused a user's account: its balance, then its sub account, read again (once per burst).
    onAccountRefused: (user: LocalUser, productNo: string) => void users.refusals.refused(user, productNo),
    ...clockOption(ctx),
    // abuse bounds: proxy logins (src/proxy/auth-*.ts) and the process's hashing bounds (src/admission/password.ts)
    auth: config.proxy.auth,
  };
  configureHashing({
    concurrency: config.proxy.auth.maxConcurrentHashes,
    maxQueued: config.proxy.auth.maxQueuedHashes,
    nice: config.proxy.auth.hashNice,
  });
  // In a fleet the shared sessions settle a sticky route before its dial (SessionStore.prepare).
  const router = new Router({ ...routerOptions, pools, sessions: fleetSessions ?? sessions });
  // No cache clear on user changes: a cached login stands only while the directory still hands out that very
  // user object, and a changed user gets a new one (src/proxy/auth-check.ts), so the others' logins stay cached.
  // A deleted or disabled user's sticky sessions end at once (in a fleet, its shared ones too).
  users.changes.on((names, removed) => {
    const table = fleetSessions ?? sessions;
    for (const name of removed) table.dropUser(name);
    for (const name of names)
      if (directory.get(name) === undefined || directory.refusal(name, (ctx.now ?? Date.now)()) !== undefined) table.dropUser(name);
  });
  return { router, sessions, fleetSessions, destinations, requestRules, upstreamTls, bans };
}

/** The HTTP, SOCKS5 and HTTPS listeners, SOCKS5 UDP associations and users' own ports, and how they stop. */
async function assembleListeners(config: Config, needs: Needs, ctx: AssemblyContext, router: Router, connections: ConnectionLogService) {
  const { logger, metrics } = ctx;
  // Out of descriptors: the proxy listeners pause (drop new clients) and resume, said once (src/proxy/accept-guard.ts).
  ctx.stops.onStop('descriptor guard', descriptorGuard.attach({ metrics, logger: logger.child({ component: 'descriptors' }) }));
  // Users' own ports hand their sockets to the shared listeners, which admit an allowed address without
  // credentials through userPorts.admit.
  const userPorts = new UserPorts({
    host: config.proxy.http.host,
    listeners: {
      http: { handleSocket: (s) => httpListener.handleSocket(s) },
      socks5: { handleSocket: (s) => socksListener.handleSocket(s) },
    },
    authorizeUser: (name) => router.authorizeUser(name),
    handshakeTimeoutMs: config.proxy.handshakeTimeoutMs,
    // TLS user ports (listen.tls) serve proxy.https's certificate, renewed with it in reloadTls below.
    certificate: (): SecureContextOptions | undefined => httpsListener?.certificate,
    logger: logger.child({ component: 'user-ports' }),
  });
  const unsent = unsentLimiter(config.proxy.clientUnsentBytes);
  if (unsent.why)
    logger.warn(
      `proxy.clientUnsentBytes cannot be applied (${unsent.why}); a client that stops reading may leave up to the kernel's send buffer read from the upstream`,
    );
  const limitUnsent = unsent.limit;
  const httpListener = new HttpListener({
    anonymous: (socket) => userPorts.admit(socket),
    fromUserPort: userPorts.sockets,
    recorder: connections.recorder,
    router,
    host: config.proxy.http.host,
    port: config.proxy.http.port,
    idleTimeoutMs: config.proxy.idleTimeoutMs,
    handshakeTimeoutMs: config.proxy.handshakeTimeoutMs,
    pipelineDepth: config.proxy.pipelineDepth,
    limitUnsent,
    metrics,
    logger: logger.child({ component: 'http' }),
  });
  // SOCKS5 UDP ASSOCIATE (proxy.udp): associations relayed through SOCKS5 upstreams' own.
  const udp = config.proxy.udp.enabled
    ? new UdpAssociations(
        router,
        { ...config.proxy.udp, idleTimeoutMs: config.proxy.idleTimeoutMs },
        logger.child({ component: 'udp' }),
        metrics,
      )
    : undefined;
  const socksListener = new Socks5Listener({
    ...(udp ? { udp } : {}),
    anonymous: (socket) => userPorts.admit(socket),
    fromUserPort: userPorts.sockets,
    recorder: connections.recorder,
    router,
    host: config.proxy.socks5.host,
    port: config.proxy.socks5.port,
    handshakeTimeoutMs: config.proxy.handshakeTimeoutMs,
    idleTimeoutMs: config.proxy.idleTimeoutMs,
    limitUnsent,
    metrics,
    logger: logger.child({ component: 'socks5' }),
  });
  const http = await listenAs(needs.listen.http, () => httpListener.listen());
  const socks5 = await listenAs(needs.listen.socks5, () => socksListener.listen());
  const httpsConfig = config.proxy.https;
  const httpsListener =
    needs.tlsPair && httpsConfig
      ? new HttpsListener(
          {
            http: httpListener,
            ...httpsConfig,
            handshakeTimeoutMs: config.proxy.handshakeTimeoutMs,
            metrics,
            logger: logger.child({ component: 'https' }),
          },
          needs.tlsPair,
        )
      : undefined;
  const https = httpsListener && needs.listen.https ? await listenAs(needs.listen.https, () => httpsListener.listen()) : undefined;
  let draining = 0;
  const accounting = needs.accounts.accounting;
  ctx.stops.onStop('listeners', async () => {
    // Connections still open when the drain ends are recorded as cut by the shutdown; open connections are
    // checkpointed now and about every second of the drain, and the meter is written now: a SIGKILL during the
    // drain (a stop's grace shorter than proxy.drainMs) costs about a second of their bytes (src/connlog/recorder.ts).
    connections.recorder.stopping(draining);
    accounting
      .flush()
      .catch((err: unknown) => logger.warn({ err }, 'the meter could not be written at the stop; its next flush tries again'));
    // Users' own ports stop accepting (their silent connections closed); those handed to the listeners drain
    // with the shared ports' connections and, cut, are recorded as `shutdown` like them.
    await Promise.all([userPorts.stopAccepting(), httpListener.close(draining), socksListener.close(draining), httpsListener?.close()]);
    await udp?.closeAll();
    await userPorts.close();
  });
  await followUsers(needs.users, userPorts, logger);

  return {
    userPorts,
    udp,
    httpListener,
    socksListener,
    httpsListener,
    addresses: { http, socks5, https },
    setDrain: (ms: number) => {
      draining = ms;
    },
  };
}

/** Users' own ports follow the users: every burst of changes, and a first sync now. */
async function followUsers(users: UsersPart, userPorts: UserPorts, logger: AssemblyContext['logger']): Promise<void> {
  const directory = users.directory;
  // A burst looks at its own users only (walking every user per burst made an import O(users²)); a reload,
  // which names nobody, at everyone. Followed before the first sync lists the users: a creation the directory
  // finishes meanwhile (its start resumes those left unfinished, in the background) comes in a burst, queued
  // after that sync, rather than between the list and the subscription, where no later walk would find it.
  users.changes.onBurst(200, (burst) => {
    const changed: LocalUser[] = [];
    const gone: string[] = [];
    if (!burst.whole) {
      for (const name of burst.changed) {
        const user = directory.get(name);
        if (user === undefined) gone.push(name);
        else changed.push(user);
      }
      for (const name of burst.removed) if (!burst.changed.has(name)) gone.push(name);
    }
    (burst.whole ? userPorts.sync(directory.locals()) : userPorts.update(changed, gone)).catch((err: unknown) =>
      logger.warn({ err }, 'user ports could not follow a user change'),
    );
  });
  await userPorts.sync(directory.locals());
}
