// Every listener address of a configuration, named by its config section: bound (and released) before anything
// touches the platform (src/startup/ports.ts), and reserved against users' own ports afterwards.
import type { Config } from '../config/schema.ts';

export function listenAddresses(config: Config) {
  return {
    http: { section: 'proxy.http', host: config.proxy.http.host, port: config.proxy.http.port },
    socks5: { section: 'proxy.socks5', host: config.proxy.socks5.host, port: config.proxy.socks5.port },
    admin: { section: 'admin', host: config.admin.host, port: config.admin.port },
    callback: { section: 'callback', host: config.callback.host, port: config.callback.port },
    ...(config.proxy.https ? { https: { section: 'proxy.https', host: config.proxy.https.host, port: config.proxy.https.port } } : {}),
  };
}
