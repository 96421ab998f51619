// One user's live limits as the data path sees them: the rate (a token bucket shared by every connection of
// the user, both directions), the connection cap, and the user's running relays (so disable and delete can
// stop them). Modelled on 3proxy's bandlim (one bucket per user over all its connections) and gost's
// x/limiter traffic limiter, but enforced by backpressure: a relay that takes more than the bucket holds
// pauses reading the socket it read from and is woken when the bucket has refilled — the chunk already read
// is always forwarded, nothing is dropped. Per chunk: one clock read, a few number operations, no allocation.
// The wake-up runs on one timer per user, re-armed with refresh() (no new Timeout per pause).
// A store may hold 10,000 users, most of them idle with no rate or connection cap: the sets and the list
// below are made when first needed, so such a user's limiter is a handful of numbers.
import { performance } from 'node:perf_hooks';

/**
 * One user's live limits as a relay consults them (UserLimiter below): a rate shared by all
 * the user's connections, enforced by pausing the socket that was read (backpressure, nothing dropped), and
 * the registry that lets disable/delete stop the user's running relays. `take` is per chunk: no allocation.
 */
export interface RelayLimiter {
  /** Counts bytes just relayed; false: the user is over its rate — pause reading and call wait(). */
  take(bytes: number): boolean;
  /** Calls `wake` (the same function each time, made once per relay) when the user may read again. */
  wait(wake: () => void): void;
  /** Registers a running relay (stopped by stopAll); the caller detaches it through what this returns. */
  attach(relay: Stoppable): RelayAttachment;
  /** The rate now (bytes per second, 0 = none): bounds the datagrams a UDP association queues (src/proxy/udp-associate.ts). */
  readonly rateBytesPerSec?: number;
}

/**
 * Tokens a bucket holds at most: 1/8 s of rate, and for a slow rate up to 1/4 s of it (at most 64 KiB), so
 * bursts stay small against the rate itself: a 10 KiB/s user starts with 2.5 KiB, not six seconds of its rate
 * (its upstream is read in pieces of 1/16 s: src/proxy/paced-reads.ts). A quarter second also rides out a
 * stalled event loop without losing the rate.
 */
export function burstFor(rate: number): number {
  return Math.max(Math.floor(rate / 8), Math.min(64 * 1024, Math.floor(rate / 4)));
}

/** How often a throttled user's bucket is looked at. */
const WAKE_MS = 10;

/** A relay the limiter can stop (src/proxy/relay.ts RelayHandle). */
export interface Stoppable {
  stop(): void;
}

/**
 * A relay's place in its user's list of running relays, from attach() to its detach(). The list is threaded
 * through these places (each holds its neighbours) instead of a Set: one user's relays are added and deleted
 * at every tunnel, and a long-lived Set's hash table sits in V8's old generation, where every rehash (steady adds
 * and deletes cause one every few dozen) leaves the previous table behind, linked to the next, with the relays
 * it held. Until the next full collection every scavenge takes those stale entries as roots, so each relay of
 * the chain — its sockets, stream states and buffers — was copied and promoted instead of dying young
 * (docs/benchmarks.md, "M2 per tunnel: the scavenger's share"). A place taken out keeps no link.
 */
export class RelayAttachment {
  prev: RelayAttachment | null = null;
  next: RelayAttachment | null = null;
  /** Set while in its limiter's list: detach() after stopAll() (or twice) does nothing. */
  attached = true;

  constructor(
    readonly relay: Stoppable,
    private readonly list: RelayList,
  ) {}

  /** Takes the relay out of its user's list (idempotent). */
  detach(): void {
    if (!this.attached) return;
    this.attached = false;
    const list = this.list;
    const { prev, next } = this;
    if (prev === null) list.head = next;
    else prev.next = next;
    if (next === null) list.tail = prev;
    else next.prev = prev;
    this.prev = null;
    this.next = null;
    list.count--;
  }
}

/** One user's running relays, oldest first (RelayAttachment above says why not a Set). */
class RelayList {
  head: RelayAttachment | null = null;
  tail: RelayAttachment | null = null;
  count = 0;

  add(relay: Stoppable): RelayAttachment {
    const a = new RelayAttachment(relay, this);
    a.prev = this.tail;
    if (this.tail === null) this.head = a;
    else this.tail.next = a;
    this.tail = a;
    this.count++;
    return a;
  }

