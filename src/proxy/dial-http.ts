// HTTP CONNECT through an HTTP upstream proxy: the request with its Basic credentials, and the upstream's
// answer read sans I/O (ConnectAnswer: fed the bytes, it returns what happened; the module that owns the socket,
// upstream-dial.ts or warm.ts, reads and acts), with the bytes that arrive behind the answer's head kept as
// `head`. Also what every upstream dial is given and gives back (DialOptions, Tunnel).
import type { Socket } from 'node:net';
import type { UpstreamNode } from '../pool/types.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { DONE, FAILED, MORE, type Step } from '../wire/socks5-client.ts';
import type { DialSignal } from './cancel.ts';
import type { UpstreamTls } from './dial-tls.ts';
import { UpstreamDialError } from './errors.ts';
import type { Target } from './types.ts';

/** What every upstream dial is given (the dialers of upstream-dial.ts, warm.ts, udp-dial.ts). */
export interface DialOptions {
  /** TCP connect to the upstream */
  connectTimeoutMs: number;
  /** upstream's answer to the tunnel request */
  handshakeTimeoutMs: number;
  signal?: DialSignal;
  metrics?: Metrics;
  /** A node with `tls`: how its certificate is checked (dial-tls.ts); absent = verified, the system's CAs. */
  tls?: UpstreamTls;
  /**
   * The attempt waiting for this dial (dial-race.ts): a dialer that answers through it returns null instead of
   * a promise (warm.ts, a request on a ready connection). A dialer may ignore it and return its promise.
   */
  answer?: DialAnswer;
}

/** The end of one dial, told to the attempt that waits for it (an object of the race, not a function per dial). */
export interface DialAnswer {
  answered(tunnel: Tunnel): void;
  failed(err: unknown): void;
  /**
   * true: whoever takes the tunnel attaches its reader in the same turn as the answer (microtasks included: a
   * listener's relay), so a dialer may hand the socket over still flowing instead of paused (a pause there and
   * a resume in the relay cost a tick, a read and a 'resume' per tunnel). Absent: paused.
   */
  readonly takesFlowing?: boolean;
}

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
 * An upstream's answer to a CONNECT, read sans I/O: one object per tunnel, fed each chunk. DONE: 200, with the
 * bytes behind the answer's head in `head` (the owner pauses the socket); FAILED: `error`, as the pool should
 * hear it. start() gives the request to write.
 */
export class ConnectAnswer {
  /** Never anything to write after the request (the same shape as a SOCKS5 client's). */
  readonly out: Buffer | null = null;
  head: Buffer | null = null;
  error: UpstreamDialError | null = null;
  private buffer: Buffer | null = null;
  private done = false;

  constructor(private readonly request: string) {}

  start(): string {
    return this.request;
  }

  feed(chunk: Buffer): Step {
    if (this.done) return this.error ? FAILED : DONE;
    const b = this.buffer === null ? chunk : Buffer.concat([this.buffer, chunk]);
    this.buffer = b;
    const end = b.indexOf(HEADER_END);
    if (end < 0) {
      if (b.length > MAX_RESPONSE_HEADER) return this.fail(new UpstreamDialError('handshake', 'upstream answer header too large'));
      return MORE;
    }
    const status = statusOf(b);
    if (status < 0) return this.fail(new UpstreamDialError('handshake', 'upstream answered something other than HTTP/1.x'));
    if (status !== 200) return this.fail(failureFor(status));
    this.done = true;
    this.buffer = null;
    if (b.length > end + 4) this.head = Buffer.from(b.subarray(end + 4));
    return DONE;
  }

  /** The upstream closed (or the socket failed: `err`) before answering. */
  closed(err?: { code?: string | undefined }): Step {
    if (this.done) return this.error ? FAILED : DONE;
    return this.fail(
      new UpstreamDialError(
        'reset',
        err === undefined ? 'upstream closed before answering CONNECT' : `upstream failed during CONNECT: ${err.code ?? 'error'}`,
      ),
    );
  }

  private fail(err: UpstreamDialError): Step {
    this.done = true;
    this.buffer = null;
    this.error = err;
    return FAILED;
  }
}

/** The CONNECT request for `target` through `node`, with its Basic credentials. */
export function connectRequestText(node: UpstreamNode, target: Target): string {
  const auth = basicAuth(node);
  const where = hostPort(target);
  return `CONNECT ${where} HTTP/1.1\r\nHost: ${where}\r\n${auth ? `Proxy-Authorization: ${auth}\r\n` : ''}\r\n`;
}
