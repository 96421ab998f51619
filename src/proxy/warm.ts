// Warm upstream connections: per node a few connections opened before they are needed (TCP connected; for
// SOCKS5 also greeted and authenticated, up to the CONNECT), handed to new tunnels, which then pay only the
// request's round trip. Against an upstream 20 ms away a fresh SOCKS5 tunnel with auth costs five round trips
// direct (TCP, greeting, auth, CONNECT, the request); through a warm connection two.
//
// - Keyed by everything that authenticates: protocol, host, port, user name and password. A connection made
//   with one credential is only ever handed to a dial with that same credential (another user's, another
//   session's or a rotated one never matches).
// - Sized by demand: per node the tunnels of the last 10 s set how many are kept (1 + the most tunnels that came
//   within the time one takes to open, at least 1 + rate × that time, at most perNode); no tunnel in the window,
//   none refilled, and the set drains to zero as its connections reach idleMs.
// - Bounded: perNode per node, maxPerPool per pool (src/pool/node-owner.ts), MAX_TOTAL in all.
// - Recycled by idleMs (before typical upstream idle timeouts; one sweep timer for all of them, ticking every
//   min(1 s, idleMs / 4) while any is ready, retires each between idleMs less a tick and idleMs: never later,
//   and no timer per connection); an upstream that closes one while it idles
//   takes it out at once ('end'/'close'/'error', or any byte it sends); a handed-out one that turns out dead
//   (closed in the same instant) falls back to a fresh dial, so the tunnel still succeeds.
// - Deadlines (an opening's connect + handshake, a tunnel request's answer) are checked by that same sweep,
//   not a timer each: they almost never fire, and a timer per tunnel is a Timeout and its list operations.
//   One fires at its deadline or at most one tick (min(1 s, a quarter of the handshake deadline)) after it.
// - A tunnel that finds nothing ready while an opening of its set is under way (a burst took them all) takes
//   the first one that opens instead of dialing on its path (WarmWaiter); each opening is claimed by one tunnel
//   at most. It waits a few opening times at most (an opening may be stalled), then dials fresh with a fresh
//   dial's whole budget, as it does when the opening fails: a stalled opening never costs a tunnel its dial.
// - Refills run off the tunnel's path, never awaited by a dial: in the dial's turn, but after the tunnel's own
//   request was written (or its fresh dial started), so no immediate per tunnel.
import { connect, type Socket } from 'node:net';
import { LiveList, type Listed } from '../connlog/live-list.ts';
import { nodeOwner } from '../pool/node-owner.ts';
import type { UpstreamNode } from '../pool/types.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { metricCell, type MetricCell } from './metric-cells.ts';
import { DONE, FAILED, MORE, socks5Greet, socks5Request, type Socks5Client, type Step } from '../wire/socks5-client.ts';
import { slotIf, slotOf } from '../wire/socket-slot.ts';
import { DialCancel } from './cancel.ts';
import { ConnectAnswer, connectRequestText, type DialOptions, type Tunnel } from './dial-http.ts';
import { classifySocksError, credentialsOf, learnSocks5Pipelining, pipelineWaitFor } from './dial-socks5.ts';
import { DialAbortedError, UpstreamDialError } from './errors.ts';
import { dialHttpConnect, dialSocks5 } from './upstream-dial.ts';
import type { Target } from './types.ts';

export interface WarmSettings {
  /** Ready connections kept per node at most (0: off). */
  perNode: number;
  /** Per pool at most, over its nodes. */
  maxPerPool: number;
  /** A ready connection unused this long is closed (and replaced while demand lasts). */
  idleMs: number;
}

export interface WarmOptions extends WarmSettings {
  connectTimeoutMs: number;
  handshakeTimeoutMs: number;
  metrics?: Metrics;
  /**
   * Products whose pools' nodes get no warm connections (pool.warm.off; nodes no pool drew, e.g. static
   * instances, always may); a pool whose tuning says warm: false (products sold by IP count) never does.
   * A set read per dial, not a function of the daemon called.
   */
  offProducts?: ReadonlySet<string>;
  /** How far back new tunnels count as demand. Default 10 s. */
  windowMs?: number;
}

type Dialer = (node: UpstreamNode, target: Target, options: DialOptions) => Promise<Tunnel>;

/**
 * A warm dialer: with `options.answer` (the race's attempt), a request on a ready connection answers through it
 * and returns null (no promise per tunnel); without, or on a fresh dial, the promise.
 */
export interface WarmDialer {
  (node: UpstreamNode, target: Target, options: DialOptions & { answer?: undefined }): Promise<Tunnel>;
  (node: UpstreamNode, target: Target, options: DialOptions): Promise<Tunnel> | null;
}

