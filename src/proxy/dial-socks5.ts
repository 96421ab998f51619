// SOCKS5 CONNECT through an upstream node: connect and handshake (our own client, src/wire/socks5-client.ts)
// under one guard (upstream-dial.ts: errno-classified failures, a deadline per step, the caller's DialSignal),
// which cancels by destroying the socket. Nothing of a dial outlives it: no timer, no listener.
import type { UpstreamNode } from '../pool/types.ts';
import { Socks5ClientError, socks5Connect, socks5ConnectPipelined, type Socks5Credentials } from '../wire/socks5-client.ts';
import { REPLY } from '../wire/socks5.ts';
import { UpstreamDialError } from './errors.ts';
import { dialThrough, FALL_BACK, type Handshake } from './upstream-dial.ts';
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
 * handshake under one guard (upstream-dial.ts). With credentials, greeting, auth and CONNECT go in one write
 * unless the upstream is known to drop pipelined bytes; one that turns out to (socks5-client.ts) is dialed
 * again step by step on a new connection, and remembered.
 */
export function dialSocks5(node: UpstreamNode, target: Target, options: DialOptions): Promise<Tunnel> {
  const credentials = credentialsOf(node);
  const stepwise: Handshake<Tunnel> = (socket, done) =>
    socks5Connect(socket, target, credentials, (err, head, exit) =>
      err ? done(classifySocksError(err), null) : done(null, { socket, head, exit }),
    );
  if (credentials === undefined || pipelining.get(keyOf(node)) === false) return dialThrough<Tunnel>(node, options, 'socks5', stepwise);
  const pipelined: Handshake<Tunnel> = (socket, done) =>
    socks5ConnectPipelined(socket, target, credentials, PIPELINE_WAIT_MS, (err, head, exit) => {
      if (err === null) {
        learn(node, true);
        return done(null, { socket, head, exit });
      }
      if (err.code === 'NOT_PIPELINED') {
        learn(node, false);
        return done(FALL_BACK, null);
      }
      // A refused CONNECT is answered after the auth: the upstream read the pipelined bytes.
      if (err.code === 'REJECTED') learn(node, true);
      done(classifySocksError(err), null);
    });
  return dialThrough<Tunnel>(node, options, 'socks5', pipelined, stepwise);
}

/**
 * The least wait for the auth answer after the method answer of a pipelined handshake (the wait is at least
 * twice the greeting's round trip): an upstream that read the auth answers it with the method answer.
 */
const PIPELINE_WAIT_MS = 100;
/** Upstreams (host:port) whose pipelining is known, at most (the oldest is forgotten first). */
const MAX_KNOWN = 4096;
/** host:port -> whether the SOCKS5 server there reads pipelined bytes (the server, not the credentials). */
const pipelining = new Map<string, boolean>();

function learn(node: UpstreamNode, pipelines: boolean): void {
  const key = keyOf(node);
  if (pipelining.get(key) === pipelines) return;
  pipelining.delete(key);
  if (pipelining.size >= MAX_KNOWN) pipelining.delete(pipelining.keys().next().value as string);
  pipelining.set(key, pipelines);
}

const nodeKeys = new WeakMap<UpstreamNode, string>();
function keyOf(node: UpstreamNode): string {
  let k = nodeKeys.get(node);
  if (k === undefined) {
    k = `${node.host}:${node.port}`;
    nodeKeys.set(node, k);
  }
  return k;
}

/** What is known of the SOCKS5 server of `node`: it read a pipelined handshake, dropped one, or not tried yet. */
export function socks5Pipelining(node: UpstreamNode): 'unknown' | 'pipelined' | 'stepwise' {
  const p = pipelining.get(keyOf(node));
  return p === undefined ? 'unknown' : p ? 'pipelined' : 'stepwise';
}

/** Remembers what a warm connection's pipelined greeting showed (warm.ts). */
export function learnSocks5Pipelining(node: UpstreamNode, pipelines: boolean): void {
  learn(node, pipelines);
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
