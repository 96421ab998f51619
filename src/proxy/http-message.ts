// What the HTTP listener reads from and writes to a client: request targets (CONNECT authority, absolute
// URI), Basic proxy credentials, the headers forwarded (hop-by-hop ones removed, RFC 9110 §7.6.1), and the
// one refusal writer used for every answer Rotor itself gives (on a ServerResponse, or on a raw socket for
// CONNECT and Upgrade, whose sockets node:http hands over).
import { STATUS_CODES, type ServerResponse } from 'node:http';
import { isIPv6, type Socket } from 'node:net';
import { proxyStatus, statusErrorType, type ProxyErrorType } from './proxy-status.ts';
import type { Target } from './types.ts';

/** A DNS name or IPv4 literal as a target host: bounded, no characters a name cannot hold. */
const HOST_NAME = /^[A-Za-z0-9_](?:[A-Za-z0-9._-]{0,252})$/;

function validPort(text: string | undefined, fallback?: number): number | undefined {
  if (text === undefined || text === '') return fallback;
  // 1-5 ASCII digits, read without a regex (every plain-HTTP request passes here).
  if (text.length > 5) return undefined;
  let port = 0;
  for (let i = 0; i < text.length; i++) {
    const digit = text.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) return undefined;
    port = port * 10 + digit;
  }
  return port >= 1 && port <= 65535 ? port : undefined;
}

/** The last CONNECT authority parsed and its target: clients mostly tunnel to a few hosts (shared, never changed). */
let lastAuthority = '';
let lastConnect: Target | undefined;

/**
 * Parses `host:port` / `[v6]:port` of a CONNECT request line, without a regular expression (every CONNECT
 * passes here). The same authority as the last call's gives the same object: callers never change a target.
 */
export function parseConnectTarget(url: string | undefined): Target | undefined {
  if (!url) return undefined;
  if (url === lastAuthority) return lastConnect;
  const target = connectTarget(url);
  lastAuthority = url;
  lastConnect = target;
  return target;
}

function connectTarget(url: string): Target | undefined {
  const colon = url.lastIndexOf(':');
  if (colon <= 0) return undefined;
  const port = validPort(url.slice(colon + 1));
  if (port === undefined) return undefined;
  if (url.charCodeAt(0) === 0x5b /* [ */) {
    if (colon < 3 || url.charCodeAt(colon - 1) !== 0x5d /* ] */) return undefined;
    const host = url.slice(1, colon - 1);
    for (let i = 0; i < host.length; i++) if (!isV6Char(host.charCodeAt(i))) return undefined;
    return isIPv6(host) ? { host, port } : undefined;
  }
  // HOST_NAME, by hand: 1-253 of [A-Za-z0-9._-], not starting with '.' or '-'.
  if (colon > 253) return undefined;
  const first = url.charCodeAt(0);
  if (first === 0x2e /* . */ || first === 0x2d /* - */) return undefined;
  for (let i = 0; i < colon; i++) if (!isNameChar(url.charCodeAt(i))) return undefined;
  return { host: url.slice(0, colon), port };
}

/** [A-Za-z0-9._-] */
function isNameChar(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) || c === 0x2e || c === 0x2d || c === 0x5f;
}

/** [0-9A-Fa-f:.] */
function isV6Char(c: number): boolean {
  return (c >= 0x30 && c <= 0x3a) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46) || c === 0x2e;
}

/** An absolute-URI request target: where to dial, and the origin-form path for the target itself. */
export interface AbsoluteTarget extends Target {
  /** path and query, origin form (`/a?b`) */
  path: string;
  /** `host[:port]` as the Host header carries it (IPv6 in brackets) */
  authority: string;
  /** the URI as sent to an HTTP upstream proxy: http:// even for ws:// (the Upgrade header says the rest) */
  absolute: string;
}

/** The last URI parsed and its target: a kept-alive client mostly asks for the same URI again (shared, never changed). */
let lastUrl = '';
let lastTarget: AbsoluteTarget | undefined;

