// What the upstream dials know of SOCKS5 upstreams (the dial itself runs in upstream-dial.ts and warm.ts, which
// own the socket and drive src/wire/socks5-client.ts's sans-I/O client): each node's credentials, which
// upstreams read a pipelined handshake, and how a failed handshake is told to the pool. It calls nothing of
// theirs: they read it.
import type { UpstreamNode } from '../pool/types.ts';
import type { Socks5Client, Socks5ClientError, Socks5Credentials } from '../wire/socks5-client.ts';
import { REPLY } from '../wire/socks5.ts';
import { UpstreamDialError } from './errors.ts';

/** What a UDP dial says when its upstream answers UDP ASSOCIATE with "command not supported" (0x07). */
export const UDP_UNSUPPORTED = 'upstream does not carry UDP';

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
 * A SOCKS5 dial's handshake ended (the client done or failed): what it showed of the upstream's pipelining is
 * remembered. Returns the failure as the pool should hear it; null when it succeeded, or when the upstream did
 * not take the pipelined handshake (then the dial starts again step by step: not a failure, the pool not told).
 */
export function socks5Ended(node: UpstreamNode, client: Socks5Client): UpstreamDialError | null {
  const err = client.error;
  if (client.pipelined) {
    // A refused CONNECT is answered after the auth: the upstream read the pipelined bytes too.
    if (err === null || err.code === 'REJECTED') learn(node, true);
    else if (err.code === 'NOT_PIPELINED') {
      learn(node, false);
      return null;
    }
  }
  if (err === null) return null;
  if (client.associating && err.code === 'REJECTED' && err.reply === REPLY.commandNotSupported)
    return new UpstreamDialError('target_refused', UDP_UNSUPPORTED);
  return classifySocksError(err);
}

/**
 * The least wait for the auth answer after the method answer of a pipelined handshake (the wait is at least
 * twice the greeting's round trip): an upstream that read the auth answers it with the method answer.
 */
export const PIPELINE_WAIT_MS = 100;

/**
 * How long a SOCKS5 handshake with `node` waits for a pipelined auth answer: 0 (step by step) without
 * credentials (the next answer would be the CONNECT's, which waits on the target: nothing to judge a drop by)
 * or when the upstream is known to drop pipelined bytes, else PIPELINE_WAIT_MS (all in one write).
 */
export function pipelineWaitFor(node: UpstreamNode, credentials: Socks5Credentials | undefined): number {
  return credentials !== undefined && pipelining.get(keyOf(node)) !== false ? PIPELINE_WAIT_MS : 0;
}
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
