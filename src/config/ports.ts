// The ports the config gives the daemon's own listeners, by key: what a user's listen.port may not take.
import type { Config } from './schema.ts';

export function configuredPorts(config: Config): Record<string, number | undefined> {
  return {
    'proxy.http.port': config.proxy.http.port,
    'proxy.socks5.port': config.proxy.socks5.port,
    'proxy.https.port': config.proxy.https?.port,
    'admin.port': config.admin.port,
    'callback.port': config.callback.port,
    'portal.port': config.portal.port,
  };
}