/**
 * Parses an absolute-form target (`http://host[:port]/path`, `ws://…`; IPv6 literals in brackets). Undefined
 * for origin form, other schemes (https:// belongs in a CONNECT) or a malformed authority. The same URI as the
 * last call's gives the same object: callers read a target, they never change it.
 */
export function parseAbsoluteTarget(url: string | undefined): AbsoluteTarget | undefined {
  if (!url) return undefined;
  if (url === lastUrl) return lastTarget;
  const target = parseTarget(url);
  lastUrl = url;
  lastTarget = target;
  return target;
}

function parseTarget(url: string): AbsoluteTarget | undefined {
  const m = /^(http|ws):\/\/(?:[^@/?#]*@)?(\[[0-9A-Fa-f:.]+\]|[^:/?#[\]]+)(?::(\d*))?([/?#].*)?$/i.exec(url);
  if (!m) return undefined;
  const port = validPort(m[3], 80);
  if (port === undefined) return undefined;
  const rawHost = m[2]!;
  let host: string;
  if (rawHost.startsWith('[')) {
    host = rawHost.slice(1, -1);
    if (!isIPv6(host)) return undefined;
  } else {
    host = rawHost.toLowerCase();
    if (!HOST_NAME.test(host)) return undefined;
  }
  let path = m[4] ?? '/';
  const hash = path.indexOf('#');
  if (hash >= 0) path = path.slice(0, hash);
  if (path.startsWith('?')) path = `/${path}`;
  if (path === '') path = '/';
  const authority = port === 80 ? rawHost : `${rawHost}:${port}`;
  return { host, port, path, authority, absolute: `http://${authority}${path}` };
}

/** Basic credentials of a Proxy-Authorization header; undefined when absent or not Basic. */
export function parseBasic(header: string | undefined): { username: string; password: string } | undefined {
  if (!header) return undefined;
  const m = /^\s*basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
  if (!m) return undefined;
  const text = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = text.indexOf(':');
  if (colon < 0) return { username: text, password: '' };
  return { username: text.slice(0, colon), password: text.slice(colon + 1) };
}

/** RFC 9110 §7.6.1's hop-by-hop fields, plus the proxy's own: never passed on, either way. */
const HOP_BY_HOP = new Set([
  'connection',
  'proxy-connection',
  'keep-alive',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'proxy-authorization',
  'proxy-authenticate',
]);

/** The fields a message's Connection header names (hop-by-hop for this message only); undefined = none. */
function connectionNamed(raw: string[]): Set<string> | undefined {
  let named: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.length === 10 && raw[i]!.toLowerCase() === 'connection') {
      const value = raw[i + 1]!;
      // The usual values name only fields dropped anyway (Keep-Alive) or none: no list to build.
      if (value.length <= 10) {
        const lower = value.toLowerCase();
        if (lower === 'keep-alive' || lower === 'close') continue;
      }
      for (const token of value.split(',')) {
        const t = token.trim().toLowerCase();
        // Content-Length frames the message: never hop-by-hop (RFC 9110 §7.6.1), whatever Connection says.
        if (t && t !== 'content-length') (named ??= new Set()).add(t);
      }
    }
  }
  return named;
}

const NO_OPTIONS: { keepUpgrade?: boolean; drop?: ReadonlySet<string> } = {};

/**
 * The headers to pass on, as a flat [name, value, …] list in the sender's order and case: hop-by-hop ones
 * and every field the Connection header names removed. `keep` puts back fields this hop must carry on
 * (Upgrade and `Connection: upgrade` for a WebSocket handshake); `drop` removes more (Expect, Host).
 */
export function forwardHeaders(raw: string[], options: { keepUpgrade?: boolean; drop?: ReadonlySet<string> } = NO_OPTIONS): string[] {
  const named = connectionNamed(raw);
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || named?.has(lower) || options.drop?.has(lower)) continue;
    out.push(name, raw[i + 1]!);
  }
  if (options.keepUpgrade) {
    for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() === 'upgrade') out.push('Upgrade', raw[i + 1]!);
    out.push('Connection', 'Upgrade');
  }
  return out;
}

