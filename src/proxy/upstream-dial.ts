// One upstream dial, TCP connect to the end of the upstream's handshake (SOCKS5 or HTTP CONNECT), under one
// guard: one promise, one abort listener, one deadline at a time (the connect's, then the handshake's), the
// socket's listeners shared by every dial (a socket finds its dial through a symbol), and the timeout
// messages written only when a deadline passes. Every new tunnel takes this path, so it holds one promise and
// no per-dial closures.
import { connect, type Socket } from 'node:net';
import type { UpstreamNode } from '../pool/types.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { DialSignal } from './cancel.ts';
import { classifySocketError, dialSocketError } from './dial-tcp.ts';
import { isDescriptorExhaustion } from '../errors/failed-accept.ts';
import { DialAbortedError, UpstreamDialError } from './errors.ts';
import { connectTls, readyEvent, tlsDialError, type UpstreamTls } from './dial-tls.ts';

/** What every upstream dial is given (dial-http.ts and dial-socks5.ts pass it through). */
export interface DialOptions {
  /** TCP connect to the upstream */
  connectTimeoutMs: number;
  /** upstream's answer to the tunnel request */
  handshakeTimeoutMs: number;
  signal?: DialSignal;
  metrics?: Metrics;
  /** A node with `tls`: how its certificate is checked (dial-tls.ts); absent = verified, the system's CAs. */
  tls?: UpstreamTls;
}

/**
 * The protocol part of a dial: starts on the connected socket and calls `done` once (with the value, or with
 * the failure as the pool should hear it). Returns what detaches its listeners without calling `done`
 * (the guard's deadline or the client's abort).
 */
export type Handshake<T> = (socket: Socket, done: (err: UpstreamDialError | null, value: T | null) => void) => () => void;

/**
 * What a handshake passes to `done` when the upstream did not take an optimistic handshake: the dial starts
 * again on a new connection with its fallback handshake (not a failure: not counted, the pool not told).
 */
export const FALL_BACK = new UpstreamDialError('handshake', 'upstream did not take the optimistic handshake');

/** What the shared listeners and timers call on the dial they belong to. */
interface DialSteps {
  connected(): void;
  connectFailed(err: NodeJS.ErrnoException): void;
  connectTimedOut(): void;
  handshakeTimedOut(): void;
}

const DIAL = Symbol('rotor.upstreamDial');
type DialSocket = Socket & { [DIAL]?: DialSteps };

class GuardedDial<T> implements DialSteps {
  private socket: DialSocket | undefined;
  private timer: NodeJS.Timeout | undefined;
  /**
   * When the handshake must be over (performance.now() clock), set once connected. The connect's timer is
   * kept for the handshake when it fires no later than that: a dial then pays one timer, not two, and a
   * timer that fires early is set again for what is left (handshakes that long are rare).
   */
  private handshakeDeadline = 0;
  private detachHandshake: (() => void) | undefined;
  private settled = false;
  /** When the current connection's connect began (its timer runs from here). */
  private started = 0;
  /** When the dial began (timed on rotor_upstream_connect_seconds, a fallback's first connection included). */
  private readonly begun = performance.now();
  /** The abort listener (a stable function, so it can be removed). */
  private readonly onAbort = (): void => this.fail(new DialAbortedError());

  constructor(
    private readonly node: UpstreamNode,
    private readonly options: DialOptions,
    private readonly kind: 'socks5' | 'http',
    private handshake: Handshake<T>,
    private readonly resolve: (value: T) => void,
    private readonly reject: (err: Error) => void,
    /** Run on a new connection when `handshake` answers FALL_BACK (once). */
    private fallback: Handshake<T> | undefined,
  ) {}

  start(): void {
    const signal = this.options.signal;
    if (signal?.aborted) {
      this.fail(new DialAbortedError());
      return;
    }
    signal?.addEventListener('abort', this.onAbort, { once: true });
    this.open();
  }

  /** The optimistic handshake was not taken: a new connection (new deadlines) with the fallback handshake. */
  private restart(): void {
    this.handshake = this.fallback!;
    this.fallback = undefined;
    this.detachHandshake?.();
    this.detachHandshake = undefined;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.handshakeDeadline = 0;
    const old = this.socket;
    if (old) {
      old[DIAL] = undefined;
      old.destroy();
    }
    this.open();
  }