  /** Every relay, each taken out of the list first. */
  takeAll(): Stoppable[] {
    const out: Stoppable[] = [];
    for (let a = this.head; a !== null; a = this.head) {
      a.detach();
      out.push(a.relay);
    }
    return out;
  }
}

export class UserLimiter implements RelayLimiter {
  /** bytes per second, both directions together; 0 = none */
  private rate = 0;
  private burst = 64 * 1024;
  private tokens = 64 * 1024;
  private last = performance.now();
  private waiters: Set<() => void> | null = null;
  /** The other of two sets swapped at each wake, so a waiter that waits again lands in the next round. */
  private spare: Set<() => void> | null = null;
  private timer: NodeJS.Timeout | undefined;
  private relays: RelayList | null = null;
  /** Concurrent connections allowed; 0 = no cap. */
  maxConnections = 0;
  /** Connections counted open (connectionOpened .. connectionClosed). */
  active = 0;
  /** Admissions not yet opened: the expiry time of each (admitted but not counted open yet). */
  private reserved: number[] | null = null;

  constructor(
    readonly user: string,
    /** How long an admission holds a slot before its connection is counted open (the handshake's bound). */
    private readonly reserveMs = 15_000,
  ) {}

  get rateBytesPerSec(): number {
    return this.rate;
  }

  /** Changes the rate live: running connections follow at their next chunk (or wake, when lifted). */
  setRate(rate: number): void {
    this.refill();
    this.rate = Math.max(0, Math.floor(rate));
    this.burst = burstFor(this.rate);
    this.tokens = Math.min(this.tokens, this.burst);
    if (this.rate === 0) this.wakeAll();
  }

  take(bytes: number): boolean {
    if (this.rate === 0) return true;
    this.refill();
    this.tokens -= bytes;
    return this.tokens > 0;
  }

  wait(wake: () => void): void {
    if (this.rate === 0) {
      wake();
      return;
    }
    (this.waiters ??= new Set()).add(wake);
    if (this.timer === undefined) {
      this.timer = setTimeout(() => this.onTimer(), WAKE_MS);
      this.timer.unref();
    } else {
      this.timer.refresh();
    }
  }

  attach(relay: Stoppable): RelayAttachment {
    return (this.relays ??= new RelayList()).add(relay);
  }

  /** Stops every running relay of the user (disable, delete). Returns how many. */
  stopAll(): number {
    const relays = this.relays;
    if (relays === null) {
      this.wakeAll();
      return 0;
    }
    const taken = relays.takeAll();
    for (const r of taken) r.stop();
    this.wakeAll();
    return taken.length;
  }

  get running(): number {
    return this.relays?.count ?? 0;
  }

  /**
   * Reserves a connection slot at admission (false: the cap is reached). The slot is the connection's once
   * it is counted open; a reservation whose connection never opens (a handshake that failed after auth)
   * lapses after reserveMs. Exact under concurrency: admission and reservation are one synchronous step.
   */
  reserve(now: number): boolean {
    if (this.maxConnections === 0) return true;
    const reserved = (this.reserved ??= []);
    while (reserved.length > 0 && reserved[0]! <= now) reserved.shift();
    if (this.active + reserved.length >= this.maxConnections) return false;
    reserved.push(now + this.reserveMs);
    return true;
  }

  opened(): void {
    this.active += 1;
    if (this.reserved !== null && this.reserved.length > 0) this.reserved.shift();
  }

  closed(): void {
    if (this.active > 0) this.active -= 1;
  }

  /** Timers off (the user is gone); waiting relays are woken so nothing stays paused. */
  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.wakeAll();
  }

  private refill(): void {
    const now = performance.now();
    const t = this.tokens + ((now - this.last) * this.rate) / 1000;
    this.tokens = t > this.burst ? this.burst : t;
    this.last = now;
  }

  private onTimer(): void {
    if (this.waiters === null || this.waiters.size === 0) return;
    this.refill();
    if (this.rate === 0 || this.tokens > 0) this.wakeAll();
    else this.timer?.refresh();
  }

  private wakeAll(): void {
    const woken = this.waiters;
    if (woken === null || woken.size === 0) return;
    this.waiters = this.spare ?? new Set();
    this.spare = woken;
    for (const w of woken) w();
    woken.clear();
    // Someone waited again while being woken: keep the timer going for them.
    if (this.waiters.size > 0 && this.rate > 0) this.timer?.refresh();
  }
}
