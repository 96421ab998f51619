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

/**
 * The config users' own ports (src/users/ports.ts binds them on proxy.http.host), as listener addresses whose
 * key is `users.<i>.listen.port`: bound and released at start with the daemon's own (src/startup/ports.ts), so a
 * port another process holds is a config error naming the user's key, not a user whose port silently is not open.
 */
export function userListenAddresses(config: Config): Array<{ section: string; host: string; port: number }> {
  const out: Array<{ section: string; host: string; port: number }> = [];
  config.users.forEach((u, i) => {
    const port = u.listen?.port ?? 0;
    if (port !== 0) out.push({ section: `users.${i}.listen`, host: config.proxy.http.host, port });
  });
  return out;
}
