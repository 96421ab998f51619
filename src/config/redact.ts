// The effective config as it may be shown (check-config, logs, admin): secrets replaced by '***'.
// Empty secrets stay empty, so the reader can still see that one is unset.
import type { Config } from './schema.ts';

const MASK = '***';
const mask = (s: string) => (s === '' ? s : MASK);

/** URLs may carry credentials (`redis://:pass@host`, `https://user:pass@host`). */
function redactUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return value;
  }
  if (url.password === '') return value;
  url.password = MASK;
  return url.href;
}

export function redactConfig(config: Config): Config {
  return {
    ...config,
    platform: { ...config.platform, appSecret: mask(config.platform.appSecret), baseUrl: redactUrl(config.platform.baseUrl) },
    proxy: { ...config.proxy, http: { ...config.proxy.http }, socks5: { ...config.proxy.socks5 } },
    admin: { ...config.admin, token: mask(config.admin.token) },
    callback: { ...config.callback },
    // A redis:// URL may carry a password.
    store: { ...config.store, path: redactUrl(config.store.path) },
    log: { ...config.log },
    users: config.users.map((u) => ({ ...u, password: mask(u.password) })),
    events: { ...config.events, secret: mask(config.events.secret), webhookUrl: redactUrl(config.events.webhookUrl) },
  };
}
