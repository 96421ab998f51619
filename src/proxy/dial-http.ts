// HTTP CONNECT through an HTTP upstream proxy, with a connect and a response deadline,
// Basic credentials, and the bytes that arrive behind the response header kept as `head`.
import type { Socket } from 'node:net';
import type { UpstreamNode } from '../pool/types.ts';
import { UpstreamDialError } from './errors.ts';
import { dialThrough, type DialOptions } from './upstream-dial.ts';
import type { Target } from './types.ts';

// Defined beside the guard that reads it (upstream-dial.ts imports nothing from here: no cycle).
export type { DialOptions } from './upstream-dial.ts';

/** An established tunnel to the target; `head` holds target bytes that arrived with the upstream's answer. */
export interface Tunnel {
  socket: Socket;
  head: Buffer | null;
  /** The address the upstream said it connected to the target from (a SOCKS5 reply's BND.ADDR), when it said one. */
  exit?: string | undefined;
}

const MAX_RESPONSE_HEADER = 16 * 1024;
const HEADER_END = Buffer.from('\r\n\r\n');

export function hostPort(target: Target): string {
  return target.host.includes(':') ? `[${target.host}]:${target.port}` : `${target.host}:${target.port}`;
}

/** Each node's Proxy-Authorization value (null: none), made once: a node's credentials never change. */
const authValues = new WeakMap<UpstreamNode, string | null>();

export function basicAuth(node: UpstreamNode): string | undefined {
  let value = authValues.get(node);
  if (value === undefined) {
    value =
      node.username === undefined && node.password === undefined
        ? null
        : `Basic ${Buffer.from(`${node.username ?? ''}:${node.password ?? ''}`).toString('base64')}`;
    authValues.set(node, value);
  }
  return value ?? undefined;
}

/** Maps the upstream's status to the reason the pool is told: 407 is the node's fault, 502/504 the target's. */
function failureFor(status: number): UpstreamDialError {
  // tinyproxy answers 401 where RFC 9110 says 407.
  if (status === 407 || status === 401) return new UpstreamDialError('auth', `upstream refused its credentials (${status})`);
  if (status === 504) return new UpstreamDialError('target_refused', 'upstream could not reach the target in time (504)', true);
  // 403: the upstream refuses this account (balance, disabled, whitelist): the node is unusable for us.
  if (status === 403) return new UpstreamDialError('auth', 'upstream refused the tunnel (403)');
  // 400 to a CONNECT whose target Rotor already checked: the upstream objects to that target, not a broken node.
  if (status === 400) return new UpstreamDialError('target_refused', 'upstream refused the target (400)');
  if (status === 502 || status === 503) return new UpstreamDialError('target_refused', `upstream could not open the tunnel (${status})`);
  return new UpstreamDialError('handshake', `upstream answered ${status} to CONNECT`);
}

const HTTP_1 = Buffer.from('HTTP/1.', 'latin1');

/**
 * The status of a response head's first line, `HTTP/1.0` or `HTTP/1.1`, a space, three digits, then a space or
 * the line's end; -1 for anything else. Read from the bytes: no string or match per tunnel.
 */
export function statusOf(b: Buffer): number {
  if (b.length < 13 || b.compare(HTTP_1, 0, 7, 0, 7) !== 0) return -1;
  const minor = b[7]!;
  if ((minor !== 0x30 && minor !== 0x31) || b[8] !== 0x20) return -1;
  let status = 0;
  for (let i = 9; i < 12; i++) {
    const d = b[i]! - 0x30;
    if (d < 0 || d > 9) return -1;
    status = status * 10 + d;
  }
  const next = b[12];
  return next === 0x20 || (next === 0x0d && b[13] === 0x0a) ? status : -1;
}

/**
 * Reads the upstream's answer to CONNECT: `done` gets the bytes after the header (socket paused, listeners
 * gone) or the failure as the pool should hear it. Returns what detaches without calling `done`.
 */
/** Told once how an upstream answered a CONNECT: an error, or 200 with the bytes behind the answer's head. */
export interface ConnectAnswerReceiver {
  connectAnswered(err: UpstreamDialError | null, rest: Buffer | null): void;
}

const ANSWER = Symbol('rotor.connectAnswer');
type AnsweredSocket = Socket & { [ANSWER]?: ConnectAnswer | undefined };

/**
 * Reads an upstream's answer to a CONNECT: one object per tunnel and the same module-level listeners for every
 * socket (they find their reader on the socket), no closure per tunnel. detach() stops reading it.
 */
