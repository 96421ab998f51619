// The admin API (with the dashboard) and the server the platform's callbacks reach.
import type { FastifyInstance } from 'fastify';
import { buildAdminServer, buildCallbackServer, publishesName } from '../admin/server.ts';
import { AdminToken } from '../admin/auth.ts';
import { warmRoutes } from '../admin/lazy-serializers.ts';
import { createReadiness } from '../admin/readiness.ts';
import { attachPortal } from '../portal/daemon.ts';
import { isLoopbackHost, type Config } from '../config/schema.ts';
import type { PlatformClient } from '../platform/client.ts';
import type { PoolRegistry } from '../pool/registry.ts';
import type { Simulator } from '../sim/index.ts';
import { listenAs, type ListenAddress } from '../startup/ports.ts';
import type { Backends } from '../store/backends.ts';
import { usersPort } from './users-port.ts';
import type { AccountsPart } from './accounts.ts';
import type { EventsPart } from './events.ts';
import type { GatewayPart } from './gateway.ts';
import type { AssemblyContext } from './lifecycle.ts';
import type { OrdersPart } from './orders.ts';
import type { UsersPart } from './users.ts';

interface Needs {
  client: PlatformClient;
  backends: Pick<Backends, 'settings'>;
  sim: Simulator | undefined;
  accounts: AccountsPart;
  users: UsersPart;
  orders: OrdersPart;
  pools: PoolRegistry;
  gateway: GatewayPart;
  events: EventsPart;
  listen: { admin: ListenAddress; callback: ListenAddress };
}

export async function assembleAdmin(
  config: Config,
  needs: Needs,
  ctx: AssemblyContext,
): Promise<{ ports: { admin: number; callback: number; portal: number | undefined }; token: AdminToken }> {
  const { client, backends, accounts, orders, gateway, pools } = needs;
  const ready = createReadiness({
    probePlatform: () => client.call('GetAppInfo', {}),
    probeStore: () => backends.settings.kvGet('readyz.probe'),
    listenersUp: () => gateway.httpListener.port > 0 && gateway.socksListener.port > 0,
  });
  // Held apart from the server so a reload can rotate it (src/daemon/reload.ts).
  const token = new AdminToken(config.admin.token);
  const admin: FastifyInstance = buildAdminServer(
    {
      platform: client,
      catalog: orders.orders.catalog,
      orders: orders.orders,
      balances: accounts.balances,
      traffic: accounts.traffic,
      whitelist: accounts.whitelist,
      users: usersPort(
        needs.users.directory,
        { logger: ctx.logger.child({ component: 'users' }), concurrency: config.accounts.batchConcurrency },
        (name) => needs.users.healer.stateOf(name),
      ),
      // Dynamic pools, then the static instances dialed so far (`instance/<instanceNo>`, their failures).
      pools: { snapshot: () => [...pools.snapshot(), ...gateway.router.staticPools().map((p) => p.poolSnapshot())] },
      sessions: gateway.sessionView,
      metrics: ctx.metrics.registry,
      ready,
      events: needs.events.outbox,
      connections: gateway.connections,
      billing: { currency: config.billing.currency },
      bans: gateway.bans,
    },
    {
      token,
      host: config.admin.host,
      allowedHosts: config.admin.allowedHosts,
      allowedOrigins: config.admin.allowedOrigins,
      // The names in allowedHosts are the portal's own listener's when it has one and the admin port is on
      // loopback (README's second way): the admin port is then not published, and its scraper keeps /metrics.
      published: publishesName(config.admin.allowedHosts) && !(config.portal.port !== undefined && isLoopbackHost(config.admin.host)),
      metricsToken: config.admin.metricsToken,
      logger: ctx.logger.child({ component: 'admin' }),
      callbackPath: config.callback.path,
    },
  );
  // The customer portal and the admin's access generator (src/portal/daemon.ts).
  const portal = await attachPortal({
    config,
    admin,
    users: needs.users.directory,
    connections: gateway.connections,
    catalog: orders.orders.catalog,
    proxyPorts: () => ({ http: gateway.addresses.http.port, socks5: gateway.addresses.socks5.port }),
    logger: ctx.logger.child({ component: 'portal' }),
  });
  ctx.stops.onStop('portal', () => portal.close());
  await listenAs(needs.listen.admin, () =>
    admin.listen({
      host: config.admin.host,
      port: config.admin.port,
      listenTextResolver: (address) => `admin API listening at ${address}`,
    }),
  );
  ctx.stops.onStop('admin', () => admin.close());
  // The dashboard's heaviest read answered once now, not by the first client (src/admin/lazy-serializers.ts).
  void warmRoutes(admin, config.admin.token ? { authorization: `Bearer ${config.admin.token}` } : {});
  const callbacks = buildCallbackServer((query) => orders.orders.handleCallback(query), {
    path: config.callback.path,
    logger: ctx.logger.child({ component: 'callback' }),
  });
  await listenAs(needs.listen.callback, () =>
    callbacks.listen({
      host: config.callback.host,
      port: config.callback.port,
      listenTextResolver: (address) => `platform callbacks listening at ${address}`,
    }),
  );
  ctx.stops.onStop('callbacks', () => callbacks.close());
  const ports = { admin: portOf(admin), callback: portOf(callbacks), portal: portal.port };
  if (needs.sim) needs.sim.setCallbackUrl(`http://${urlHost(config.callback.host)}:${ports.callback}${config.callback.path}`);
  return { ports, token };
}

function portOf(server: FastifyInstance): number {
  const address = server.server.address();
  return typeof address === 'object' && address ? address.port : 0;
}

function urlHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}