/** All warm connections of a process at most, whatever the settings. */
const MAX_TOTAL = 4096;
/** Node sets tracked at most (each holds at most perNode sockets and a few numbers). */
const MAX_SETS = 4096;
const RECENT = 64;

interface Ready {
  socket: Socket;
  set: NodeSet;
  /** when it became ready (performance.now) */
  since: number;
}

interface NodeSet {
  key: string;
  node: UpstreamNode;
  pool: string;
  ready: Ready[];
  opening: number;
  /** Tunnels waiting for one of the openings (oldest first): each has claimed one, so at most `opening` of them. */
  waiting: WarmWaiter[];
  /** dial times (performance.now), a ring */
  recent: number[];
  at: number;
  /** how long opening one takes, smoothed (ms) */
  openMs: number;
}

// A warm connection's stage (its opening, readiness and owner, its tunnel's request) is in its socket's slot
// (wire/socket-slot.ts: warmOpening, warmReady, warmOwner, warmRequest), not in properties of the socket.
type WarmSocket = Socket;

function noop(): void {}

/** Each node's set key, built once per node object (not a joined string per tunnel); weak: nodes come and go. */
const keys = new WeakMap<UpstreamNode, string>();

function setKey(node: UpstreamNode): string {
  let key = keys.get(node);
  if (key === undefined) {
    key = `${node.protocol}\u0000${node.host}\u0000${node.port}\u0000${node.username ?? ''}\u0000${node.password ?? ''}`;
    keys.set(node, key);
  }
  return key;
}

export class WarmConnections {
  private readonly sets = new Map<string, NodeSet>();
  private readonly perPool = new Map<string, number>();
  private total = 0;
  private readyCount = 0;
  private closed = false;
  readonly socks5: WarmDialer;
  readonly http: WarmDialer;
  /** rotor_upstream_warm_total's outcomes and the ready gauge as cells (no label hashing per tunnel). */
  private readonly counts: Record<'used' | 'failed' | 'expired', MetricCell> | undefined;
  private readonly readyGauge: MetricCell | undefined;
  /** Retires ready connections by idleMs; runs while any is ready. */
  private sweeper: NodeJS.Timeout | undefined;
  private readonly sweepMs: number;
  /** Openings and tunnel requests under way, their deadlines checked by the sweep (a live list, not a Set: src/connlog/live-list.ts says why). */
  private readonly pending = new LiveList<Pending>();

  constructor(private readonly o: WarmOptions) {
    this.sweepMs = Math.max(5, Math.min(1000, Math.floor(o.idleMs / 4), Math.floor(o.handshakeTimeoutMs / 4)));
    this.socks5 = ((node: UpstreamNode, target: Target, options: DialOptions) =>
      this.dial(node, target, options, dialSocks5)) as WarmDialer;
    this.http = ((node: UpstreamNode, target: Target, options: DialOptions) =>
      this.dial(node, target, options, dialHttpConnect)) as WarmDialer;
    const m = o.metrics;
    if (m) {
      this.counts = {
        used: metricCell(m.upstreamWarmTotal, { outcome: 'used' }),
        failed: metricCell(m.upstreamWarmTotal, { outcome: 'failed' }),
        expired: metricCell(m.upstreamWarmTotal, { outcome: 'expired' }),
      };
      this.readyGauge = metricCell(m.upstreamWarmConnections, {});
    }
  }

  /** Ready connections now (the gauge's value). */
  get size(): number {
    return this.readyCount;
  }

  close(): void {
    this.closed = true;
    for (const set of this.sets.values()) {
      for (const r of set.ready.splice(0)) this.discard(r, undefined);
      for (const w of set.waiting.splice(0)) w.dialFresh();
    }
    this.sets.clear();
    // Openings and requests under way still meet their deadlines: the sweep stops once they are done.
    this.stopSweepIfIdle();
  }

  /** An opening or a tunnel request under way: its deadline is checked from the next tick of the sweep. */
  watch(d: Pending): void {
    this.pending.add(d);
    this.startSweep();
  }

  unwatch(d: Pending): void {
    this.pending.remove(d);
  }

  private startSweep(): void {
    if (this.sweeper !== undefined) return;
    this.sweeper = setInterval(sweepNow, this.sweepMs, this);
    this.sweeper.unref();
  }

  private stopSweepIfIdle(): void {
    if (this.readyCount !== 0 || this.pending.size !== 0 || this.sweeper === undefined) return;
    clearInterval(this.sweeper);
    this.sweeper = undefined;
  }

