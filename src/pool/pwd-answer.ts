// Reads a DrawByPwd answer (seed 4.15: `list` of {proxyUrl?, list?}) in every shape the seed allows, since it
// never says what `proxyUrl` holds. Seen or possible:
//   - proxyUrl = the password gateway `host:port`; `list` = full lines (any form of proxy-string.ts),
//     `host:port:user:pass`, or bare `user:pass` pairs to be joined with the gateway;
//   - proxyUrl = one full proxy line (with `list` empty, or `list` repeating it among others);
//   - proxyUrl = an extraction link (http(s)://host/path) whose body lists the lines;
//   - `list` empty altogether.
// A gateway address is never a node by itself: it carries no credentials. Every string that yields no node
// is reported with the reason, so the drawer can say once what it dropped.
import { isIP } from 'node:net';
import { parseProxyString, ProxyStringError, type ParsedProxy } from './proxy-string.ts';
import type { UpstreamProtocol } from './types.ts';

export type DropReason =
  /** a proxy address with no user name or password: a password draw's node must carry its credentials */
  | 'no_credentials'
  /** a `user:pass` pair with no gateway address in its item to join it with */
  | 'pair_without_gateway'
  /** not a proxy address in any known form */
  | 'unparsable';

export interface PwdAnswerItem {
  proxyUrl?: string | null | undefined;
  list?: readonly string[] | null | undefined;
}

export interface ReadAnswer {
  proxies: ParsedProxy[];
  /** extraction links to fetch (their bodies are lines like `list`) */
  links: string[];
  dropped: Array<{ reason: DropReason; detail: string }>;
}

// A URL with a path or a query after the host is an extraction link (a proxy line has neither: `http://host:8080` is a
// gateway, `http://host:8080?key=...&num=5` and `http://host/extract` are links).
const LINK = /^https?:\/\/[^/?#]+[/?]./i;

function hasCredentials(p: ParsedProxy): boolean {
  return p.username !== undefined && p.username.length > 0 && p.password !== undefined;
}

/** `user:pass` with no host part: two fields, the first not an address, or any two fields once a gateway is known. */
function asPair(text: string): { username: string; password: string } | undefined {
  if (/[@/\s]/.test(text)) return undefined;
  const colon = text.indexOf(':');
  if (colon <= 0 || colon === text.length - 1) return undefined;
  const username = text.slice(0, colon);
  const password = text.slice(colon + 1);
  // A password may hold ':' but then the string reads as host:port:user:pass only when field 2 is a port.
  if (password.includes(':')) return undefined;
  return { username, password };
}

function tryParse(text: string, protocol: UpstreamProtocol): ParsedProxy | ProxyStringError {
  try {
    return parseProxyString(text, protocol);
  } catch (err) {
    if (err instanceof ProxyStringError) return err;
    throw err;
  }
}

/** Splits an answer into complete proxies (with credentials), links to fetch, and what was dropped and why. */
export function readPwdAnswer(items: readonly PwdAnswerItem[], protocol: UpstreamProtocol): ReadAnswer {
  const out: ReadAnswer = { proxies: [], links: [], dropped: [] };
  const keep = (p: ParsedProxy): void => {
    if (hasCredentials(p)) out.proxies.push(p);
    else out.dropped.push({ reason: 'no_credentials', detail: `${p.host}:${p.port}` });
  };
  for (const item of items) {
    const head = item.proxyUrl?.trim() ?? '';
    const entries = (item.list ?? []).map((s) => s.trim()).filter((s) => s.length > 0);
    let gateway: ParsedProxy | undefined;
    if (head.length > 0) {
      if (LINK.test(head)) out.links.push(head);
      else {
        const p = tryParse(head, protocol);
        if (p instanceof ProxyStringError) out.dropped.push({ reason: 'unparsable', detail: p.problem });
        else if (hasCredentials(p)) out.proxies.push(p);
        // host:port with no credentials: the gateway the entries belong to (or, alone, a node we cannot use).
        else if (entries.length > 0) gateway = p;
        else out.dropped.push({ reason: 'no_credentials', detail: `${p.host}:${p.port}` });
      }
    }
    for (const entry of entries) {
      // With a gateway known, two fields are user:pass (a numeric password would otherwise read as a port),
      // unless the first is an IP address: then it is an address, and one without credentials.
      const fields = entry.split(':');
      const pair = gateway && fields.length === 2 && isIP(fields[0]!) === 0 ? asPair(entry) : undefined;
      if (pair && gateway) {
        out.proxies.push({
          protocol: gateway.protocol,
          host: gateway.host,
          port: gateway.port,
          username: pair.username,
          password: pair.password,
        });
        continue;
      }
      const p = tryParse(entry, gateway?.protocol ?? protocol);
      if (!(p instanceof ProxyStringError)) {
        keep(p);
        continue;
      }
      if (asPair(entry)) out.dropped.push({ reason: 'pair_without_gateway', detail: 'user:pass' });
      else out.dropped.push({ reason: 'unparsable', detail: p.problem });
    }
  }
  return out;
}
