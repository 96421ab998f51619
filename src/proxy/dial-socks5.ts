// SOCKS5 CONNECT through an upstream node with the `socks` package. The TCP leg is ours (connectTcp) and
// handed to SocksClient as `existing_socket`, so one AbortSignal cancels either phase by destroying the
// socket, and a refused connect is classified from its errno rather than from a message string.
import type { Socket } from 'node:net';
import { SocksClient } from 'socks';
import type { UpstreamNode } from '../pool/types.ts';
import { UpstreamDialError } from './errors.ts';
import { connectTcp, guardedDial } from './dial-tcp.ts';
import type { DialOptions, Tunnel } from './dial-http.ts';
import type { Target } from './types.ts';

/** Maps a SocksClientError message (the package has no codes) to the reason the pool is told. */
export function classifySocksError(message: string): UpstreamDialError {
  if (message.includes('timed out')) return new UpstreamDialError('connect_timeout', 'upstream SOCKS5 handshake timed out');
  if (message.includes('Authentication failed') || message.includes('authentication type'))
    return new UpstreamDialError('auth', 'upstream refused its credentials');
  const rejected = /rejected connection - (\w+)/.exec(message);
  if (rejected) {
    switch (rejected[1]) {
      case 'HostUnreachable':
      case 'NetworkUnreachable':
      case 'TTLExpired':
        return new UpstreamDialError('target_refused', `upstream could not reach the target (${rejected[1]})`, true);
      case 'ConnectionRefused':
        return new UpstreamDialError('target_refused', 'the target refused the connection');
      case 'NotAllowed':
        return new UpstreamDialError('auth', 'upstream does not allow this account (NotAllowed)');
      default:
        return new UpstreamDialError('other', `upstream rejected the connection (${rejected[1]})`);
    }
  }
  if (message === 'Socket closed') return new UpstreamDialError('reset', 'upstream closed during the SOCKS5 handshake');
  return new UpstreamDialError('handshake', 'upstream SOCKS5 handshake failed');
}

function handshake(socket: Socket, node: UpstreamNode, target: Target, options: DialOptions): Promise<Tunnel> {
  return guardedDial<Tunnel>(
    options.handshakeTimeoutMs,
    options.signal,
    `upstream did not complete the SOCKS5 handshake within ${options.handshakeTimeoutMs} ms`,
    (ok, fail) => {
      SocksClient.createConnection(
        {
          command: 'connect',
          destination: { host: target.host, port: target.port },
          proxy: {
            host: node.host,
            port: node.port,
            type: 5,
            ...(node.username !== undefined ? { userId: node.username, password: node.password ?? '' } : {}),
          },
          existing_socket: socket,
          // Our guard ends the handshake first; this is the package's own backstop.
          timeout: options.handshakeTimeoutMs + 1000,
        },
        (err: Error | null, info?: { socket: Socket }) => {
          if (err || !info) {
            fail(classifySocksError(err?.message ?? ''));
            return;
          }
          // The package re-emits bytes that came with its reply as a 'data' event on the next tick and then
          // resumes the socket; collect them here so nothing is lost before the relay attaches.
          let head: Buffer | null = null;
          const collect = (chunk: Buffer): void => {
            head = head ? Buffer.concat([head, chunk]) : chunk;
          };
          socket.on('data', collect);
          setImmediate(() => {
            socket.pause();
            socket.off('data', collect);
            ok({ socket, head });
          });
        },
      ).catch(() => {
        // Settled through the callback.
      });
    },
    () => socket.destroy(),
  );
}

/** Opens a tunnel to `target` through a SOCKS5 node (RFC 1929 credentials when the node has them). */
export async function dialSocks5(node: UpstreamNode, target: Target, options: DialOptions): Promise<Tunnel> {
  const started = performance.now();
  try {
    const socket = await connectTcp(node.host, node.port, options.connectTimeoutMs, options.signal);
    const tunnel = await handshake(socket, node, target, options);
    options.metrics?.upstreamConnectSeconds.observe({ kind: 'socks5' }, (performance.now() - started) / 1000);
    return tunnel;
  } catch (err) {
    if (err instanceof UpstreamDialError) options.metrics?.upstreamFailures.inc({ reason: err.reason });
    throw err;
  }
}