  private dial(node: UpstreamNode, target: Target, options: DialOptions, fresh: Dialer): Promise<Tunnel> | null {
    const set = this.setFor(node);
    if (!set) return fresh(node, target, options);
    const now = performance.now();
    set.recent[set.at] = now;
    set.at = set.at === RECENT - 1 ? 0 : set.at + 1;
    const ready = this.take(set);
    let tunnel: Promise<Tunnel> | null;
    if (ready) tunnel = this.request(ready, node, target, options, fresh, now);
    // Nothing ready but an opening under way that no other tunnel has claimed: it is ahead of a fresh dial (for
    // HTTP its TCP connect, for SOCKS5 also the greeting and auth are partly done), and a fresh dial while it
    // completes unused costs a connection, its timers and its promise. The tunnel takes the first that opens.
    else if (set.opening > set.waiting.length) tunnel = this.wait(set, node, target, options, fresh, now);
    else tunnel = fresh(node, target, options);
    // The same turn's clock reading for the refill and the request's deadline: one performance.now per dial, not three.
    this.refill(set, now);
    return tunnel;
  }

  private setFor(node: UpstreamNode): NodeSet | undefined {
    // TLS upstreams (dial-tls.ts) are dialed fresh: their handshake carries the dial's own verification.
    if (this.closed || this.o.perNode <= 0 || node.tls) return undefined;
    const key = setKey(node);
    let set = this.sets.get(key);
    if (set) {
      // A redraw brings a new object for the same credentials: open the next ones with the newest.
      set.node = node;
      return set;
    }
    const owner = nodeOwner(node);
    if (owner?.warm === false || (owner !== undefined && this.o.offProducts?.has(owner.key.productNo) === true)) return undefined;
    if (this.sets.size >= MAX_SETS) this.sweepSets();
    if (this.sets.size >= MAX_SETS) return undefined;
    const pool = owner ? `${owner.key.user}/${owner.key.productNo}/${owner.key.region}` : `node:${node.host}:${node.port}`;
    set = { key, node, pool, ready: [], opening: 0, waiting: [], recent: [], at: 0, openMs: 0 };
    this.sets.set(key, set);
    return set;
  }

  /** Sets with nothing ready, nothing opening and no dial in the window are forgotten. */
  private sweepSets(): void {
    const now = performance.now();
    for (const [key, set] of this.sets)
      if (set.ready.length === 0 && set.opening === 0 && this.demand(set, now) === 0) this.sets.delete(key);
  }

  /** The newest ready connection still open (the likeliest alive), taken out of the set. */
  private take(set: NodeSet): Ready | undefined {
    for (;;) {
      const r = set.ready.pop();
      if (!r) return undefined;
      this.unready(r);
      const s = r.socket;
      if (!s.destroyed && !s.readableEnded && s.writable) return r;
      this.counts?.expired.inc();
      this.release(set);
      s.destroy();
    }
  }

  /**
   * Wanted ready connections for this set now: 0 without recent dials, else 1 + the most dials that came within
   * one opening time, and at least 1 + rate × opening time. Each take is replaced only an opening time later, so
   * the set runs dry whenever more tunnels than it holds arrive within that time: under M2 they come in bursts
   * (a loop turn accepts many clients at once), up to about three times the mean rate, and a set sized by the
   * mean alone had two thirds of SOCKS5 tunnels dial on their path.
   */
  private demand(set: NodeSet, now: number): number {
    const window = this.o.windowMs ?? 10_000;
    const recent = set.recent;
    const n = recent.length;
    const openMs = Math.max(1, set.openMs);
    // The ring is in time order from its oldest entry (index 0 until it is full, then `at`), so the dials in the
    // window are its newest: the older ones are skipped first. Its indices wrap by a compare: this runs on every
    // dial, and a `%` per read (two per entry) made it the daemon's costliest function per tunnel (7.6 k of its
    // own 25 k instructions per SOCKS5 tunnel, docs/benchmarks.md).
    let p = n < RECENT ? 0 : set.at;
    let dials = n;
    while (dials > 0 && now - recent[p]! >= window) {
      dials--;
      if (++p === n) p = 0;
    }
    if (dials === 0) return 0;
    // The ring keeps the last RECENT dials: when all of them are in the window the rate is theirs over the time
    // they span (counted over the window it could never pass RECENT per window, 6.4 a second, and at hundreds
    // of tunnels a second the set kept two connections and most tunnels dialed on their path).
    const oldest = recent[p]!;
    const perMs = dials === RECENT ? dials / Math.max(1, now - oldest) : dials / window;
    const atRate = Math.ceil(perMs * openMs);
    const most = this.o.perNode;
    if (1 + atRate >= most) return most;
    // One pass over the dials in the window, a second index trailing: the most of them within any span of openMs.
    let peak = 0;
    let tail = 0;
    let tailAt = oldest;
    let t = p;
    for (let k = 0; k < dials; k++) {
      const at = recent[p]!;
      while (at - tailAt >= openMs) {
        tail++;
        if (++t === n) t = 0;
        tailAt = recent[t]!;
      }
      if (k - tail + 1 > peak) peak = k - tail + 1;
      if (++p === n) p = 0;
    }
    return Math.min(most, 1 + Math.max(peak, atRate));
  }

