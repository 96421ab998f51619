// Moves bytes both ways between a client and its upstream tunnel. Per chunk the data path does a write, the
// metered stream's count (tunnel-stream.ts: two number adds, the user's meter, a flag check) and its valve for
// that direction (backpressure and the user's rate: a take() and flag checks). The listeners are
// module functions shared by every relay (a socket finds its relay in its slot, wire/socket-slot.ts), so a tunnel costs one
// Relay object and no closures. The user's meter decides when to stop: once `exhausted` is set (by this or
// another connection of the user) both sides are destroyed on the next chunk. Idle detection and the
// rotor_proxy_bytes_total updates run on one coarse timer shared by all relays with the same tick (not a
// timer per connection: an idle tunnel should cost its sockets and little else), so neither happens per chunk.
// A side whose read fills node's whole 64 KiB buffer is carrying bulk data: it is switched to a read buffer of
// its own (paced-reads.ts bulkReads), so bulk traffic stops making malloc and the kernel hand out fresh pages,
// and reads up to 256 KiB at a time while the other side takes each chunk at once.
// Not for a user whose connections can be cut (UserMeter.bounded): the chunk that crosses the limit is dropped,
// and a cut must stay within node's 64 KiB read.
import type { Socket } from 'node:net';
import { LiveList, type Listed } from '../connlog/live-list.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { slotIf, slotOf } from '../wire/socket-slot.ts';
import { heldData, heldGone, takeHandedListeners, type HoldListeners } from './hold.ts';
import { NODE_READ, bulkReads } from './paced-reads.ts';
import { MeteredStream, type Valve } from './tunnel-stream.ts';
import { BULK_UNSENT, unsentBulk } from './unsent-limit.ts';
import type { RelayLimiter, UserMeter } from './types.ts';

export type RelayEnd = 'closed' | 'idle' | 'limit' | 'error' | 'stopped';

export interface RelayStats {
  /** client → upstream */
  up: number;
  /** upstream → client */
  down: number;
  end: RelayEnd;
}

export interface RelayOptions {
  meter: UserMeter;
  /** No byte either way for this long closes both sides. */
  idleTimeoutMs: number;
  /** Client bytes already read (sent behind a CONNECT or SOCKS5 request): go upstream first. */
  clientHead?: Buffer | null;
  /** Upstream bytes already read (behind the upstream's tunnel answer): go to the client first. */
  upstreamHead?: Buffer | null;
  /** rotor_proxy_bytes_total{user,direction}, updated on the timer and at the end. */
  bytes?: { metrics: Metrics; user: string };
  /**
   * The user's rate and relay registry (src/admission/limiter.ts): over the rate, the side just read is paused
   * until the limiter wakes it (the chunk read is forwarded), and the upstream is read in paced pieces
   * (paced-reads.ts). Absent: no rate.
   */
  limiter?: RelayLimiter;
  /** How often the byte counter is updated. Default 5000 ms. */
  flushIntervalMs?: number;
  /** Told once when the relay ends (tunnel-record.ts TunnelEnd: an object handed down, not a callback up). */
  end?: RelayEndHandler;
}

/** What a relay's end is reported to. */
export interface RelayEndHandler {
  relayEnded(stats: RelayStats): void;
}

export interface RelayHandle {
  readonly stats: RelayStats;
  /** Ends the relay now (shutdown): both sides destroyed. */
  stop(): void;
}

/** A relay's counters: its metered stream, and how it ended. */
class Stats extends MeteredStream implements RelayStats {
  end: RelayEnd = 'closed';
}

/**
 * Client bytes a rate-limited relay forwards while its user's bucket is in debt before it stops reading the
 * client (they are still taken from the bucket). A download's client sends little (a request, window
 * updates), so its side keeps being read and its leaving (a FIN) is seen at once, not when the bucket has
 * paid back the debt of every relay of the user.
 */
const CLIENT_CREDIT = 16 * 1024;
/**
 * After the client's FIN, a download the limiter holds is probed: a chunk goes to the client past the rate
 * (still taken from the bucket), and another after PROBE_MS. A client that left answers the first with a
 * reset and the second write fails, which ends the relay; a client that only half-closed gets both.
 */
const PROBES = 2;
const PROBE_MS = 50;

/** The relay a socket belongs to (its slot's field, wire/socket-slot.ts), for the shared handlers below. */
function relayOf(socket: Socket): Relay | undefined {
  return slotIf(socket)?.relay as Relay | undefined;
}

