// Parses the proxy strings the platform hands out (DrawByPwd `list`, DrawByApi extraction bodies) in every
// form of docs/reference.md: host:port, host:port:user:pass, user:pass@host:port and scheme://user:pass@host:port.
// The seed never shows the format, so the parser is lenient about spelling and strict about meaning: a
// string either yields a complete host, port and protocol, or a ProxyStringError naming the problem.
// Addresses are not filtered here: production upstreams are remote hosts.
import { isIP, isIPv6 } from 'node:net';
import type { UpstreamNode, UpstreamProtocol } from './types.ts';
import { RotorError } from '../errors/rotor-error.ts';

export type ProxyStringProblem =
  'empty' | 'unsupported_scheme' | 'bad_form' | 'bad_host' | 'bad_port' | 'bad_userinfo' | 'bad_percent_encoding' | 'trailing_path';

/** A drawn string that is not a proxy address. The message names the problem, never the string (it may hold a password). */
export class ProxyStringError extends RotorError {
  constructor(
    readonly problem: ProxyStringProblem,
    detail: string,
  ) {
    super('PROXY_STRING_INVALID', `invalid proxy string: ${detail}`, { httpStatus: 400 });
  }
}

export interface ParsedProxy {
  protocol: UpstreamProtocol;
  /** Host name or IP address; IPv6 without brackets. */
  host: string;
  port: number;
  username?: string;
  password?: string;
  /** `https://`: an HTTP proxy reached over TLS. */
  tls?: boolean;
}

const SCHEMES: Record<string, UpstreamProtocol> = {
  socks5: 'socks5',
  socks5h: 'socks5',
  socks: 'socks5',
  http: 'http',
  // HTTP CONNECT over TLS to this address (parseProxyString sets `tls`).
  https: 'http',
};

const HOSTNAME = /^[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?$/;

function parsePort(text: string): number {
  if (!/^\d{1,5}$/.test(text)) throw new ProxyStringError('bad_port', 'port must be a number');
  const port = Number(text);
  if (port < 1 || port > 65535) throw new ProxyStringError('bad_port', 'port out of range 1-65535');
  return port;
}

function checkHost(host: string): string {
  if (host.length === 0) throw new ProxyStringError('bad_host', 'empty host');
  if (isIP(host) === 4 || HOSTNAME.test(host)) return host;
  throw new ProxyStringError('bad_host', 'host is not a name or an IP address');
}

/** `host:port` or `[v6]:port`. */
function parseHostPort(text: string): { host: string; port: number } {
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0) throw new ProxyStringError('bad_host', 'unclosed [ in IPv6 address');
    const host = text.slice(1, close);
    if (!isIPv6(host)) throw new ProxyStringError('bad_host', 'invalid IPv6 address in brackets');
    const rest = text.slice(close + 1);
    if (!rest.startsWith(':')) throw new ProxyStringError('bad_port', 'missing port');
    return { host, port: parsePort(rest.slice(1)) };
  }
  const colon = text.lastIndexOf(':');
  if (colon < 0) throw new ProxyStringError('bad_port', 'missing port');
  const host = text.slice(0, colon);
  if (host.includes(':')) throw new ProxyStringError('bad_host', 'IPv6 address must be in brackets');
  return { host: checkHost(host), port: parsePort(text.slice(colon + 1)) };
}

function decode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new ProxyStringError('bad_percent_encoding', 'bad percent-encoding in user name or password');
  }
}

/** `user[:pass]`; a password may itself hold ':'. */
function splitUserinfo(text: string, percentDecode: boolean): { username: string; password?: string } {
  const colon = text.indexOf(':');
  const rawUser = colon < 0 ? text : text.slice(0, colon);
  const rawPass = colon < 0 ? undefined : text.slice(colon + 1);
  const username = percentDecode ? decode(rawUser) : rawUser;
  if (username.length === 0) throw new ProxyStringError('bad_userinfo', 'empty user name');
  if (rawPass === undefined) return { username };
  return { username, password: percentDecode ? decode(rawPass) : rawPass };
}

function withCredentials(
  base: { protocol: UpstreamProtocol; host: string; port: number },
  cred?: { username: string; password?: string },
): ParsedProxy {
  if (!cred) return base;
  return cred.password === undefined ? { ...base, username: cred.username } : { ...base, username: cred.username, password: cred.password };
}

/**
 * Parses one drawn proxy string. `defaultProtocol` applies to forms without a scheme (it comes from the
 * product's protocol or the draw request).
 */