  refill(set: NodeSet, now = performance.now()): void {
    if (this.closed || this.sets.get(set.key) !== set) return;
    const want = this.demand(set, now);
    // Openings a waiting tunnel claimed will not be ready for the next ones.
    while (set.ready.length + set.opening - set.waiting.length < want) {
      const inPool = this.perPool.get(set.pool) ?? 0;
      if (inPool >= this.o.maxPerPool || this.total >= MAX_TOTAL) return;
      this.open(set);
    }
  }

  private open(set: NodeSet): void {
    set.opening++;
    this.total++;
    this.perPool.set(set.pool, (this.perPool.get(set.pool) ?? 0) + 1);
    new WarmOpening(this, set, this.o.connectTimeoutMs + this.o.handshakeTimeoutMs);
  }

  /** A connection being opened is ready (ok) or failed (WarmOpening). */
  opened(set: NodeSet, socket: WarmSocket, ok: boolean, took: number): void {
    set.opening--;
    if (!ok) {
      socket.destroy();
      this.release(set);
      this.counts?.failed.inc();
      // Fewer openings left than tunnels waiting: the one that waited longest dials afresh (and learns why).
      if (set.waiting.length > set.opening) set.waiting.shift()!.dialFresh();
      return;
    }
    set.openMs = set.openMs === 0 ? took : set.openMs * 0.8 + took * 0.2;
    const waiter = set.waiting.shift();
    if (waiter === undefined) return this.ready(set, socket);
    // Straight to the tunnel that waited longest: never ready, so never idle (nothing to retire or to miss).
    this.release(set);
    waiter.take(socket);
  }

  /**
   * How long a tunnel waits for an opening before it dials fresh: a few of the set's opening times (an opening
   * that takes longer is likely stalled), at least WAIT_FLOOR_MS, WAIT_UNKNOWN_MS before any opening finished,
   * never beyond a fresh dial's own budget. The sweep checks it, so it may fire up to a tick later.
   */
  private patience(set: NodeSet, options: DialOptions): number {
    const budget = options.connectTimeoutMs + options.handshakeTimeoutMs;
    const wait = set.openMs > 0 ? Math.max(WAIT_FLOOR_MS, WAIT_OPENINGS * set.openMs) : WAIT_UNKNOWN_MS;
    return Math.min(budget, wait);
  }

  /** A waiting tunnel left (its dial was cancelled, or its deadline passed) before an opening was its. */
  unwait(set: NodeSet, waiter: WarmWaiter): void {
    const i = set.waiting.indexOf(waiter);
    if (i >= 0) set.waiting.splice(i, 1);
  }

  get isClosed(): boolean {
    return this.closed;
  }

  private ready(set: NodeSet, socket: WarmSocket): void {
    if (this.closed || this.sets.get(set.key) !== set) {
      socket.destroy();
      this.release(set);
      return;
    }
    const r: Ready = { socket, set, since: performance.now() };
    this.startSweep();
    // Idle: any sign from the upstream (it closed, failed, or said something unasked) takes it out (onWarm*).
    const slot = slotOf(socket);
    slot.warmReady = r;
    slot.warmOwner = this;
    set.ready.push(r);
    this.readyCount++;
    this.readyGauge?.inc();
  }

  /** A ready connection leaves the ready list (taken, or gone). */
  private unready(r: Ready): void {
    slotOf(r.socket).warmReady = undefined;
    this.readyCount--;
    this.readyGauge?.dec();
  }