/**
 * The same fields as forwardHeaders, as the object node:http's request takes (repeated fields as arrays,
 * the sender's case), with `Host: authority` first and `drop` removed: one pass, no intermediate list.
 * A request's Transfer-Encoding stays, as sent: node:http chunks the body it is given only when the head says
 * so (or by default for POST-like methods), and a GET's, DELETE's or OPTIONS's chunked body would otherwise go
 * out unframed, for the target to read as further requests. Its codings are the body's as read (node:http's
 * parser takes off only the chunking, which node:http's client puts back).
 */
export function forwardHeaderObject(raw: string[], drop: ReadonlySet<string>, authority: string): Record<string, string | string[]> {
  const named = connectionNamed(raw);
  const out: Record<string, string | string[]> = { Host: authority };
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) ? lower !== 'transfer-encoding' : named?.has(lower) || drop.has(lower)) continue;
    const value = raw[i + 1]!;
    const had = out[name];
    if (had === undefined) out[name] = value;
    else if (typeof had === 'string') out[name] = [had, value];
    else if (Array.isArray(had)) had.push(value);
    // A name Object.prototype has (constructor, toString, __proto__): an own field, not the inherited member.
    else Object.defineProperty(out, name, { value, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** A request head in HTTP/1.1 wire form (for the Upgrade path, where the socket is ours). */
export function requestHead(method: string, target: string, headers: string[]): string {
  let head = `${method} ${target} HTTP/1.1\r\n`;
  for (let i = 0; i < headers.length; i += 2) head += `${headers[i]}: ${headers[i + 1]}\r\n`;
  return `${head}\r\n`;
}

/** An answer Rotor gives itself: refusals (400, 403, 407) and failures (5xx). */
export interface Refusal {
  status: number;
  /** one line, safe to show the client */
  reason: string;
  /** Proxy-Status error type (RFC 9209); absent = the one the status implies (statusErrorType). */
  error?: ProxyErrorType | undefined;
}

/**
 * The one place a refusal's wire form is decided. 407 carries the Basic challenge; every answer carries
 * Proxy-Status with its error type and the reason as details.
 */
function refusalHeaders(r: Refusal, realm: string, body: string, close: boolean): Record<string, string> {
  const headers: Record<string, string> = {
    'Content-Type': 'text/plain; charset=utf-8',
    'Content-Length': String(Buffer.byteLength(body)),
  };
  headers['Proxy-Status'] = proxyStatus(r.error ?? statusErrorType(r.status), r.reason);
  if (r.status === 407) headers['Proxy-Authenticate'] = `Basic realm="${realm}"`;
  if (close) headers.Connection = 'close';
  return headers;
}

/**
 * Answers on the http server's response: in order behind answers still due on a pipelined connection.
 * A 407 keeps the connection (the client retries with credentials on it); the others close it.
 */
export function refuseResponse(res: ServerResponse, r: Refusal, realm: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = r.reason;
  const close = r.status !== 407;
  if (close) res.shouldKeepAlive = false;
  res.writeHead(r.status, refusalHeaders(r, realm, body, close));
  res.end(body);
}

/** Answers on a socket that is ours (CONNECT, Upgrade), then closes it once written (bounded). */
export function refuseSocket(socket: Socket, r: Refusal, realm: string): void {
  const body = r.reason;
  if (socket.writable) {
    let head = `HTTP/1.1 ${r.status} ${STATUS_CODES[r.status] ?? 'Error'}\r\n`;
    for (const [k, v] of Object.entries(refusalHeaders(r, realm, body, true))) head += `${k}: ${v}\r\n`;
    socket.end(`${head}\r\n${body}`);
  }
  setTimeout(() => socket.destroy(), 1000).unref();
}