export function parseProxyString(input: string, defaultProtocol: UpstreamProtocol): ParsedProxy {
  const text = input.trim();
  if (text.length === 0) throw new ProxyStringError('empty', 'empty string');
  if (/\s/.test(text)) throw new ProxyStringError('bad_form', 'whitespace inside the address');

  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(text);
  if (scheme) {
    const protocol = SCHEMES[scheme[1]!.toLowerCase()];
    if (!protocol) throw new ProxyStringError('unsupported_scheme', `unsupported scheme ${JSON.stringify(scheme[1]!.slice(0, 16))}`);
    let authority = text.slice(scheme[0].length);
    if (authority.endsWith('/')) authority = authority.slice(0, -1);
    if (/[/?#]/.test(authority)) throw new ProxyStringError('trailing_path', 'a proxy URL has no path, query or fragment');
    // The last '@' ends the userinfo, so an unencoded '@' in a password still parses.
    const at = authority.lastIndexOf('@');
    // A scheme in front of the colon form (`socks5://host:port:user:pass`, as some providers export lines).
    if (at < 0 && !authority.startsWith('[') && authority.split(':').length >= 4) {
      const parsed = parseColonForm(authority, protocol);
      if (scheme[1]!.toLowerCase() === 'https') parsed.tls = true;
      return parsed;
    }
    const hostPort = parseHostPort(at < 0 ? authority : authority.slice(at + 1));
    const parsed = withCredentials({ protocol, ...hostPort }, at < 0 ? undefined : splitUserinfo(authority.slice(0, at), true));
    if (scheme[1]!.toLowerCase() === 'https') parsed.tls = true;
    return parsed;
  }
  if (text.includes('://')) throw new ProxyStringError('unsupported_scheme', 'malformed scheme');

  const at = text.lastIndexOf('@');
  if (at >= 0) {
    try {
      const hostPort = parseHostPort(text.slice(at + 1));
      return withCredentials({ protocol: defaultProtocol, ...hostPort }, splitUserinfo(text.slice(0, at), false));
    } catch (err) {
      // host:port:user:pass whose password holds an '@'
      if (!/^[^:@[\]]+:\d{1,5}:[^:@]+:/.test(text)) throw err;
      return parseColonForm(text, defaultProtocol);
    }
  }
  return parseColonForm(text, defaultProtocol);
}

function parseColonForm(text: string, defaultProtocol: UpstreamProtocol): ParsedProxy {
  if (text.startsWith('[')) {
    // [v6]:port or [v6]:port:user:pass
    const close = text.indexOf(']');
    if (close < 0) throw new ProxyStringError('bad_host', 'unclosed [ in IPv6 address');
    const portColon = text.indexOf(':', close);
    const afterPort = portColon < 0 ? -1 : text.indexOf(':', portColon + 1);
    if (afterPort < 0) return { protocol: defaultProtocol, ...parseHostPort(text) };
    const hostPort = parseHostPort(text.slice(0, afterPort));
    const cred = splitUserinfo(text.slice(afterPort + 1), false);
    if (cred.password === undefined) throw new ProxyStringError('bad_form', 'expected host:port or host:port:user:pass');
    return withCredentials({ protocol: defaultProtocol, ...hostPort }, cred);
  }

  const parts = text.split(':');
  if (parts.length === 2) return { protocol: defaultProtocol, ...parseHostPort(text) };
  const bare = parts.length >= 5 ? bareIpv6WithCredentials(parts, defaultProtocol) : undefined;
  if (bare) return bare;
  if (parts.length >= 4 && parts[0] !== '' && /^\d+$/.test(parts[1]!)) {
    const host = checkHost(parts[0]!);
    const port = parsePort(parts[1]!);
    const cred = splitUserinfo(parts.slice(2).join(':'), false);
    return withCredentials({ protocol: defaultProtocol, host, port }, cred);
  }
  if (parts.length === 1) throw new ProxyStringError('bad_port', 'missing port');
  if (parts.length >= 3 && isIPv6(text)) throw new ProxyStringError('bad_host', 'IPv6 address must be in brackets');
  throw new ProxyStringError('bad_form', 'expected host:port, host:port:user:pass, user:pass@host:port or scheme://user:pass@host:port');
}

/**
 * `host:port:user:pass` with an unbracketed IPv6 host (`::1:40000:user:pass`, `2001:db8::10:8080:u:p`): the colon
 * form has no bracket convention, so a platform that joins the four fields with ':' writes the address bare (the
 * sandbox does, put on ::1). The address is the fields before a port, and it must be a whole IPv6 address. First
 * read: the last three fields are port, user and password (the form's own reading, neither holding ':'); else
 * the shortest address followed by port and user, the rest the password (one holding ':'). Without credentials
 * (`::1:1080`) nothing is read: that is itself an IPv6 address, and which field is a port cannot be told.
 */
function bareIpv6WithCredentials(parts: readonly string[], protocol: UpstreamProtocol): ParsedProxy | undefined {
  const n = parts.length;
  const hostPort = (k: number): { host: string; port: number } | undefined => {
    const host = parts.slice(0, k).join(':');
    const port = parts[k]!;
    if (!host.includes(':') || !isIPv6(host) || !/^\d{1,5}$/.test(port)) return undefined;
    const value = Number(port);
    return value >= 1 && value <= 65535 ? { host, port: value } : undefined;
  };
  const read = (k: number): ParsedProxy | undefined => {
    const hp = hostPort(k);
    const username = parts[k + 1]!;
    const password = parts.slice(k + 2).join(':');
    if (!hp || username === '' || k + 2 >= n) return undefined;
    return { protocol, ...hp, username, password };
  };
  const own = read(n - 3);
  if (own) return own;
  for (let k = 2; k < n - 3; k++) {
    const withColons = read(k);
    if (withColons) return withColons;
  }
  return undefined;
}

/** The node identity of types.ts: protocol://username@host:port, never the password. */
export function nodeId(p: { protocol: UpstreamProtocol; host: string; port: number; username?: string; tls?: boolean }): string {
  const host = p.host.includes(':') ? `[${p.host}]` : p.host;
  const user = p.username === undefined ? '' : `${encodeURIComponent(p.username)}@`;
  return `${p.tls === true ? 'https' : p.protocol}://${user}${host}:${p.port}`;
}

export function toNode(p: ParsedProxy, source: UpstreamNode['source'], expiresAt?: number): UpstreamNode {
  return {
    id: nodeId(p),
    protocol: p.protocol,
    host: p.host,
    port: p.port,
    ...(p.username === undefined ? {} : { username: p.username }),
    ...(p.password === undefined ? {} : { password: p.password }),
    source,
    ...(expiresAt === undefined ? {} : { expiresAt }),
    ...(p.tls === true ? { tls: true } : {}),
  };
}
