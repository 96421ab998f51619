// The access generator's lines, for the reseller (GET /v1/users/:name/endpoints) and the customer
// (GET <portal>/api/endpoints): a customer's proxy endpoints as HTTP or SOCKS5, with the user-name options
// of docs/reference.md (-session-<id> sticky, -sesstime-<minutes>, -region-<code>), in the formats people paste:
// a URL, host:port:user:pass, a curl line, a Python `requests` snippet; N sticky endpoints as TXT or CSV.
import { randomBytes } from 'node:crypto';
import { z } from 'zod';

/** Option values of the user-name grammar (src/proxy/username.ts): '-' separates options. */
const VALUE = /^[A-Za-z0-9_.]{1,64}$/;

export const endpointQuery = z.strictObject({
  protocol: z.enum(['http', 'socks5']).default('http'),
  /** Sticky endpoints wanted; 0 = one rotating endpoint. */
  sessions: z.coerce.number().int().min(0).max(1000).default(0),
  /** Minutes a sticky session keeps its exit (1 to 120, the platform's range). */
  sessTime: z.coerce.number().int().min(1).max(120).optional(),
  region: z.union([z.literal(''), z.string().regex(VALUE, 'expected a region code of the platform (GetArea)')]).optional(),
  /** The TXT file's line format. */
  style: z.enum(['url', 'hostport', 'curl', 'python']).default('url'),
  format: z.enum(['json', 'txt', 'csv']).default('json'),
});
export type EndpointQuery = z.output<typeof endpointQuery>;

export interface Endpoint {
  protocol: 'http' | 'socks5';
  host: string;
  port: number;
  username: string;
  password: string;
  /** The sticky session id; null = rotating. */
  session: string | null;
  url: string;
  hostport: string;
  curl: string;
  python: string;
}

/** What a customer's lines need: the proxy listener's public address for each protocol. */
export interface ProxyAddress {
  host: string;
  port: number;
}

const bracket = (host: string) => (host.includes(':') && !host.startsWith('[') ? `[${host}]` : host);
const shell = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
const py = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
/** The page the curl and Python lines fetch: a documentation name (RFC 2606), to be replaced by the customer's own. */
export const CHECK_URL = 'https://example.com/';

/** Session ids: 12 hex characters, random (never guessable from another customer's). */
export const newSessionId = (): string => randomBytes(6).toString('hex');

export function buildEndpoints(
  user: string,
  password: string,
  address: ProxyAddress,
  q: Pick<EndpointQuery, 'protocol' | 'sessions' | 'sessTime' | 'region'>,
  newId: () => string = newSessionId,
  checkUrl = CHECK_URL,
): Endpoint[] {
  const ids: (string | null)[] = q.sessions > 0 ? Array.from({ length: q.sessions }, newId) : [null];
  return ids.map((session) => {
    let username = user;
    if (session) username += `-session-${session}`;
    if (session && q.sessTime) username += `-sesstime-${q.sessTime}`;
    if (q.region) username += `-region-${q.region}`;
    const host = bracket(address.host);
    const scheme = q.protocol === 'http' ? 'http' : 'socks5';
    const url = `${scheme}://${encodeURIComponent(username)}:${encodeURIComponent(password)}@${host}:${address.port}`;
    // curl and requests resolve names at the proxy only with socks5h.
    const remote = q.protocol === 'http' ? url : `socks5h${url.slice('socks5'.length)}`;
    return {
      protocol: q.protocol,
      host: address.host,
      port: address.port,
      username,
      password,
      session,
      url,
      hostport: `${host}:${address.port}:${username}:${password}`,
      curl: `curl -x ${shell(remote)} ${checkUrl}`,
      python: `requests.get(${py(checkUrl)}, proxies={'http': ${py(remote)}, 'https': ${py(remote)}})`,
    };
  });
}

const csvField = (v: unknown) => {
  const s = v === null || v === undefined ? '' : String(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
};
export const ENDPOINT_COLUMNS = ['protocol', 'host', 'port', 'username', 'password', 'session', 'url'] as const;

/** TXT: one line per endpoint in `style`; CSV: the columns above with a header row. */
export function renderEndpoints(list: readonly Endpoint[], format: 'txt' | 'csv', style: EndpointQuery['style']): string {
  if (format === 'txt') return list.map((e) => e[style]).join('\n') + '\n';
  let out = `${ENDPOINT_COLUMNS.join(',')}\r\n`;
  for (const e of list) out += `${ENDPOINT_COLUMNS.map((c) => csvField(e[c])).join(',')}\r\n`;
  return out;
}
