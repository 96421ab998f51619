// Who may talk to the admin port from a browser. The bearer token protects /v1 from anyone who does not hold
// it, but on the default setup (loopback, no token) the only barrier is the network, and a web page the
// operator visits is inside that network: by DNS rebinding (a name of the attacker's that resolves to
// 127.0.0.1, so the page is "same-origin" with the admin port) or by plain cross-site requests (a form POST
// needs no CORS). So every request is checked twice, before any route runs:
//  - Host (and the authority of an absolute-form target): an IP literal, a loopback name, the configured
//    admin.host, or a name in admin.allowedHosts. A rebinding page always arrives under a DNS name of its
//    own, so it is refused; an address typed by hand (http://10.0.0.5:9090) is never a rebinding.
//  - Origin, when a browser sent one: the page must be the admin port itself (same scheme-less host:port as
//    the Host header: the dashboard at /ui/ is served from here) or listed in admin.allowedOrigins.
//    `Origin: null` (sandboxed frames, file: pages) is refused. Clients that are not browsers send no Origin.
import { isIP } from 'node:net';
import { RotorError } from '../errors/rotor-error.ts';

export interface OriginPolicyOptions {
  /** config admin.host: the address the server listens on; a name here is a host clients may use. */
  host: string;
  /** config admin.allowedHosts: further Host names accepted; '*' accepts any. */
  allowedHosts?: readonly string[];
  /** config admin.allowedOrigins: further page origins (`https://ops.example.com`) accepted; '*' any. */
  allowedOrigins?: readonly string[];
}

/** A request the Host/Origin policy refuses; the admin error handler answers it 403. */
export class AdminOriginError extends RotorError {
  constructor(code: 'HOST_NOT_ALLOWED' | 'ORIGIN_NOT_ALLOWED', message: string) {
    super(code, message, { httpStatus: 403 });
  }
}

export interface RequestAuthority {
  /** the Host header */
  host: string | undefined;
  /** the Origin header */
  origin: string | undefined;
  /** the raw request target (absolute form carries an authority of its own) */
  url: string;
}

/** The host part of a Host header / authority, lower-cased, brackets and port removed; undefined if malformed. */
export function hostName(authority: string): string | undefined {
  const a = authority.trim().toLowerCase();
  if (a === '') return undefined;
  if (a.startsWith('[')) {
    const end = a.indexOf(']');
    if (end < 0) return undefined;
    const rest = a.slice(end + 1);
    if (rest !== '' && !/^:\d{1,5}$/.test(rest)) return undefined;
    return a.slice(1, end);
  }
  const m = /^([^:/@\s]+)(?::\d{1,5})?$/.exec(a);
  return m ? m[1] : undefined;
}

/** `host[:port]` of an absolute-form request target (`http://x:1/v1/app`), or undefined for origin form. */
function absoluteAuthority(url: string): string | undefined {
  const m = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)/i.exec(url);
  if (!m) return undefined;
  const authority = m[1] as string;
  const at = authority.lastIndexOf('@');
  return at >= 0 ? authority.slice(at + 1) : authority;
}

const normalOrigin = (o: string) => o.trim().toLowerCase().replace(/\/+$/, '');

export function createOriginPolicy(options: OriginPolicyOptions): (request: RequestAuthority) => void {
  const configured = hostName(options.host);
  const hosts = new Set((options.allowedHosts ?? []).map((h) => h.trim().toLowerCase()));
  const anyHost = hosts.has('*');
  const origins = new Set((options.allowedOrigins ?? []).map(normalOrigin));
  const anyOrigin = origins.has('*');

  const hostAllowed = (name: string): boolean =>
    anyHost || isIP(name) !== 0 || name === 'localhost' || name.endsWith('.localhost') || name === configured || hosts.has(name);

  return ({ host, origin, url }) => {
    // HTTP/1.0 clients may send no Host; browsers always do.
    for (const authority of [host, absoluteAuthority(url)]) {
      if (authority === undefined) continue;
      const name = hostName(authority);
      if (name === undefined || !hostAllowed(name)) {
        throw new AdminOriginError('HOST_NOT_ALLOWED', 'this Host is not served here: add it to admin.allowedHosts');
      }
    }
    if (origin === undefined) return;
    if (anyOrigin || origins.has(normalOrigin(origin))) return;
    // Same origin: the page was served by this port under the Host it is now talking to.
    const m = /^https?:\/\/([^/?#@]+)$/i.exec(origin.trim());
    if (m && host !== undefined && (m[1] as string).toLowerCase() === host.trim().toLowerCase()) return;
    throw new AdminOriginError('ORIGIN_NOT_ALLOWED', 'requests from other origins are refused: add the page to admin.allowedOrigins');
  };
}