  /**
   * The sweep: ready connections that would pass idleMs before the next tick are retired (each set's list is
   * oldest first) and replaced while demand lasts; with none ready any more the timer stops.
   */
  sweep(): void {
    const now = performance.now();
    // The list's walk tolerates the removal timedOut() makes of the one it stands on (settle/finish unwatch).
    if (this.pending.size !== 0) for (const d of this.pending) if (d.deadline <= now) d.timedOut();
    const retireAt = now - this.o.idleMs + this.sweepMs;
    for (const set of this.sets.values()) {
      let n = 0;
      while (n < set.ready.length && set.ready[n]!.since <= retireAt) n++;
      if (n === 0) continue;
      for (const r of set.ready.splice(0, n)) this.discard(r, 'expired');
      this.refill(set);
    }
    this.stopSweepIfIdle();
  }

  /** Called for a ready connection the upstream closed. */
  idleEnd(r: Ready): void {
    const set = r.set;
    const i = set.ready.indexOf(r);
    if (i < 0) return;
    set.ready.splice(i, 1);
    this.discard(r, 'expired');
    // Recycled while demand lasts; with no recent tunnel the set drains to zero.
    this.refill(set);
  }

  private discard(r: Ready, outcome: 'expired' | undefined): void {
    this.unready(r);
    r.socket.destroy();
    this.release(r.set);
    if (outcome) this.counts?.[outcome].inc();
  }

  /** One connection of the set is gone (used, failed or closed): it stops counting against the bounds. */
  private release(set: NodeSet): void {
    this.total--;
    const n = (this.perPool.get(set.pool) ?? 1) - 1;
    if (n <= 0) this.perPool.delete(set.pool);
    else this.perPool.set(set.pool, n);
  }

  /** The dial waits for the set's next opening (WarmWaiter): null with the dial's answer, else a promise. */
  private wait(set: NodeSet, node: UpstreamNode, target: Target, options: DialOptions, fresh: Dialer, now: number): Promise<Tunnel> | null {
    const waiter = new WarmWaiter(this, set, node, target, options, fresh, this.patience(set, options));
    set.waiting.push(waiter);
    if (options.answer !== undefined) {
      waiter.start(now);
      return null;
    }
    startingWaiter = waiter;
    const promise = new Promise<Tunnel>(bindWaiter);
    waiter.start(now);
    return promise;
  }

  /**
   * The rest of a tunnel's handshake on a ready connection, under the handshake deadline and the dial's signal;
   * counted used or failed here. Its end is told to the dial's answer (the race's attempt: no promise) or, for
   * a caller without one, by a promise. A connection that died unseen (closed as it was handed out) still gets
   * the tunnel a fresh dial.
   */
  private request(r: Ready, node: UpstreamNode, target: Target, options: DialOptions, fresh: Dialer, now: number): Promise<Tunnel> | null {
    this.release(r.set);
    const request = new WarmRequest(this, r.socket as WarmSocket, node, target, options, fresh);
    if (options.answer !== undefined) {
      request.start(now);
      return null;
    }
    starting = request;
    const promise = new Promise<Tunnel>(bindRequest);
    request.start(now);
    return promise;
  }

  /** A warm tunnel request's outcome, counted (WarmRequest). */
  counted(used: boolean, err?: UpstreamDialError): void {
    if (used) this.counts?.used.inc();
    else this.counts?.failed.inc();
    // Counted as a fresh dial's failure is (upstream-dial.ts): a refused target is the same failure either way.
    if (err !== undefined) this.o.metrics?.upstreamFailures.inc({ reason: err.reason });
  }
}

/** What the warm sweep watches for its deadline. */
type Pending = WarmOpening | WarmRequest | WarmWaiter;

/**
 * One connection being opened for a set: TCP, then for SOCKS5 the greeting and auth (a sans-I/O client this
 * object feeds). One object per connection; its listeners are module-level (they find it on the socket), its stall
 * timer takes it as argument and its deadline is the warm sweep's.
 */
class WarmOpening implements Listed<Pending> {
  readonly socket: WarmSocket;
  /** neighbours in WarmConnections.pending */
  prevLive: Pending | null = null;
  nextLive: Pending | null = null;
  private readonly node: UpstreamNode;
  private readonly started = performance.now();
  /** connect + handshake deadline (performance.now), checked by the warm sweep */
  readonly deadline: number;
  private greeting: Socks5Client | undefined;
  private stall: NodeJS.Timeout | undefined;
  private settled = false;
  private connecting = true;

  constructor(
    private readonly warm: WarmConnections,
    private readonly set: NodeSet,
    timeoutMs: number,
  ) {
    const node = (this.node = set.node);
    // noDelay as an option: setNoDelay() right after connect() costs a second setsockopt once connected.
    const socket = connect({ host: node.host, port: node.port, allowHalfOpen: true, noDelay: true }) as WarmSocket;
    this.socket = socket;
    slotOf(socket).warmOpening = this;
    this.deadline = this.started + timeoutMs;
    warm.watch(this);
    // One set of listeners for the connection's whole warm life (opening, ready, its tunnel's request): each
    // finds the stage on the socket. The request's end takes data, end and close off; 'error' stays (ignored).
    socket.on('data', onWarmData);
    socket.on('end', onWarmClosed);
    socket.on('close', onWarmClosed);
    socket.on('error', onWarmFailed);
    socket.on('connect', onOpeningConnected);
  }