class Relay implements RelayHandle, Listed<Relay> {
  readonly stats: Stats;
  done = false;
  /** Neighbours in its ticker's list (joinTicker). */
  prevLive: Relay | null = null;
  nextLive: Relay | null = null;
  // Starts true: the shared tick's phase is arbitrary, so the first (partial) tick must not count as idle.
  private active = true;
  private idleFor = 0;
  readonly tickMs: number;
  /** client → upstream: the client is paused while the upstream is full or the user over its rate */
  readonly toUpstream: Valve;
  /** upstream → client */
  readonly toClient: Valve;
  /** After a clean close: the sockets whose 'close' the cutoff timer still waits for. */
  private waitClient = false;
  private waitUpstream = false;
  private cutoff: NodeJS.Timeout | undefined;
  /** The client sent its FIN (we passed it on; the download may go on, or the client is gone). */
  private clientEnded = false;
  private probes = 0;
  private probeTimer: NodeJS.Timeout | undefined;
  /** A side whose read filled node's whole read buffer was switched to bulk reads (paced-reads.ts bulkReads). */
  private bulkUp = false;
  private bulkDown = false;
  /** The client's unsent bound is raised to BULK_UNSENT (unsent-limit.ts unsentBulk): it takes a bulk download. */
  private unsentRaised = false;

  constructor(
    readonly client: Socket,
    readonly upstream: Socket,
    private readonly options: RelayOptions,
  ) {
    this.tickMs = Math.max(10, Math.min(options.idleTimeoutMs, options.flushIntervalMs ?? 5000));
    const stats = (this.stats = new Stats(options.meter, options.limiter, options.bytes));
    this.toUpstream = stats.valve(client, CLIENT_CREDIT);
    this.toClient = stats.valve(upstream, 0, upstream);
    stats.pace(upstream);

    slotOf(client).relay = this;
    slotOf(upstream).relay = this;
    // The client's 'data', 'end' and 'close' listeners are these already when its dial's hold handed them over.
    const handed = takeHandedListeners(client);
    if (!handed) client.on('data', onClientData);
    upstream.on('data', onUpstreamData);
    client.on('drain', onClientDrain);
    upstream.on('drain', onUpstreamDrain);
    if (!handed) client.on('end', onClientEnd);
    upstream.on('end', onUpstreamEnd);
    if (!handed) client.on('close', onClose);
    upstream.on('close', onClose);
    client.on('error', onError);
    upstream.on('error', onError);

    const { clientHead, upstreamHead } = options;
    if (clientHead && clientHead.length > 0) this.clientData(clientHead);
    if (upstreamHead && upstreamHead.length > 0 && !this.done) this.upstreamData(upstreamHead);
    if (this.done) return;
    if (client.destroyed || upstream.destroyed) {
      this.finish('closed');
      return;
    }
    // A head over the user's rate (or not taken by the other side yet) leaves its side paused.
    if (!this.toUpstream.held) client.resume();
    if (!this.toClient.held) upstream.resume();
    joinTicker(this);
  }

  clientData(chunk: Buffer): void {
    const n = chunk.length;
    this.active = true;
    if (this.stats.sent(n)) {
      this.finish('limit');
      return;
    }
    this.toUpstream.passed(n, this.upstream.write(chunk));
    if (n === NODE_READ && !this.bulkUp && !this.stats.meter.bounded) {
      this.bulkUp = true;
      bulkReads(this.client, this.upstream);
    }
  }

  upstreamData(chunk: Buffer): void {
    const n = chunk.length;
    this.active = true;
    if (this.stats.received(n)) {
      this.finish('limit');
      return;
    }
    const valve = this.toClient;
    valve.passed(n, this.client.write(chunk));
    if (valve.overRate && this.clientEnded) this.probe();
    if (this.bulkDown) {
      // More sent than a client could hold unread, and this write taken at once: it keeps draining. The first
      // write it does not take at once puts the bound back.
      if (this.unsentRaised === valve.sinkFull && (this.unsentRaised || this.stats.down > BULK_UNSENT)) {
        this.unsentRaised = !this.unsentRaised;
        unsentBulk(this.client, this.unsentRaised);
      }
    } else if (n === NODE_READ && !this.stats.meter.bounded) {
      this.bulkDown = true;
      bulkReads(this.upstream, this.client);
    }
  }

  /** The client's FIN: passed on (half-close); a download held by the limiter is probed (see PROBES). */
  clientEnd(): void {
    this.clientEnded = true;
    this.upstream.end();
    if (this.toClient.overRate) this.probe();
  }

  private probe(): void {
    if (this.probes >= PROBES || this.probeTimer !== undefined || this.done) return;
    this.probes += 1;
    this.probeTimer = setTimeout(probeNow, this.probes === 1 ? 0 : PROBE_MS, this);
  }

  /** One chunk past the limiter's hold (it stays held: the next chunk pauses the upstream again). */
  probeNow(): void {
    this.probeTimer = undefined;
    if (!this.done) this.toClient.nudge();
  }

  /** Called by the shared ticker every tickMs. */
  tick(): void {
    this.stats.flush();
    if (this.active) {
      this.active = false;
      this.idleFor = 0;
      return;
    }
    this.idleFor += this.tickMs;
    if (this.idleFor >= this.options.idleTimeoutMs) this.finish('idle');
  }

  stop(): void {
    this.finish('stopped');
  }