export class ConnectAnswer {
  private buffer: Buffer | null = null;

  constructor(
    private readonly socket: Socket,
    private readonly receiver: ConnectAnswerReceiver,
  ) {
    (socket as AnsweredSocket)[ANSWER] = this;
    socket.on('data', onAnswerData);
    // on(), not once(): fail() detaches them all when the first fires (once() would wrap each in a new function).
    socket.on('end', onAnswerEnd);
    socket.on('close', onAnswerEnd);
    socket.on('error', onAnswerError);
  }

  detach(): void {
    const socket = this.socket as AnsweredSocket;
    if (socket[ANSWER] !== this) return;
    socket[ANSWER] = undefined;
    socket.off('data', onAnswerData);
    socket.off('end', onAnswerEnd);
    socket.off('close', onAnswerEnd);
    socket.off('error', onAnswerError);
  }

  fail(err: UpstreamDialError): void {
    this.detach();
    this.receiver.connectAnswered(err, null);
  }

  data(chunk: Buffer): void {
    const b = this.buffer === null ? chunk : Buffer.concat([this.buffer, chunk]);
    this.buffer = b;
    const end = b.indexOf(HEADER_END);
    if (end < 0) {
      if (b.length > MAX_RESPONSE_HEADER) this.fail(new UpstreamDialError('handshake', 'upstream answer header too large'));
      return;
    }
    const status = statusOf(b);
    if (status < 0) {
      this.fail(new UpstreamDialError('handshake', 'upstream answered something other than HTTP/1.x'));
      return;
    }
    if (status !== 200) {
      this.fail(failureFor(status));
      return;
    }
    this.socket.pause();
    this.detach();
    this.receiver.connectAnswered(null, b.length > end + 4 ? Buffer.from(b.subarray(end + 4)) : null);
  }
}

function onAnswerData(this: AnsweredSocket, chunk: Buffer): void {
  this[ANSWER]?.data(chunk);
}

function onAnswerEnd(this: AnsweredSocket): void {
  this[ANSWER]?.fail(new UpstreamDialError('reset', 'upstream closed before answering CONNECT'));
}

function onAnswerError(this: AnsweredSocket, err: NodeJS.ErrnoException): void {
  this[ANSWER]?.fail(new UpstreamDialError('reset', `upstream failed during CONNECT: ${err.code ?? 'error'}`));
}

/** readConnectResponse's callback as a receiver. */
class AnswerCallback implements ConnectAnswerReceiver {
  constructor(readonly connectAnswered: (err: UpstreamDialError | null, rest: Buffer | null) => void) {}
}

/** A ConnectAnswer with a callback; returns its detach. */
export function readConnectResponse(socket: Socket, done: (err: UpstreamDialError | null, rest: Buffer | null) => void): () => void {
  const answer = new ConnectAnswer(socket, new AnswerCallback(done));
  return () => answer.detach();
}

/** The CONNECT request for `target` through `node`, with its Basic credentials. */
export function connectRequestText(node: UpstreamNode, target: Target): string {
  const auth = basicAuth(node);
  const where = hostPort(target);
  return `CONNECT ${where} HTTP/1.1\r\nHost: ${where}\r\n${auth ? `Proxy-Authorization: ${auth}\r\n` : ''}\r\n`;
}

/** Opens a tunnel to `target` through an HTTP proxy node with CONNECT (upstream-dial.ts: one guard, one promise). */
export function dialHttpConnect(node: UpstreamNode, target: Target, options: DialOptions): Promise<Tunnel> {
  return dialThrough<Tunnel>(node, options, 'http', (socket, done) => {
    socket.write(connectRequestText(node, target));
    return readConnectResponse(socket, (err, head) => done(err, err ? null : { socket, head }));
  });
}

/**
 * A plain TCP connection to an HTTP proxy node, for forwarding absolute-URI requests to it (no tunnel): the
 * same guard as a tunnel with nothing to say after the connect, so it is timed (kind 'http') and its failures
 * counted in the one place every dial is.
 */
export function dialHttpForward(node: UpstreamNode, options: DialOptions): Promise<Tunnel> {
  return dialThrough<Tunnel>(node, options, 'http', connectedIsEnough);
}

function connectedIsEnough(socket: Socket, done: (err: null, value: Tunnel) => void): () => void {
  done(null, { socket, head: null });
  return noDetach;
}
function noDetach(): void {}