  timedOut(): void {
    this.settle(false);
  }

  connected(): void {
    const socket = this.socket;
    this.connecting = false;
    socket.off('connect', onOpeningConnected);
    if (this.warm.isClosed || this.settled) return this.settle(false);
    const node = this.node;
    if (node.protocol !== 'socks5') return this.settle(true);
    const credentials = credentialsOf(node);
    // Greeting and auth in one write unless the upstream is known to drop pipelined bytes (dial-socks5.ts);
    // one found to drop them now costs this connection (off any tunnel's path), and the next goes step by step.
    const greeting = (this.greeting = socks5Greet(credentials, pipelineWaitFor(node, credentials)));
    const first = greeting.start();
    if (first === null) return this.settle(false);
    socket.write(first);
  }

  data(chunk: Buffer): void {
    const greeting = this.greeting;
    if (greeting === undefined || this.settled) return;
    const step = greeting.feed(chunk);
    if (greeting.out !== null) this.socket.write(greeting.out);
    if (step !== MORE) return this.greeted(step);
    const wait = greeting.stallWait();
    if (wait > 0) this.stall = setTimeout(onOpeningStall, wait, this);
  }

  stalled(): void {
    this.stall = undefined;
    const greeting = this.greeting;
    if (greeting === undefined || this.settled) return;
    const step = greeting.stalled();
    if (step !== MORE) this.greeted(step);
  }

  /** The upstream closed or failed: during the greeting, what it shows of its pipelining counts. */
  closed(err?: NodeJS.ErrnoException): void {
    const greeting = this.greeting;
    if (greeting === undefined || this.settled) return this.settle(false);
    this.greeted(greeting.closed(err));
  }

  private greeted(step: Step): void {
    const greeting = this.greeting!;
    if (greeting.pipelined) {
      if (step === DONE) learnSocks5Pipelining(this.node, true);
      else if (greeting.error?.code === 'NOT_PIPELINED') learnSocks5Pipelining(this.node, false);
    }
    this.settle(step === DONE);
  }

  settle(ok: boolean): void {
    if (this.settled) return;
    this.settled = true;
    this.warm.unwatch(this);
    clearTimeout(this.stall);
    const socket = this.socket;
    slotOf(socket).warmOpening = undefined;
    if (this.connecting) socket.off('connect', onOpeningConnected);
    this.warm.opened(this.set, socket, ok, performance.now() - this.started);
  }
}

/** A warm connection's bytes: its request's answer, a sign while it idles, or its greeting's answer. */
function onWarmData(this: WarmSocket, chunk: Buffer): void {
  const slot = slotIf(this);
  if (slot === undefined) return;
  const request = slot.warmRequest as WarmRequest | undefined;
  if (request !== undefined) return request.data(chunk);
  const r = slot.warmReady as Ready | undefined;
  if (r !== undefined) return (slot.warmOwner as WarmConnections | undefined)?.idleEnd(r);
  (slot.warmOpening as WarmOpening | undefined)?.data(chunk);
}

/** A warm connection closed or failed: its request fails (or falls back to a fresh dial), an idle one leaves, an opening fails. */
function onWarmClosed(this: WarmSocket, err?: NodeJS.ErrnoException | boolean): void {
  const e = typeof err === 'object' ? err : undefined;
  const slot = slotIf(this);
  if (slot === undefined) return;
  const request = slot.warmRequest as WarmRequest | undefined;
  if (request !== undefined) return request.closed(e);
  const r = slot.warmReady as Ready | undefined;
  if (r !== undefined) return (slot.warmOwner as WarmConnections | undefined)?.idleEnd(r);
  (slot.warmOpening as WarmOpening | undefined)?.closed(e);
}

function onWarmFailed(this: WarmSocket, err: NodeJS.ErrnoException): void {
  onWarmClosed.call(this, err);
}

function onOpeningConnected(this: WarmSocket): void {
  (slotIf(this)?.warmOpening as WarmOpening | undefined)?.connected();
}

function onOpeningStall(opening: WarmOpening): void {
  opening.stalled();
}

/** The request being made (set just before its Promise's executor runs, synchronously, and read by it). */
let starting: WarmRequest | undefined;

