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

/**
 * Credentials inside any string, in the forms the logger's redactText knows (src/telemetry/logger.ts; config may not
 * import telemetry): a URL's password (pool.healthCheck.url, events.webhookUrl), and the proxy strings of
 * docs/reference.md without a scheme, `user:pass@host:port` and `host:port:user:pass` (platform.sandbox.drawnLines).
 */
function redactCredentials(value: string): string {
  const url = redactUrl(value);
  if (url !== value) return url;
  return value
    .replace(/^([^\s:/@]+:)(?!\/\/)[^\s@]+@(?=[^\s@]+$)/, `$1${MASK}@`)
    .replace(/^([A-Za-z0-9.-]+:\d{1,5}:[^\s:@]+:)\S+$/, `$1${MASK}`);
}

/** Every string of the tree through redactCredentials: a key added later that holds a URL is covered too. */
function scrub(value: unknown): unknown {
  if (typeof value === 'string') return redactCredentials(value);
  if (Array.isArray(value)) return value.map(scrub);
  if (value !== null && typeof value === 'object') {
    const proto = Object.getPrototypeOf(value) as unknown;
    if (proto !== Object.prototype && proto !== null) return value;
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, scrub(v)]));
  }
  return value;
}

export function redactConfig(original: Config): Config {
  const config = scrub(original) as Config;
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
