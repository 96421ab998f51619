// One upstream dial, TCP connect to the end of the upstream's handshake (SOCKS5, HTTP CONNECT, or nothing for a
// plain connection), under one guard: one promise, one deadline at a time (the connect's, then the handshake's),
// the socket's listeners shared by every dial (a socket finds its dial through a symbol), and the timeout
// messages written only when a deadline passes. The handshake is data: a sans-I/O reader (wire/socks5-client.ts's
// Socks5Client, dial-http.ts's ConnectAnswer) that this guard feeds the socket's bytes and whose result it acts
// on, so no code of a dialer is called back. A DialCancel is handed the socket and destroys it itself; the dial
// sees the close (an AbortSignal's listener is this dial object). Every new tunnel takes this path, so it holds
// one promise, one reader and no per-dial closures.
import { connect, type Socket } from 'node:net';
import type { UpstreamNode } from '../pool/types.ts';
import { DONE, FAILED, MORE, socks5Connect, type Socks5Client, type Step } from '../wire/socks5-client.ts';
import { DialCancel } from './cancel.ts';
import { ConnectAnswer, connectRequestText, type DialOptions, type Tunnel } from './dial-http.ts';
import { credentialsOf, pipelineWaitFor, socks5Ended } from './dial-socks5.ts';
import { slotIf, slotOf } from '../wire/socket-slot.ts';
import { classifySocketError, dialSocketError } from './dial-tcp.ts';
import { isDescriptorExhaustion } from '../errors/failed-accept.ts';
import { DialAbortedError, UpstreamDialError } from './errors.ts';
import { connectTls, readyEvent, tlsDialError } from './dial-tls.ts';
import type { Target } from './types.ts';

/** What a dial says once connected: a SOCKS5 client, an HTTP CONNECT answer to read, or nothing (a plain connection). */
export type HandshakeReader = Socks5Client | ConnectAnswer | null;

/** A dialing socket's dial: its slot's field (wire/socket-slot.ts), for the shared listeners below. */
function dialOf(socket: Socket): GuardedDial | undefined {
  return slotIf(socket)?.dial as GuardedDial | undefined;
}