function bindRequest(resolve: (tunnel: Tunnel) => void, reject: (err: unknown) => void): void {
  const request = starting!;
  starting = undefined;
  request.resolve = resolve;
  request.reject = reject;
}

/**
 * A tunnel's request on a ready connection: one object per tunnel with its answer's sans-I/O reader (SOCKS5's
 * client or the CONNECT answer), fed by module-level listeners that find it on the socket; its deadline is the warm sweep's.
 * A DialCancel is handed the socket (abort() destroys it; the close is seen here), another signal calls handleEvent.
 */
class WarmRequest implements Listed<Pending> {
  /** neighbours in WarmConnections.pending */
  prevLive: Pending | null = null;
  nextLive: Pending | null = null;
  resolve: (tunnel: Tunnel) => void = noop;
  reject: (err: unknown) => void = noop;
  private done = false;
  /** the answer's deadline (performance.now), checked by the warm sweep */
  deadline = 0;
  private reader: Socks5Client | ConnectAnswer | undefined;
  private cancel: DialCancel | undefined;

  constructor(
    private readonly warm: WarmConnections,
    private readonly socket: WarmSocket,
    private readonly node: UpstreamNode,
    private readonly target: Target,
    private readonly options: DialOptions,
    private readonly fresh: Dialer,
  ) {}

  start(now: number): void {
    const { options, socket, node } = this;
    this.deadline = now + options.handshakeTimeoutMs;
    this.warm.watch(this);
    const signal = options.signal;
    if (signal?.aborted) return this.handleEvent();
    if (signal instanceof DialCancel) {
      this.cancel = signal;
      signal.socket = socket;
    } else signal?.addEventListener('abort', this, ONCE);
    const reader = (this.reader =
      node.protocol === 'socks5' ? socks5Request(this.target) : new ConnectAnswer(connectRequestText(node, this.target)));
    const first = reader.start();
    if (first === null) return this.answered(FAILED);
    // The connection's listeners (onWarm*) find it here.
    slotOf(socket).warmRequest = this;
    socket.write(first);
  }

  /** The dial's signal (not a DialCancel): the client left. */
  handleEvent(): void {
    this.finish(new DialAbortedError(), null);
  }

  data(chunk: Buffer): void {
    const reader = this.reader!;
    const step = reader.feed(chunk);
    if (reader.out !== null) this.socket.write(reader.out);
    if (step !== MORE) this.answered(step);
  }

  /** The socket closed or failed before the answer: a cancel's abort destroyed it, or the upstream. */
  closed(err?: NodeJS.ErrnoException): void {
    if (this.done) return;
    if (this.options.signal?.aborted) return this.finish(new DialAbortedError(), null);
    this.answered(this.reader!.closed(err));
  }

  private answered(step: Step): void {
    const reader = this.reader!;
    if (step === DONE) {
      this.finish(null, reader.head, reader instanceof ConnectAnswer ? undefined : reader.bound);
      return;
    }
    const err = reader.error!;
    this.finish(err instanceof UpstreamDialError ? err : classifySocksError(err), null);
  }

  timedOut(): void {
    this.finish(
      new UpstreamDialError('connect_timeout', `upstream did not answer the tunnel request within ${this.options.handshakeTimeoutMs} ms`),
      null,
    );
  }

  private finish(err: UpstreamDialError | DialAbortedError | null, head: Buffer | null, exit?: string): void {
    if (this.done) return;
    this.done = true;
    this.warm.unwatch(this);
    const { options, socket } = this;
    const slot = slotOf(socket);
    if (slot.warmRequest === this) slot.warmRequest = undefined;
    const cancel = this.cancel;
    if (cancel !== undefined) {
      if (cancel.socket === socket) cancel.socket = null;
    } else options.signal?.removeEventListener('abort', this);
    const answer = options.answer;
    if (err === null) {
      // The tunnel's relay reads it from here; the 'error' listener stays (it finds nothing to tell: a guard).
      socket.off('data', onWarmData);
      socket.off('end', onWarmClosed);
      socket.off('close', onWarmClosed);
      // Left flowing only for a taker that attaches its reader in this same turn (no read can come before it).
      if (answer?.takesFlowing !== true) socket.pause();
      this.warm.counted(true);
      const tunnel: Tunnel = { socket, head, exit };
      if (answer !== undefined) answer.answered(tunnel);
      else this.resolve(tunnel);
      return;
    }
    socket.destroy();
    if (err instanceof UpstreamDialError) {
      if (err.reason === 'reset' && !options.signal?.aborted) {
        this.warm.counted(false);
        const fresh = this.fresh(this.node, this.target, options);
        if (answer !== undefined)
          fresh.then(
            (tunnel) => answer.answered(tunnel),
            (e: unknown) => answer.failed(e),
          );
        else fresh.then(this.resolve, this.reject);
        return;
      }
      this.warm.counted(false, err);
    } else this.warm.counted(false);
    if (answer !== undefined) answer.failed(err);
    else this.reject(err);
  }
}

