// Where a client asked to go, checked before anything is dialed. A malformed target (a 300-character host,
// port 0, a label with a space) would otherwise go to an upstream node, fail there, and be charged to the
// node: one such request could send every node of a user's pool cooling. So it is refused here with 400 /
// SOCKS5 0x01 and never reaches a pool. Both listeners get it through Router.dial.
import { isIP } from 'node:net';
import { GatewayError } from './errors.ts';
import type { Target } from './types.ts';

/** RFC 1035 2.3.4: a name of at most 253 characters in its text form (255 octets on the wire). */
export const MAX_HOST_LENGTH = 253;
const LABEL = /^[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$/;

/** The client's target is malformed: answered 400 (HTTP) or 0x01 (SOCKS5); no upstream is tried. */
export class BadTargetError extends GatewayError {
  constructor(reason: string) {
    super('BAD_TARGET', `bad target: ${reason}`);
  }
}

/**
 * The target in the form the dialers use (an IPv6 literal without brackets, a name without its root dot),
 * or BadTargetError. Names follow the hostname rules (letters, digits, '-', and '_' which real services use),
 * labels of 1-63 characters, at most 253 in all.
 */
export function checkTarget(target: Target): Target {
  const { port } = target;
  if (!Number.isInteger(port) || port < 1 || port > 65_535) throw new BadTargetError('port must be 1-65535');
  let host = target.host;
  if (typeof host !== 'string' || host === '') throw new BadTargetError('empty host');
  if (host.startsWith('[') && host.endsWith(']')) {
    host = host.slice(1, -1);
    if (isIP(host) !== 6) throw new BadTargetError('not an IPv6 address in brackets');
    return { host, port };
  }
  if (isIP(host) !== 0) return { host, port };
  if (host.endsWith('.')) host = host.slice(0, -1);
  if (host.length === 0 || host.length > MAX_HOST_LENGTH) throw new BadTargetError(`host name longer than ${MAX_HOST_LENGTH} characters`);
  for (const label of host.split('.')) {
    if (!LABEL.test(label)) throw new BadTargetError('host name is not valid');
  }
  // All-numeric dotted names that are not addresses (999.1.1.1) would be read as addresses by some resolvers.
  if (/^[0-9.]+$/.test(host)) throw new BadTargetError('not a valid IPv4 address');
  return host === target.host ? target : { host, port };
}