class GuardedDial {
  private socket: Socket | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** Pipelined SOCKS5: armed between the method answer and the auth answer (the reader's stallWait). */
  private stall: NodeJS.Timeout | undefined;
  /**
   * When the handshake must be over (performance.now() clock), set once connected. The connect's timer is
   * kept for the handshake when it fires no later than that: a dial then pays one timer, not two, and a
   * timer that fires early is set again for what is left (handshakes that long are rare).
   */
  private handshakeDeadline = 0;
  private settled = false;
  /** Connecting: the connect's listeners are on the socket. */
  private connecting = false;
  /** Connected: the reader has the socket's bytes (its listeners are on the socket). */
  private reading = false;
  /** Started again step by step once (a pipelined SOCKS5 handshake the upstream did not take). */
  private restarted = false;
  /** When the current connection's connect began (its timer runs from here). */
  private started = 0;
  /** When the dial began (timed on rotor_upstream_connect_seconds, a fallback's first connection included). */
  private readonly begun = performance.now();
  /** The signal when it is a DialCancel: it is handed the socket and destroys it on abort. */
  private cancel: DialCancel | undefined;
  resolve: (tunnel: Tunnel) => void = noop;
  reject: (err: Error) => void = noop;

  constructor(
    private readonly node: UpstreamNode,
    private readonly options: DialOptions,
    private readonly kind: 'socks5' | 'http',
    private readonly reader: HandshakeReader,
  ) {}

  start(): void {
    const signal = this.options.signal;
    if (signal?.aborted) {
      this.fail(new DialAbortedError());
      return;
    }
    if (signal instanceof DialCancel) this.cancel = signal;
    // Another signal (an AbortSignal) calls this object's handleEvent.
    else signal?.addEventListener('abort', this, ONCE);
    this.open();
  }

  /** An AbortSignal's abort. */
  handleEvent(): void {
    this.fail(new DialAbortedError());
  }

  /** The optimistic handshake was not taken: a new connection (new deadlines) with the step-by-step handshake. */
  private restart(): void {
    this.restarted = true;
    (this.reader as Socks5Client).stepwise();
    clearTimeout(this.stall);
    this.stall = undefined;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.handshakeDeadline = 0;
    const old = this.socket;
    if (old) {
      this.detach(old);
      old.destroy();
    }
    this.open();
  }

  private open(): void {
    this.started = this.started === 0 ? this.begun : performance.now();
    this.timer = setTimeout(onConnectTimeout, this.options.connectTimeoutMs, this);
    this.reading = false;
    this.connecting = true;
    const tls = this.node.tls === true;
    const s = (
      tls
        ? connectTls(this.node, this.options.tls)
        : connect({ host: this.node.host, port: this.node.port, allowHalfOpen: true, noDelay: true })
    ) as Socket;
    this.socket = s;
    slotOf(s).dial = this;
    if (this.cancel !== undefined) this.cancel.socket = s;
    // A plain socket has it from its options: setNoDelay() right after connect() costs a second setsockopt.
    if (tls) s.setNoDelay(true);
    s.on('error', onConnectError);
    s.on(tls ? readyEvent(this.node) : 'connect', onConnect);
    s.on('close', onDialClose);
  }

  connected(): void {
    const s = this.socket!;
    this.connecting = false;
    s.off('error', onConnectError);
    s.off(this.node.tls === true ? readyEvent(this.node) : 'connect', onConnect);
    // Between phases (and between the dial and the relay) nobody else listens; an error then must not crash
    // the process. The owner of each phase attaches its own handler and acts on errors.
    s.on('error', noop);
    if (this.settled) return;
    const reader = this.reader;
    if (reader === null) {
      this.succeed(null, undefined);
      return;
    }
    const now = performance.now();
    const handshakeMs = this.options.handshakeTimeoutMs;
    this.handshakeDeadline = now + handshakeMs;
    // The connect timer fires at started + connectTimeoutMs: early enough for the handshake's deadline?
    if (this.timer === undefined || this.started + this.options.connectTimeoutMs > this.handshakeDeadline) {
      clearTimeout(this.timer);
      this.timer = setTimeout(onHandshakeTimeout, handshakeMs, this);
    }
    const first = reader.start();
    if (first === null) {
      this.ended(FAILED);
      return;
    }
    this.reading = true;
    s.on('data', onDialData);
    s.on('end', onDialEnd);
    s.on('error', onDialError);
    s.write(first);
  }

  /** The upstream's bytes during the handshake. */
  data(chunk: Buffer): void {
    const reader = this.reader!;
    const step = reader.feed(chunk);
    if (reader.out !== null) this.socket!.write(reader.out);
    if (step !== MORE) return this.ended(step);
    if (this.kind === 'socks5') {
      const wait = (reader as Socks5Client).stallWait();
      if (wait > 0) this.stall = setTimeout(onStall, wait, this);
    }
  }

  /** The pipelined handshake's wait for the auth answer is over. */
  stalled(): void {
    this.stall = undefined;
    if (this.settled || !this.reading) return;
    const step = (this.reader as Socks5Client).stalled();
    if (step !== MORE) this.ended(step);
  }

  /** The socket ended, closed or failed (`err`). */
  closed(err?: NodeJS.ErrnoException): void {
    if (this.settled) return;
    if (this.options.signal?.aborted) return this.fail(new DialAbortedError());
    if (this.reading) return this.ended(this.reader!.closed(err));
    // Closed while connecting with no error (destroyed): an error, when there is one, came first.
    this.fail(new UpstreamDialError('reset', `upstream ${this.node.host}:${this.node.port} closed while connecting`));
  }

  /** The reader is done or failed. */
  private ended(step: Step): void {
    if (this.settled) return;
    const reader = this.reader!;
    if (this.kind === 'http') {
      const answer = reader as ConnectAnswer;
      if (step === DONE) this.succeed(answer.head, undefined);
      else this.fail(answer.error!);
      return;
    }
    const client = reader as Socks5Client;
    const failure = socks5Ended(this.node, client);
    if (step === DONE) this.succeed(client.head, client.bound);
    else if (failure !== null) this.fail(failure);
    else if (!this.restarted) this.restart();
    else this.fail(new UpstreamDialError('handshake', 'upstream did not take the SOCKS5 handshake'));
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

  /** The dial's listeners off the socket (the 'error' no-op stays). */
  private detach(s: Socket): void {
    slotOf(s).dial = undefined;
    if (this.connecting) {
      this.connecting = false;
      s.off('error', onConnectError);
      s.off(this.node.tls === true ? readyEvent(this.node) : 'connect', onConnect);
    }
    s.off('close', onDialClose);
    if (this.reading) {
      this.reading = false;
      s.off('data', onDialData);
      s.off('end', onDialEnd);
      s.off('error', onDialError);
    }
  }

  private finish(): void {
    this.settled = true;
    clearTimeout(this.timer);
    clearTimeout(this.stall);
    const s = this.socket;
    if (s !== undefined) this.detach(s);
    const cancel = this.cancel;
    if (cancel !== undefined) {
      if (cancel.socket === s) cancel.socket = null;
    } else this.options.signal?.removeEventListener('abort', this);
  }

  private succeed(head: Buffer | null, exit: string | undefined): void {
    if (this.settled) return;
    this.finish();
    const s = this.socket!;
    if (this.reader !== null) s.pause();
    this.options.metrics?.upstreamConnectSeconds.observe({ kind: this.kind }, (performance.now() - this.begun) / 1000);
    this.resolve({ socket: s, head, exit });
  }

  private fail(err: Error): void {
    if (this.settled) return;
    this.finish();
    this.socket?.destroy();
    if (err instanceof UpstreamDialError) this.options.metrics?.upstreamFailures.inc({ reason: err.reason });
    this.reject(err);
  }
}

const ONCE = { once: true } as const;

function onConnect(this: Socket): void {
  dialOf(this)?.connected();
}
function onConnectError(this: Socket, err: NodeJS.ErrnoException): void {
  dialOf(this)?.connectFailed(err);
}
function onDialData(this: Socket, chunk: Buffer): void {
  dialOf(this)?.data(chunk);
}
function onDialEnd(this: Socket): void {
  dialOf(this)?.closed();
}
function onDialClose(this: Socket): void {
  dialOf(this)?.closed();
}
function onDialError(this: Socket, err: NodeJS.ErrnoException): void {
  dialOf(this)?.closed(err);
}
function onConnectTimeout(d: GuardedDial): void {
  d.connectTimedOut();
}
function onHandshakeTimeout(d: GuardedDial): void {
  d.handshakeTimedOut();
}
function onStall(d: GuardedDial): void {
  d.stalled();
}
function noop(): void {}

/** The dial being started (set just before its Promise's executor runs, synchronously, and read by it). */
let starting: GuardedDial | undefined;

function bindDial(resolve: (tunnel: Tunnel) => void, reject: (err: Error) => void): void {
  const dial = starting!;
  starting = undefined;
  dial.resolve = resolve;
  dial.reject = reject;
}

/**
 * Connects to `node` and runs the handshake `reader` says on the socket, each step within its deadline of
 * `options` and cancelled by its signal (DialAbortedError; the socket is destroyed). Failures are
 * UpstreamDialError, counted on rotor_upstream_failures_total; success is timed on
 * rotor_upstream_connect_seconds{kind}.
 */
export function dialThrough(node: UpstreamNode, options: DialOptions, kind: 'socks5' | 'http', reader: HandshakeReader): Promise<Tunnel> {
  const dial = new GuardedDial(node, options, kind, reader);
  starting = dial;
  const promise = new Promise<Tunnel>(bindDial);
  dial.start();
  return promise;
}

/**
 * Opens a tunnel to `target` through a SOCKS5 node (RFC 1929 credentials when the node has them): greeting,
 * auth and CONNECT in one write unless the upstream is known to drop pipelined bytes (dial-socks5.ts); one that
 * turns out to is dialed again step by step on a new connection, and remembered.
 */
export function dialSocks5(node: UpstreamNode, target: Target, options: DialOptions): Promise<Tunnel> {
  const credentials = credentialsOf(node);
  return dialThrough(node, options, 'socks5', socks5Connect(target, credentials, pipelineWaitFor(node, credentials)));
}

/** Opens a tunnel to `target` through an HTTP proxy node with CONNECT. */
export function dialHttpConnect(node: UpstreamNode, target: Target, options: DialOptions): Promise<Tunnel> {
  return dialThrough(node, options, 'http', new ConnectAnswer(connectRequestText(node, target)));
}

/**
 * A plain TCP connection to an HTTP proxy node, for forwarding absolute-URI requests to it (no tunnel): the
 * same guard as a tunnel with nothing to say after the connect, so it is timed (kind 'http') and its failures
 * counted in the one place every dial is.
 */
export function dialHttpForward(node: UpstreamNode, options: DialOptions): Promise<Tunnel> {
  return dialThrough(node, options, 'http', null);
}