const ONCE = { once: true } as const;

/** The waiter being made (set just before its Promise's executor runs, synchronously, and read by it). */
let startingWaiter: WarmWaiter | undefined;

function bindWaiter(resolve: (tunnel: Tunnel) => void, reject: (err: unknown) => void): void {
  const waiter = startingWaiter!;
  startingWaiter = undefined;
  waiter.resolve = resolve;
  waiter.reject = reject;
}

/** A tunnel waits for an opening this many of the set's opening times (WarmConnections.patience)... */
const WAIT_OPENINGS = 4;
/** ...and at least this long (ms): loopback openings take well under a millisecond. */
const WAIT_FLOOR_MS = 100;
/** How long it waits before any opening of the set has finished (ms). */
const WAIT_UNKNOWN_MS = 1000;

/**
 * A tunnel that found nothing ready while an opening of its node was under way: it takes the first opening to
 * finish (WarmConnections.opened) and makes its request on it, as on a ready one. An opening that fails, or none
 * finishing within its patience (checked by the sweep), leaves it to a fresh dial with a fresh dial's whole
 * budget; a cancel of its dial (the race lost, the client left) takes it out of the queue.
 */
class WarmWaiter implements Listed<Pending> {
  /** neighbours in WarmConnections.pending */
  prevLive: Pending | null = null;
  nextLive: Pending | null = null;
  resolve: (tunnel: Tunnel) => void = noop;
  reject: (err: unknown) => void = noop;
  /** when it stops waiting and dials fresh (performance.now), checked by the warm sweep */
  deadline = 0;
  private done = false;

  constructor(
    private readonly warm: WarmConnections,
    private readonly set: NodeSet,
    private readonly node: UpstreamNode,
    private readonly target: Target,
    private readonly options: DialOptions,
    private readonly fresh: Dialer,
    private readonly patienceMs: number,
  ) {}

  start(now: number): void {
    const options = this.options;
    this.deadline = now + this.patienceMs;
    this.warm.watch(this);
    const signal = options.signal;
    if (signal?.aborted) return this.handleEvent();
    // A DialCancel keeps its first listener in a field: no array for it.
    signal?.addEventListener('abort', this, ONCE);
  }

  /** No longer waiting: off the sweep's list and the signal (the set's queue is its caller's to leave). */
  private leave(): boolean {
    if (this.done) return false;
    this.done = true;
    this.warm.unwatch(this);
    this.options.signal?.removeEventListener('abort', this);
    return true;
  }

  /** An opening finished for it (already out of the set's queue): its request on that connection. */
  take(socket: WarmSocket): void {
    if (!this.leave()) {
      socket.destroy();
      return;
    }
    const request = new WarmRequest(this.warm, socket, this.node, this.target, this.options, this.fresh);
    request.resolve = this.resolve;
    request.reject = this.reject;
    request.start(performance.now());
  }

  /**
   * The opening it counted on failed, the set closed (already out of the queue), or its patience ran out: a
   * fresh dial with the whole budget, as if it had not waited (the wait was Rotor's bet, not the client's).
   */
  dialFresh(): void {
    if (!this.leave()) return;
    const o = this.options;
    const answer = o.answer;
    const fresh = this.fresh(this.node, this.target, o);
    if (answer !== undefined)
      fresh.then(
        (tunnel) => answer.answered(tunnel),
        (e: unknown) => answer.failed(e),
      );
    else fresh.then(this.resolve, this.reject);
  }

  /** The dial's signal: cancelled while waiting. */
  handleEvent(): void {
    this.end(new DialAbortedError());
  }

  /** Its patience ran out with no opening finished for it (one may be stalled): out of the queue, a fresh dial. */
  timedOut(): void {
    if (this.done) return;
    this.warm.unwait(this.set, this);
    this.dialFresh();
  }

  private end(err: Error): void {
    if (!this.leave()) return;
    this.warm.unwait(this.set, this);
    const answer = this.options.answer;
    if (answer !== undefined) answer.failed(err);
    else this.reject(err);
  }
}

function sweepNow(warm: WarmConnections): void {
  warm.sweep();
}