  private open(): void {
    this.started = this.started === 0 ? this.begun : performance.now();
    this.timer = setTimeout(onConnectTimeout, this.options.connectTimeoutMs, this);
    const tls = this.node.tls === true;
    const s = (
      tls
        ? connectTls(this.node, this.options.tls)
        : connect({ host: this.node.host, port: this.node.port, allowHalfOpen: true, noDelay: true })
    ) as DialSocket;
    this.socket = s;
    s[DIAL] = this;
    // A plain socket has it from its options: setNoDelay() right after connect() costs a second setsockopt.
    if (tls) s.setNoDelay(true);
    s.on('error', onConnectError);
    s.on(tls ? readyEvent(this.node) : 'connect', onConnect);
  }

  connected(): void {
    const s = this.socket!;
    s.off('error', onConnectError);
    s.off(readyEvent(this.node), onConnect);
    // Between phases (and between the dial and the relay) nobody else listens; an error then must not crash
    // the process. The owner of each phase attaches its own handler and acts on errors.
    s.on('error', noop);
    if (this.settled) return;
    const now = performance.now();
    const handshakeMs = this.options.handshakeTimeoutMs;
    this.handshakeDeadline = now + handshakeMs;
    // The connect timer fires at started + connectTimeoutMs: early enough for the handshake's deadline?
    if (this.timer === undefined || this.started + this.options.connectTimeoutMs > this.handshakeDeadline) {
      clearTimeout(this.timer);
      this.timer = setTimeout(onHandshakeTimeout, handshakeMs, this);
    }
    this.detachHandshake = this.handshake(s, (err, value) => {
      if (err === FALL_BACK && this.fallback !== undefined && !this.settled) this.restart();
      else if (err) this.fail(err);
      else this.succeed(value as T);
    });
  }

  connectFailed(err: NodeJS.ErrnoException): void {
    if (isDescriptorExhaustion(err)) return this.fail(dialSocketError(err, ''));
    if (this.node.tls === true) return this.fail(tlsDialError(this.node, err, classifySocketError));
    this.fail(new UpstreamDialError(classifySocketError(err), `upstream ${this.node.host}:${this.node.port}: ${err.code ?? err.message}`));
  }

  connectTimedOut(): void {
    this.timer = undefined;
    // Connected in time: this timer now guards the handshake.
    if (this.handshakeDeadline !== 0) {
      this.handshakeTimedOut();
      return;
    }
    const ms = this.options.connectTimeoutMs;
    this.fail(new UpstreamDialError('connect_timeout', `upstream ${this.node.host}:${this.node.port} did not accept within ${ms} ms`));
  }

  handshakeTimedOut(): void {
    this.timer = undefined;
    const left = this.handshakeDeadline - performance.now();
    if (left >= 1) {
      this.timer = setTimeout(onHandshakeTimeout, left, this);
      return;
    }
    const ms = this.options.handshakeTimeoutMs;
    const what = this.kind === 'socks5' ? 'complete the SOCKS5 handshake' : 'answer CONNECT';
    this.fail(new UpstreamDialError('connect_timeout', `upstream did not ${what} within ${ms} ms`));
  }

  private finish(): void {
    this.settled = true;
    clearTimeout(this.timer);
    this.options.signal?.removeEventListener('abort', this.onAbort);
  }

  private succeed(value: T): void {
    if (this.settled) return;
    this.finish();
    this.options.metrics?.upstreamConnectSeconds.observe({ kind: this.kind }, (performance.now() - this.begun) / 1000);
    this.resolve(value);
  }

  private fail(err: Error): void {
    if (this.settled) return;
    this.finish();
    this.detachHandshake?.();
    this.socket?.destroy();
    if (err instanceof UpstreamDialError) this.options.metrics?.upstreamFailures.inc({ reason: err.reason });
    this.reject(err);
  }
}

function onConnect(this: DialSocket): void {
  this[DIAL]!.connected();
}
function onConnectError(this: DialSocket, err: NodeJS.ErrnoException): void {
  this[DIAL]!.connectFailed(err);
}
function onConnectTimeout(d: DialSteps): void {
  d.connectTimedOut();
}
function onHandshakeTimeout(d: DialSteps): void {
  d.handshakeTimedOut();
}
function noop(): void {}

/**
 * Connects to `node` and runs `handshake` on the socket (`fallback` on a new connection if it answers FALL_BACK), each step within its deadline of `options` and
 * cancelled by its signal (DialAbortedError; the socket is destroyed). Failures are UpstreamDialError, counted
 * on rotor_upstream_failures_total; success is timed on rotor_upstream_connect_seconds{kind}.
 */
export function dialThrough<T>(
  node: UpstreamNode,
  options: DialOptions,
  kind: 'socks5' | 'http',
  handshake: Handshake<T>,
  fallback?: Handshake<T>,
): Promise<T> {
  return new Promise<T>((resolve, reject) => new GuardedDial(node, options, kind, handshake, resolve, reject, fallback).start());
}
