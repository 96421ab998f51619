// The composition root: each component is assembled by its own module in src/daemon/, in dependency order;
// reload (src/daemon/reload.ts) hands the new config to the components it concerns; stop runs in the reverse order of start.
import { userListenAddresses } from './config/ports.ts';
import type { Config } from './config/schema.ts';
import { assembleAccounts } from './daemon/accounts.ts';
import { assembleAdmin } from './daemon/admin.ts';
import { assembleEvents } from './daemon/events.ts';
import { assembleGateway } from './daemon/gateway.ts';
import { listenAddresses } from './daemon/listen-addresses.ts';
import { StopStack, type AssemblyContext } from './daemon/lifecycle.ts';
import { assembleOrders } from './daemon/orders.ts';
import { assembleReload } from './daemon/reload.ts';
import { assemblePlatform } from './daemon/platform.ts';
import { assemblePools } from './daemon/pools.ts';
import { runUntilSignalled } from './daemon/signals.ts';
import { assembleState, holdStore } from './daemon/state.ts';
import type { Daemon, DaemonOptions } from './daemon/types.ts';
import { assembleUsers } from './daemon/users.ts';
import { assembleWatchers } from './daemon/watchers.ts';
import { loadTlsPair } from './proxy/https-listener.ts';
import { checkListenAddresses } from './startup/ports.ts';
import { createLogger } from './telemetry/logger.ts';
import { createMetrics } from './telemetry/metrics.ts';

export type { Daemon, DaemonOptions } from './daemon/types.ts';

export async function startDaemon(config: Config, options: DaemonOptions = {}): Promise<Daemon> {
  const logger = options.logger ?? createLogger({ level: config.log.level });
  const metrics = options.metrics ?? createMetrics();
  const stops = new StopStack(logger);
  const ctx: AssemblyContext = { logger, metrics, stops, now: options.now };

  const listen = listenAddresses(config);
  // A config user's own port too: one another process holds is a config error naming users.<i>.listen.port.
  await checkListenAddresses([...Object.values(listen), ...userListenAddresses(config)]);
  // The HTTPS proxy's certificate is read as early (a wrong path fails the start, naming its key).
  const tlsPair = config.proxy.https ? await loadTlsPair(config.proxy.https.cert, config.proxy.https.key) : undefined;

  try {
    holdStore(config, ctx);
    const { client, sim, platform } = await assemblePlatform(config, options.sim, ctx);
    const state = await assembleState(config, ctx);
    const { backends, fleet } = state;
    const events = await assembleEvents(config, backends, ctx);
    const accounts = await assembleAccounts(config, { client, backends, fleet, sim, events }, ctx);
    const users = await assembleUsers(config, { client, backends, fleet, accounts }, ctx);
    const onOrderFinal = (request: unknown): void => void accounts.balances.orderFinal(request);
    const rights = (name: string): ReadonlySet<string> | null | undefined => users.directory.get(name)?.rights?.instances;
    const orders = await assembleOrders(config, { client, backends, fleet, events, onOrderFinal, rights }, ctx);
    const pools = await assemblePools(config, { client, orders: orders.orders, accounts, users }, ctx);
    const gateway = await assembleGateway(
      config,
      { state, accounts, users, orders, pools, listen, tlsPair, connectionIds: options.connectionIds },
      ctx,
    );
    const watchers = assembleWatchers({ events, accounts, users }, ctx);
    const admin = await assembleAdmin(config, { client, backends, sim, accounts, users, orders, pools, gateway, events, listen }, ctx);
    const adminPorts = admin.ports;
    stops.onStop('user changes', () => users.changes.close());
    const { http, socks5, https } = gateway.addresses;
    users.reservePorts({
      'proxy.http.port': http.port,
      'proxy.socks5.port': socks5.port,
      'proxy.https.port': https?.port,
      'admin.port': adminPorts.admin,
      'callback.port': adminPorts.callback,
      'portal.port': adminPorts.portal,
    });
    logger.info(
      { http, socks5, ...(https ? { https } : {}), ...adminPorts, users: accounts.configured.map((u) => u.name) },
      'rotor is ready',
    );
    // In a fleet the users' leases follow now, in the background (src/fleet/allowance.ts lendAtStart).
    accounts.accounting.takeLeases();

    let closed = false;
    // Read-only to callers, replaced by reload: a getter over this, not a cast that writes a readonly field.
    let currentConfig = config;
    const reload = assembleReload({
      accounts,
      events,
      watchers,
      users,
      gateway,
      logger,
      adminToken: admin.token,
      current: () => currentConfig,
      replace: (next) => {
        currentConfig = next;
      },
    });
    return {
      get config() {
        return currentConfig;
      },
      ports: { http: http.port, socks5: socks5.port, ...adminPorts, ...(https ? { https: https.port } : {}) },
      platform: { baseUrl: platform.baseUrl, appKey: platform.appKey },
      sim,
      logger,
      metrics,
      accounting: accounts.accounting,
      orders: orders.orders,
      sessions: gateway.sessions,
      pools,
      users: users.directory,
      fleet,
      events: {
        outbox: events.outbox,
        get delivery() {
          return events.webhook.delivery;
        },
        quota: watchers.quota,
      },
      userPorts: gateway.userPorts,
      connections: gateway.connections,
      reload,
      async close(drainMs = 0): Promise<void> {
        if (closed) return;
        closed = true;
        gateway.setDrain(drainMs);
        await stops.closeAll();
        logger.info('rotor stopped');
      },
    };
  } catch (err) {
    await stops.closeAll();
    throw err;
  }
}

/**
 * `rotor start`: run until SIGINT/SIGTERM, reload on SIGHUP. Resolves once the daemon has shut down: true, or
 * false when an uncaught error stopped it.
 */
export async function runDaemon(config: Config, configFile?: string): Promise<boolean> {
  const logger = createLogger({ level: config.log.level });
  const daemon = await startDaemon(config, { logger });
  return runUntilSignalled(daemon, config.proxy.drainMs, logger, configFile);
}