  finish(end: RelayEnd): void {
    if (this.done) return;
    this.done = true;
    this.stats.end = end;
    leaveTicker(this);
    this.toUpstream.close();
    this.toClient.close();
    if (this.probeTimer !== undefined) clearTimeout(this.probeTimer);
    const { client, upstream } = this;
    client.off('data', onClientData);
    upstream.off('data', onUpstreamData);
    client.off('drain', onClientDrain);
    upstream.off('drain', onUpstreamDrain);
    client.off('end', onClientEnd);
    upstream.off('end', onUpstreamEnd);
    // onError stays: a late error (a reset racing the destroy) finds the relay done and does nothing, and must
    // not crash the process (kept rather than swapped for a no-op: two listener changes fewer per socket).
    if (end === 'closed') {
      // One side is gone; the other ends once it has flushed what it was given (destroySoon), and a peer
      // that stops reading is cut off after the idle timeout. onClose (still attached) counts the sockets
      // down and clears the cutoff.
      this.waitClient = !client.closed;
      this.waitUpstream = !upstream.closed;
      client.destroySoon();
      upstream.destroySoon();
      if (this.waitClient || this.waitUpstream) this.cutoff = setTimeout(cutOff, this.options.idleTimeoutMs, this).unref();
    } else {
      client.off('close', onClose);
      upstream.off('close', onClose);
      client.destroy();
      upstream.destroy();
    }
    this.stats.flush();
    this.options.end?.relayEnded(this.stats);
  }

  /** A socket closed: the end of a running relay, or one side fewer to wait for after it. */
  closed(socket: Socket): void {
    if (!this.done) {
      this.finish('closed');
      return;
    }
    if (socket === this.client) this.waitClient = false;
    else this.waitUpstream = false;
    if (!this.waitClient && !this.waitUpstream && this.cutoff !== undefined) {
      clearTimeout(this.cutoff);
      this.cutoff = undefined;
    }
  }
}

// The listeners every relay attaches, shared: `this` is the socket, its relay is found in its slot. The client's
// three are also its dial's hold's (CLIENT_LISTENERS): before the relay starts they tell the hold (hold.ts).
function onClientData(this: Socket, chunk: Buffer): void {
  const relay = relayOf(this);
  if (relay !== undefined) relay.clientData(chunk);
  else heldData(this, chunk);
}
function onUpstreamData(this: Socket, chunk: Buffer): void {
  relayOf(this)!.upstreamData(chunk);
}
// A side paused by the limiter stays paused through the other side's 'drain' (the valve keeps both reasons).
function onClientDrain(this: Socket): void {
  relayOf(this)!.toClient.drained();
}
function onUpstreamDrain(this: Socket): void {
  relayOf(this)!.toUpstream.drained();
}
// Half-close is passed on: the other side may still be sending.
function onClientEnd(this: Socket): void {
  const relay = relayOf(this);
  if (relay !== undefined) relay.clientEnd();
  else heldGone(this);
}
function onUpstreamEnd(this: Socket): void {
  relayOf(this)!.client.end();
}
function onClose(this: Socket): void {
  const relay = relayOf(this);
  if (relay !== undefined) relay.closed(this);
  else heldGone(this);
}

/** A tunnel client's listeners for its dial's hold to attach and hand over to the relay (hold.ts Hold, release). */
export const CLIENT_LISTENERS: HoldListeners = { data: onClientData, end: onClientEnd, close: onClose };
function onError(this: Socket): void {
  relayOf(this)!.finish('error');
}
function probeNow(r: Relay): void {
  r.probeNow();
}
function cutOff(r: Relay): void {
  r.client.destroy();
  r.upstream.destroy();
}

/**
 * Relays by tick length, each group on one unref'd interval that stops when the group empties. A live list,
 * not a Set (no hash per relay; src/connlog/live-list.ts says what a long-lived Set keeps).
 */
const tickers = new Map<number, { relays: LiveList<Relay>; timer: NodeJS.Timeout }>();

function joinTicker(r: Relay): void {
  let group = tickers.get(r.tickMs);
  if (!group) {
    const relays = new LiveList<Relay>();
    const timer = setInterval(() => {
      // finish() inside tick() removes that relay only; the walk has its successor already.
      for (let each = relays.first; each !== null;) {
        const next = each.nextLive;
        each.tick();
        each = next;
      }
    }, r.tickMs);
    timer.unref();
    group = { relays, timer };
    tickers.set(r.tickMs, group);
  }
  group.relays.add(r);
}

function leaveTicker(r: Relay): void {
  const group = tickers.get(r.tickMs);
  if (!group || !group.relays.remove(r) || group.relays.size > 0) return;
  clearInterval(group.timer);
  tickers.delete(r.tickMs);
}

/** Starts relaying; returns at once. Both sockets are owned by the relay from here on. */
export function relay(client: Socket, upstream: Socket, options: RelayOptions): RelayHandle {
  return new Relay(client, upstream, options);
}
