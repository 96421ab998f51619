// The portal's place in the daemon (called from src/main.ts after the admin server is built and before it
// listens): the users directory, the connection log, the catalogue's regions and the proxy listeners' bound
// addresses, as the portal reads them.
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { Config } from '../config/schema.ts';
import type { AreaNode } from '../platform/schemas.ts';
import type { Users } from '../users/directory.ts';
import type { PortalConnections } from './routes.ts';
import { startPortal, type RunningPortal } from './wire.ts';

export function attachPortal(parts: {
  config: Config;
  admin: FastifyInstance;
  users: Users;
  connections: PortalConnections;
  catalog: { areas(): Promise<AreaNode[]> };
  proxyPorts(): { http: number; socks5: number };
  logger: FastifyBaseLogger;
}): Promise<RunningPortal> {
  const { config, users } = parts;
  return startPortal({
    config: config.portal,
    admin: parts.admin,
    adminConfig: config.admin,
    users: {
      view: (name) => users.view(name),
      hashOf: (name) => users.get(name)?.password,
      setPassword: (name, password) => users.setPassword(name, password),
      historySince: (name) => users.historySince(name),
    },
    connections: parts.connections,
    areas: () => parts.catalog.areas(),
    proxy: () => {
      const p = parts.proxyPorts();
      return { http: { host: config.proxy.http.host, port: p.http }, socks5: { host: config.proxy.socks5.host, port: p.socks5 } };
    },
    currency: config.billing.currency,
    recordsRetentionMs: config.log.access.retentionDays * 86_400_000,
    logger: parts.logger,
  });
}
