// SOCKS5 CONNECT through an upstream node: connect and handshake (our own client, src/wire/socks5-client.ts)
// under one guard (upstream-dial.ts: errno-classified failures, a deadline per step, the caller's DialSignal),
// which cancels by destroying the socket. Nothing of a dial outlives it: no timer, no listener.
import type { UpstreamNode } from '../pool/types.ts';
import { Socks5ClientError, socks5Connect, type Socks5Credentials } from '../wire/socks5-client.ts';
import { REPLY } from '../wire/socks5.ts';
import { UpstreamDialError } from './errors.ts';
import { dialThrough } from './upstream-dial.ts';
import type { DialOptions, Tunnel } from './dial-http.ts';
import type { Target } from './types.ts';

/** Maps a failed SOCKS5 handshake to the reason the pool is told. */
export function classifySocksError(err: Socks5ClientError): UpstreamDialError {
  switch (err.code) {
    case 'NO_ACCEPTABLE_METHOD':
    case 'AUTH_FAILED':
      return new UpstreamDialError('auth', 'upstream refused its credentials');
    case 'CLOSED':
      return new UpstreamDialError('reset', err.message);
    case 'REJECTED':
      switch (err.reply) {
        case REPLY.hostUnreachable:
        case REPLY.networkUnreachable:
        case REPLY.ttlExpired:
          return new UpstreamDialError('target_refused', `upstream could not reach the target (reply ${err.reply})`, true);
        case REPLY.connectionRefused:
          return new UpstreamDialError('target_refused', 'the target refused the connection');
        // The node cannot handle this target's address form: the target's trait, not the node's health.
        case REPLY.addressTypeNotSupported:
          return new UpstreamDialError('target_refused', 'upstream does not support this target address type');
        case REPLY.notAllowed:
          return new UpstreamDialError('auth', 'upstream does not allow this account (NotAllowed)');
        default:
          return new UpstreamDialError('other', `upstream rejected the connection (reply ${err.reply})`);
      }
    default:
      return new UpstreamDialError('handshake', `upstream SOCKS5 handshake failed: ${err.message}`);
  }
}

/**
 * Opens a tunnel to `target` through a SOCKS5 node (RFC 1929 credentials when the node has them): connect and
 * handshake under one guard (upstream-dial.ts).
 */
export function dialSocks5(node: UpstreamNode, target: Target, options: DialOptions): Promise<Tunnel> {
  const credentials = credentialsOf(node);
  return dialThrough<Tunnel>(node, options, 'socks5', (socket, done) =>
    socks5Connect(socket, target, credentials, (err, head, exit) =>
      err ? done(classifySocksError(err), null) : done(null, { socket, head, exit }),
    ),
  );
}

/**
 * Each node's credentials as one object for all its dials (a node's credentials never change), so the SOCKS5
 * client can keep their encoded RFC 1929 message with them (socks5-client.ts) instead of building it per dial.
 */
const nodeCredentials = new WeakMap<UpstreamNode, Socks5Credentials | null>();

export function credentialsOf(node: UpstreamNode): Socks5Credentials | undefined {
  let c = nodeCredentials.get(node);
  if (c === undefined) {
    c = node.username !== undefined ? { username: node.username, password: node.password ?? '' } : null;
    nodeCredentials.set(node, c);
  }
  return c ?? undefined;
}
